package demo

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func hashData(d *Data) string {
	h := sha256.New()
	for _, p := range d.Patients {
		fmt.Fprintln(h, p)
	}
	for _, v := range d.Visits {
		fmt.Fprintln(h, v.ID, v.PatientID, v.Date.Format(time.DateOnly), v.Department, v.Diagnosis, v.Age, v.CostCents, v.LengthOfStay)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// demoData is Generate(Seed), computed once for the tests (slow under -race).
var demoData = sync.OnceValue(func() *Data { return Generate(Seed) })

func TestGenerate_Deterministic(t *testing.T) {
	t.Parallel()
	// Full size once (shared with the other tests), a smaller size for the
	// repeated and the other-seed runs: the same code path.
	a, b := hashData(demoData()), hashData(Generate(Seed))
	if a != b {
		t.Fatalf("Generate(Seed) gave different data on two runs: %s vs %s", a, b)
	}
	s1, s2 := hashData(generate(Seed, 5000, 20000)), hashData(generate(Seed+1, 5000, 20000))
	if s1 == s2 {
		t.Fatalf("seeds %d and %d gave the same data", Seed, Seed+1)
	}
}

func TestGenerate_ConformsToPolicy(t *testing.T) {
	ds, err := HospitalPolicy()
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	d := demoData()
	if len(d.Patients) != NumPatients || len(d.Visits) != NumVisits {
		t.Fatalf("got %d patients and %d visits, want %d and %d", len(d.Patients), len(d.Visits), NumPatients, NumVisits)
	}
	pt, _ := ds.Table("patients")
	vt, _ := ds.Table("visits")
	by, _ := pt.Column("birth_year")
	sex, _ := pt.Column("sex")
	region, _ := pt.Column("region")
	ids := map[int64]bool{}
	for _, p := range d.Patients {
		if ids[p.ID] {
			t.Fatalf("duplicate patient_id %d", p.ID)
		}
		ids[p.ID] = true
		if float64(p.BirthYear) < by.LowerNum || float64(p.BirthYear) > by.UpperNum {
			t.Errorf("patient %d: birth_year %d outside [%s, %s]", p.ID, p.BirthYear, by.Lower, by.Upper)
		}
		if !slices.Contains(sex.PublicValues, p.Sex) || !slices.Contains(region.PublicValues, p.Region) {
			t.Errorf("patient %d: sex %q / region %q not among the public values", p.ID, p.Sex, p.Region)
		}
	}

	date, _ := vt.Column("visit_date")
	dept, _ := vt.Column("department")
	age, _ := vt.Column("age")
	cost, _ := vt.Column("cost")
	los, _ := vt.Column("length_of_stay")
	lo, _ := time.Parse(time.DateOnly, date.Lower)
	hi, _ := time.Parse(time.DateOnly, date.Upper)
	perPatient := map[int64]int{}
	diagCount := map[string]int{}
	deptCount := map[string]int{}
	vids := map[int64]bool{}
	bad := 0
	for _, v := range d.Visits {
		if vids[v.ID] {
			t.Fatalf("duplicate visit_id %d", v.ID)
		}
		vids[v.ID] = true
		perPatient[v.PatientID]++
		diagCount[v.Diagnosis]++
		deptCount[v.Department]++
		switch {
		case !ids[v.PatientID],
			v.Date.Before(lo) || v.Date.After(hi),
			!slices.Contains(dept.PublicValues, v.Department),
			float64(v.Age) < age.LowerNum || float64(v.Age) > age.UpperNum,
			float64(v.CostCents)/100 < cost.LowerNum || float64(v.CostCents)/100 > cost.UpperNum,
			float64(v.LengthOfStay) < los.LowerNum || float64(v.LengthOfStay) > los.UpperNum,
			v.Diagnosis == "":
			if bad++; bad < 10 {
				t.Errorf("visit %+v violates the policy", v)
			}
		}
	}
	if len(perPatient) != NumPatients {
		t.Errorf("%d patients have visits, want all %d", len(perPatient), NumPatients)
	}
	hist := make([]int, MaxVisitsPerPatient+2)
	for _, n := range perPatient {
		if n < 1 || n > MaxVisitsPerPatient {
			t.Fatalf("a patient has %d visits, want 1..%d", n, MaxVisitsPerPatient)
		}
		hist[n]++
	}
	// A realistic skew: one visit is the most common, the tail reaches 20.
	if hist[1] <= hist[2] || hist[2] <= hist[5] || hist[5] <= hist[10] || hist[MaxVisitsPerPatient] == 0 {
		t.Errorf("visits-per-patient histogram %v is not decreasing with a tail to %d", hist[1:], MaxVisitsPerPatient)
	}
	if len(diagCount) < 25 {
		t.Errorf("%d distinct diagnoses, want about 30", len(diagCount))
	}
	rare := 0
	for _, n := range diagCount {
		if n < 100 {
			rare++
		}
	}
	if rare < 2 {
		t.Errorf("%d diagnoses with fewer than 100 visits, want a few rare ones: %v", rare, diagCount)
	}
	for _, dv := range dept.PublicValues {
		if deptCount[dv] == 0 {
			t.Errorf("department %q has no visits", dv)
		}
	}
	var maxCost int64
	for _, v := range d.Visits {
		maxCost = max(maxCost, v.CostCents)
	}
	if maxCost < 1_000_000 { // ≥ 10,000.00: a long tail
		t.Errorf("largest cost %d cents: want a long tail above 10000", maxCost)
	}
}

func itoa(i int64) string { return fmt.Sprint(i) }
