package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"reflect"
	"testing"
)

// TestFingerprint_EveryField changes each leaf field of a plan (walking
// into the first element of every slice and through every pointer) and
// checks that the fingerprint changes: the encoding covers every field,
// including fields added later.
func TestFingerprint_EveryField(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	p, err := Rewrite(ds, "SELECT department, COUNT(*), AVG(cost), SUM(cost) / COUNT(*) AS r FROM visits "+
		"WHERE age > 3 GROUP BY department HAVING SUM(age) > 1 ORDER BY 2 DESC LIMIT 3 OFFSET 1")
	if err != nil {
		t.Fatal(err)
	}
	if n := checkEveryField(t, p); n < 30 {
		t.Errorf("only %d leaf fields exercised", n)
	}
	// And the plan of every accepted golden (joins fill Plan.Join).
	for _, gc := range loadGolden(t) {
		if p, err := Rewrite(gc.ds, gc.query); err == nil {
			checkEveryField(t, p)
		}
	}
}

// checkEveryField mutates each leaf of p in turn, checks that the
// fingerprint changes, restores it, and returns the number of leaves.
func checkEveryField(t *testing.T, p *Plan) int {
	t.Helper()
	base := dpplan.Fingerprint(p)
	if base != p.Fingerprint {
		t.Fatalf("dpplan.Fingerprint(p) = %s, p.Fingerprint = %s", base, p.Fingerprint)
	}
	leaves := 0
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				// Unexported fields (Plan.table, Plan.where) are
				// skipped by the fingerprint, as by JSON.
				if f := v.Type().Field(i); f.Name != "Fingerprint" && f.IsExported() {
					walk(path+"."+f.Name, v.Field(i))
				}
			}
			return
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
			return
		case reflect.Interface:
			// A condition: dropping it must change the fingerprint
			// (its fields are a copy inside the interface, not settable).
			if v.IsNil() {
				return
			}
			old := v.Interface()
			v.Set(reflect.Zero(v.Type()))
			if dpplan.Fingerprint(p) == base {
				t.Errorf("%s: dropping %s leaves the fingerprint unchanged", p.SQL, path)
			}
			v.Set(reflect.ValueOf(old))
			leaves++
			return
		case reflect.Slice:
			if v.Len() > 0 {
				walk(path+"[0]", v.Index(0))
			}
			old := v.Len()
			v.SetLen(old - min(old, 1)) // one element fewer
			if old > 0 && dpplan.Fingerprint(p) == base {
				t.Errorf("%s: dropping an element of %s leaves the fingerprint unchanged", p.SQL, path)
			}
			v.SetLen(old)
			return
		}
		if !v.CanSet() {
			// Unexported (e.g. Plan.table): skipped by the
			// fingerprint, as by JSON.
			return
		}
		old := reflect.New(v.Type()).Elem()
		old.Set(v)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Float64:
			v.SetFloat(v.Float() + 0.5)
		default:
			t.Fatalf("%s: kind %s not exercised by this test", path, v.Kind())
		}
		leaves++
		if dpplan.Fingerprint(p) == base {
			t.Errorf("%s: changing %s leaves the fingerprint unchanged", p.SQL, path)
		}
		v.Set(old)
	}
	walk("Plan", reflect.ValueOf(p).Elem())
	if dpplan.Fingerprint(p) != base {
		t.Fatal("the test did not restore the plan")
	}
	return leaves
}
