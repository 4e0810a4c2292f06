package citus

import (
	"strings"
	"testing"
)

// Plans as Citus 13 prints them for EXPLAIN (VERBOSE, COSTS OFF), cut to
// the lines CheckPushDown reads; the coordinator listens on port 5000.
const (
	pushedDown = `HashAggregate
  Group Key: remote_scan.dp_k0
  ->  Custom Scan (Citus Adaptive)
        Task Count: 32
        Tasks Shown: One of 32
        ->  Task
              Query: SELECT worker_column_1 AS dp_k0 FROM (SELECT visits.patient_id) GROUP BY patient_id
              Node: host=127.0.0.1 port=5001 dbname=hospital
              ->  HashAggregate
                    Group Key: visits.department
                    ->  HashAggregate
                          Group Key: visits.patient_id, visits.department
                          ->  Seq Scan on public.visits_102040 visits
`
	// The per-unit GROUP BY over rows pulled to the coordinator (a
	// recursively planned subquery read back as an intermediate result).
	pulled = `Custom Scan (Citus Adaptive)
  ->  Distributed Subplan 1_1
        ->  Custom Scan (Citus Adaptive)
              Task Count: 32
              ->  Task
                    Node: host=127.0.0.1 port=5001 dbname=hospital
                    ->  Seq Scan on public.visits_102040 visits
  Task Count: 1
  ->  Task
        Node: host=localhost port=5000 dbname=hospital
        ->  HashAggregate
              Group Key: intermediate_result.patient_id
              ->  Function Scan on pg_catalog.read_intermediate_result intermediate_result
`
	// A literal spanning lines must not end the task.
	windowed = `Custom Scan (Citus Adaptive)
  Task Count: 4
  ->  Task
        Node: host=127.0.0.1 port=5002 dbname=dp
        ->  Subquery Scan on dp_rows
              Filter: (x = '
'::text)
              ->  WindowAgg
                    ->  Seq Scan on p0.t_1 t
`
	local = `HashAggregate
  Group Key: visits.patient_id
  ->  Seq Scan on public.visits
`
	nothingRead = `Custom Scan (Citus Adaptive)
  Task Count: 1
  ->  Task
        Node: host=localhost port=5000 dbname=dp
        ->  Aggregate
              ->  Result
                    One-Time Filter: false
`
)

func TestCheckPushDown(t *testing.T) {
	units := []string{"dp_unit", "dp_ju", "patient_id"}
	tests := []struct {
		name, plan, wantErr string
		workerKeys, windows int
	}{
		{"per-unit aggregate in the shards", pushedDown, "", 1, 0},
		{"per-unit aggregate on the coordinator", pulled, "the coordinator groups by the unit", 0, 0},
		{"per-unit window in the shards, literal over lines", windowed, "", 0, 1},
		{"not distributed", local, "no Citus custom scan", 0, 0},
		{"nothing read", nothingRead, "", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pd, err := CheckPushDown(tc.plan, 5000, units)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckPushDown = %v, want error %q", err, tc.wantErr)
			}
			if len(pd.WorkerGroupKeys) != tc.workerKeys || pd.WorkerWindows != tc.windows {
				t.Errorf("worker group keys %q, windows %d; want %d and %d", pd.WorkerGroupKeys, pd.WorkerWindows, tc.workerKeys, tc.windows)
			}
		})
	}
	// A group key of another column in the shards is a partial aggregate,
	// not the per-unit stage.
	partial := strings.Replace(pushedDown, "Group Key: visits.patient_id, visits.department", "Group Key: visits.department", 1)
	if _, err := CheckPushDown(partial, 5000, units); err == nil || !strings.Contains(err.Error(), "no worker task") {
		t.Errorf("CheckPushDown(partial aggregate only) = %v, want no worker task error", err)
	}
}
