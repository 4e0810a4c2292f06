package doctor

import (
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/policy"
)

// checkSizes checks each table's declared max_rows (the public bound the
// planner's work bound and the answers' time slots rest on: rewrite's
// dpplan.Work, SECURITY.md "Time") against the table's live row count, as
// the data role. A table over its bound makes the work bound false (an
// answer could then take longer than its slot for reasons of the data), so
// it is a warning; a table without max_rows is one too, since its plans
// have no work bound. The count is read by the steward's tool only; it is
// never shown to analysts.
func checkSizes(ctx context.Context, r *Report, ds, dataDSN string, pol *policy.Dataset) error {
	up, err := connect(ctx, dataDSN)
	if err != nil {
		return fmt.Errorf("datasets.%s.upstream: connect: %w", ds, err)
	}
	defer up.Close(context.Background())
	for _, name := range pol.TableOrder {
		t := pol.Tables[name]
		if t.MaxRows == 0 {
			r.add(ds, false, "table %s declares no max_rows: its DP answers have no work bound and are padded to response_time or its next doubling after the fact (declare max_rows above its size, with room to grow)", t.Name)
			continue
		}
		var n int64
		q := "SELECT count(*) FROM " + quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
		if err := up.QueryRow(ctx, q).Scan(&n); err != nil {
			r.add(ds, false, "table %s could not be counted as the data role to check its max_rows: %s", t.Name, oneLine(err))
			continue
		}
		if n > t.MaxRows {
			r.add(ds, false, "table %s has %d rows, over its declared max_rows %d: work bounds and time slots of its DP answers are too small (raise max_rows)", t.Name, n, t.MaxRows)
			continue
		}
		r.add(ds, true, "table %s has %d rows, within its declared max_rows %d (%.0f%%)", t.Name, n, t.MaxRows, 100*float64(n)/float64(t.MaxRows))
	}
	return nil
}
