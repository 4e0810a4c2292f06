package demo

import (
	"math"
	"math/rand/v2"
	"time"
)

// Seed is the fixed seed of the demo data: every run generates the same rows.
const Seed uint64 = 20200101

// Sizes of the demo data (the contract of `dpproxy demo`).
const (
	NumPatients = 50_000
	NumVisits   = 200_000
	// MaxVisitsPerPatient bounds the visits of one patient (and equals the
	// policy's max_rows_per_unit, so contribution bounding keeps every visit
	// of a patient in a group unless the patient has more than 20).
	MaxVisitsPerPatient = 20
)

// Value domains. They must lie within examples/policies/hospital.yaml (a
// test checks it).
var (
	Sexes   = []string{"F", "M"}
	Regions = []string{"north", "south", "east", "west", "central"}
	// Departments are the public_values of visits.department.
	Departments = []string{"cardiology", "emergency", "neurology", "oncology", "orthopedics", "pediatrics", "surgery"}
	firstDate   = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	lastDate    = time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC)
)

const (
	minAge, maxAge       = 0, 110
	maxCost              = 20000
	maxLengthOfStay      = 60
	minBirthYear         = 1915
	maxBirthYear         = 2019
	sexWeightF           = 0.52
	geometricVisitsParam = 0.245 // P(no further visit); mean of the law truncated to 1..20 ≈ 4.01, so little adjustment is needed
)

var regionWeights = []float64{0.22, 0.24, 0.17, 0.15, 0.22}

// diagnosis is one ICD-10-like diagnosis, the department that treats it, and
// its relative frequency there. A few are rare on purpose: grouping by
// diagnosis needs DP partition selection, and rare groups must disappear.
type diagnosis struct {
	name   string
	dept   string
	weight float64
}

var diagnoses = []diagnosis{
	{"I10 essential hypertension", "cardiology", 30},
	{"I48 atrial fibrillation", "cardiology", 14},
	{"I20 angina pectoris", "cardiology", 10},
	{"I50 heart failure", "cardiology", 8},
	{"I42 cardiomyopathy", "cardiology", 0.4},
	{"S09 head injury", "emergency", 12},
	{"R07 chest pain", "emergency", 14},
	{"T78 allergic reaction", "emergency", 6},
	{"S52 forearm fracture", "emergency", 8},
	{"T63 venomous animal bite", "emergency", 0.15},
	{"G43 migraine", "neurology", 20},
	{"G40 epilepsy", "neurology", 10},
	{"G20 Parkinson disease", "neurology", 6},
	{"G35 multiple sclerosis", "neurology", 4},
	{"A81 Creutzfeldt-Jakob disease", "neurology", 0.03},
	{"C50 breast cancer", "oncology", 14},
	{"C34 lung cancer", "oncology", 10},
	{"C18 colon cancer", "oncology", 8},
	{"C61 prostate cancer", "oncology", 9},
	{"C47 peripheral nerve tumour", "oncology", 0.1},
	{"M17 knee osteoarthritis", "orthopedics", 16},
	{"M54 back pain", "orthopedics", 22},
	{"M75 shoulder lesion", "orthopedics", 8},
	{"J06 upper respiratory infection", "pediatrics", 25},
	{"J45 asthma", "pediatrics", 12},
	{"H66 otitis media", "pediatrics", 10},
	{"E84 cystic fibrosis", "pediatrics", 0.2},
	{"K35 appendicitis", "surgery", 10},
	{"K40 inguinal hernia", "surgery", 9},
	{"K80 cholelithiasis", "surgery", 9},
	{"Q79 congenital diaphragmatic hernia", "surgery", 0.05},
}

// Department mix for adults; children (age < 16) go to pediatrics with
// probability 0.7 and otherwise follow this mix.
var deptWeights = map[string]float64{
	"cardiology": 0.18, "emergency": 0.22, "neurology": 0.12, "oncology": 0.12,
	"orthopedics": 0.17, "pediatrics": 0.02, "surgery": 0.17,
}

// Patient is one row of patients.
type Patient struct {
	ID        int64
	BirthYear int
	Sex       string
	Region    string
}

// Visit is one row of visits.
type Visit struct {
	ID           int64
	PatientID    int64
	Date         time.Time
	Department   string
	Diagnosis    string
	Age          int
	CostCents    int64 // cost in cents: numeric(10,2) without float rounding
	LengthOfStay int
}

// Data is the generated demo dataset.
type Data struct {
	Patients []Patient
	Visits   []Visit
}

// Generate returns the demo data for a seed; the same seed gives the same
// rows. Visits per patient follow a geometric law truncated to 1..20 (most
// patients come once or twice, a few come often), then are adjusted so that
// the total is exactly NumVisits: while the sum is too small a random patient
// with fewer than 20 visits gets one more, while it is too large a random
// patient with more than one visit loses one. The adjustment moves a few
// percent of the mass and keeps the skew.
func Generate(seed uint64) *Data {
	return generate(seed, NumPatients, NumVisits)
}

func generate(seed uint64, nPatients, nVisits int) *Data {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d := &Data{Patients: make([]Patient, nPatients), Visits: make([]Visit, 0, nVisits)}
	for i := range d.Patients {
		d.Patients[i] = Patient{
			ID:        int64(i + 1),
			BirthYear: birthYear(r),
			Sex:       pickSex(r),
			Region:    Regions[pickWeighted(r, regionWeights)],
		}
	}
	counts := visitCounts(r, nPatients, nVisits)
	days := int(lastDate.Sub(firstDate).Hours()/24) + 1
	var diagsByDept = map[string][]diagnosis{}
	for _, dg := range diagnoses {
		diagsByDept[dg.dept] = append(diagsByDept[dg.dept], dg)
	}
	for i, p := range d.Patients {
		for range counts[i] {
			date := firstDate.AddDate(0, 0, r.IntN(days))
			age := date.Year() - p.BirthYear
			if r.IntN(2) == 0 { // birthday not yet this year
				age--
			}
			age = clampInt(age, minAge, maxAge)
			dept := pickDepartment(r, age)
			dg := pickDiagnosis(r, diagsByDept[dept])
			d.Visits = append(d.Visits, Visit{
				ID:           int64(len(d.Visits) + 1),
				PatientID:    p.ID,
				Date:         date,
				Department:   dept,
				Diagnosis:    dg.name,
				Age:          age,
				CostCents:    cost(r, dept),
				LengthOfStay: lengthOfStay(r, dept),
			})
		}
	}
	return d
}

// visitCounts draws 1..MaxVisitsPerPatient visits per patient and adjusts
// them to sum to exactly total (see Generate).
func visitCounts(r *rand.Rand, n, total int) []int {
	counts := make([]int, n)
	sum := 0
	for i := range counts {
		k := 1
		for k < MaxVisitsPerPatient && r.Float64() >= geometricVisitsParam {
			k++
		}
		counts[i] = k
		sum += k
	}
	for sum < total {
		if i := r.IntN(n); counts[i] < MaxVisitsPerPatient {
			counts[i]++
			sum++
		}
	}
	for sum > total {
		if i := r.IntN(n); counts[i] > 1 {
			counts[i]--
			sum--
		}
	}
	return counts
}

// birthYear: an ageing population, more patients born 1940–1990.
func birthYear(r *rand.Rand) int {
	y := int(math.Round(1962 + 22*r.NormFloat64()))
	return clampInt(y, minBirthYear, maxBirthYear)
}

func pickSex(r *rand.Rand) string {
	if r.Float64() < sexWeightF {
		return "F"
	}
	return "M"
}

func pickDepartment(r *rand.Rand, age int) string {
	if age < 16 && r.Float64() < 0.7 {
		return "pediatrics"
	}
	w := make([]float64, len(Departments))
	for i, d := range Departments {
		w[i] = deptWeights[d]
	}
	return Departments[pickWeighted(r, w)]
}

func pickDiagnosis(r *rand.Rand, ds []diagnosis) diagnosis {
	w := make([]float64, len(ds))
	for i, d := range ds {
		w[i] = d.weight
	}
	return ds[pickWeighted(r, w)]
}

// cost in cents: log-normal with a department-specific median and a long
// right tail, capped at the policy's upper bound (20,000.00).
func cost(r *rand.Rand, dept string) int64 {
	median, sigma := 180.0, 0.9
	switch dept {
	case "emergency":
		median, sigma = 350, 1.0
	case "oncology":
		median, sigma = 1800, 1.1
	case "surgery":
		median, sigma = 2600, 0.9
	case "cardiology":
		median, sigma = 420, 1.0
	case "neurology":
		median, sigma = 300, 1.0
	case "orthopedics":
		median, sigma = 260, 0.9
	}
	c := median * math.Exp(sigma*r.NormFloat64())
	cents := int64(math.Round(c * 100))
	return max(0, min(cents, maxCost*100))
}

// lengthOfStay in days: 0 (outpatient) for most visits, geometric tails for
// surgery, oncology and emergency admissions; capped at 60.
func lengthOfStay(r *rand.Rand, dept string) int {
	pAdmit, mean := 0.03, 2.0
	switch dept {
	case "surgery":
		pAdmit, mean = 0.8, 4
	case "oncology":
		pAdmit, mean = 0.3, 6
	case "emergency":
		pAdmit, mean = 0.2, 2
	case "cardiology", "neurology":
		pAdmit, mean = 0.1, 4
	}
	if r.Float64() >= pAdmit {
		return 0
	}
	los := 1 + int(math.Floor(r.ExpFloat64()*mean))
	return min(los, maxLengthOfStay)
}

func pickWeighted(r *rand.Rand, w []float64) int {
	total := 0.0
	for _, x := range w {
		total += x
	}
	u := r.Float64() * total
	for i, x := range w {
		if u < x {
			return i
		}
		u -= x
	}
	return len(w) - 1
}

func clampInt(x, lo, hi int) int { return max(lo, min(x, hi)) }
