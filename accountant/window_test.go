package accountant

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/policy"
)

func TestWindowOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := 30 * 24 * time.Hour
	tests := []struct {
		name      string
		start     time.Time
		now       time.Time
		wantStart time.Time
		wantRenew bool
	}{
		{"first charge opens a window", time.Time{}, t0, t0, false},
		{"inside the window", t0, t0.Add(w - time.Second), t0, false},
		{"at the end it renews", t0, t0.Add(w), t0.Add(w), true},
		{"several windows later: aligned", t0, t0.Add(3*w + time.Hour), t0.Add(3 * w), true},
		{"a clock behind never renews", t0, t0.Add(-time.Hour), t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotStart, gotRenew := WindowOf(tt.start, tt.now, w)
			if !gotStart.Equal(tt.wantStart) || gotRenew != tt.wantRenew {
				t.Errorf("WindowOf(%v, %v) = %v, %v; want %v, %v", tt.start, tt.now, gotStart, gotRenew, tt.wantStart, tt.wantRenew)
			}
		})
	}
}

func TestPolicy_WindowErrors(t *testing.T) {
	base := `dataset: clinic
privacy_unit: patient
tables:
  visits:
    unit_column: patient_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
`
	tests := []struct{ name, budget, want string }{
		{"window without lifetime", "budget: {epsilon: 1, window: 30d}", "needs budget.lifetime.epsilon"},
		{"lifetime without window", "budget: {epsilon: 1, lifetime: {epsilon: 3}}", "needs budget.window"},
		{"lifetime below window", "budget: {epsilon: 1, window: 30d, lifetime: {epsilon: 0.5}}", "at least budget.epsilon"},
		{"bad window", "budget: {epsilon: 1, window: monthly, lifetime: {epsilon: 3}}", "between 1h and 3650d"},
		{"team without epsilon", "budget: {epsilon: 1}\nteams: {t1: {members: [a]}}", "needs epsilon"},
		{"analyst in two teams", "budget: {epsilon: 1}\nteams: {t1: {members: [a], epsilon: 1}, t2: {members: [a], epsilon: 1}}", "one team per dataset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policy.Parse(strings.NewReader(base+tt.budget+"\n"), "clinic.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
