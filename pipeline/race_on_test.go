//go:build race

package pipeline

// raceBuild: under the race detector sync.Pool keeps fewer objects, so
// the parser allocates more per statement.
const raceBuild = true
