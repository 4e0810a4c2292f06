//go:build race

package integration

// raceBuild: the test binary runs under the race detector, so the dpproxy
// binary it drives is built with -race too.
const raceBuild = true
