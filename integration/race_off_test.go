//go:build !race

package integration

const raceBuild = false
