// Package examples embeds the example configuration and policy files, so
// that `dpproxy demo` writes and uses exactly the files the README documents.
// (go:embed cannot reach parent directories, hence this tiny package.)
package examples

import "embed"

// Files holds dpproxy.yaml and policies/*.yaml.
//
//go:embed dpproxy.yaml policies/*.yaml
var Files embed.FS

// Config returns examples/dpproxy.yaml.
func Config() []byte { return mustRead("dpproxy.yaml") }

// HospitalPolicy returns examples/policies/hospital.yaml.
func HospitalPolicy() []byte { return mustRead("policies/hospital.yaml") }

func mustRead(name string) []byte {
	b, err := Files.ReadFile(name)
	if err != nil {
		panic("examples: " + name + " is not embedded: " + err.Error()) // a build error, not a runtime one
	}
	return b
}
