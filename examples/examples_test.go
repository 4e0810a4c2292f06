package examples

import (
	"bytes"
	"os"
	"testing"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/policy"
)

// The embedded files are the files on disk, and they load.
func TestEmbeddedFiles(t *testing.T) {
	for name, got := range map[string][]byte{"dpproxy.yaml": Config(), "policies/hospital.yaml": HospitalPolicy()} {
		disk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, disk) {
			t.Errorf("embedded %s differs from the file", name)
		}
	}
	cfg, err := config.Load("dpproxy.yaml")
	if err != nil {
		t.Fatalf("examples/dpproxy.yaml: %v", err)
	}
	dss, err := policy.LoadDir(cfg.Path(cfg.Policies))
	if err != nil {
		t.Fatalf("policies of examples/dpproxy.yaml: %v", err)
	}
	for _, ds := range dss {
		if _, ok := cfg.Datasets[ds.Name]; !ok {
			t.Errorf("policy %s has no datasets entry in examples/dpproxy.yaml", ds.Name)
		}
	}
	ds, err := policy.Parse(bytes.NewReader(HospitalPolicy()), "hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The demo contract of issue 2.
	b := ds.AnalystBudget("alice")
	if ds.Name != "hospital" || b.Epsilon != 3 || b.Delta != 1e-6 || ds.Defaults.Epsilon != 0.1 {
		t.Errorf("hospital policy: name %s, budget %+v, default ε %v; want hospital, ε=3, δ=1e-6, 0.1", ds.Name, b, ds.Defaults.Epsilon)
	}
	for _, a := range []string{"alice", "bob"} {
		if _, ok := cfg.Analysts[a]; !ok {
			t.Errorf("analyst %s missing from examples/dpproxy.yaml", a)
		}
	}
}
