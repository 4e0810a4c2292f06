package integration

import (
	"context"
	"testing"
	"time"
)

// TestAttack79_ColumnListAliasPoisonsOtherAnalyst: attack round 79
// through a real `dpproxy serve`: round 78's fix (checkCallColumn) lets
// alias.f through when f is the alias itself, but with a column list the
// alias's column is c, so PostgreSQL calls ts_stat(alias) on the scalar
// and runs its text (pgsql TestAttack79_AliasWithColumnListNamedAfterFunction).
// iso_a sets statement_timeout on the shared shadow connections; iso_b's
// catalog statements then see it. Expected once fixed: refused (42501),
// and iso_b sees the pool's 2s.
func TestAttack79_ColumnListAliasPoisonsOtherAnalyst(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := isolationProxy(t)

	const poison = `SELECT ts_stat.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', set_config(''statement_timeout'', ''1'', false))']) AS ts_stat(c)`
	accepted := 0
	for i := 0; i < 2; i++ {
		a := pgConnect(t, ctx, p.dsn("iso_a"))
		for j := 0; j < 4; j++ {
			if _, err := a.Exec(ctx, poison).ReadAll(); err == nil {
				accepted++
			}
		}
	}
	if accepted > 0 {
		t.Errorf("iso_a's ts_stat through ts_stat.ts_stat … AS ts_stat(c) was run %d of 8 times, want refused (42501)", accepted)
	}
	b := pgConnect(t, ctx, p.dsn("iso_b"))
	poisoned := 0
	for i := 0; i < 6; i++ {
		res, err := b.Exec(ctx, "SELECT current_setting('statement_timeout')").ReadAll()
		if err != nil {
			t.Fatalf("iso_b's SELECT current_setting: %v", err)
		}
		if got := string(res[0].Rows[0][0]); got != "2s" {
			poisoned++
		}
	}
	if poisoned > 0 {
		t.Errorf("iso_a changed iso_b's shadow sessions: %d of 6 of iso_b's catalog statements saw statement_timeout other than the pool's 2s", poisoned)
	}
}
