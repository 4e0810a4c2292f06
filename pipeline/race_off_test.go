//go:build !race

package pipeline

const raceBuild = false
