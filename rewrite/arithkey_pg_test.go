package rewrite

import (
	"testing"
	"time"
)

// TestArithKey_RowsOutsideDomain: an arithmetic key's SQL must not fail on
// rows whose field lies outside the key's domain (years past the policy's
// bounds, infinite dates). The integer cast PostgreSQL would apply
// overflows there, and an error after the charge would tell the analyst,
// exactly and without noise, whether such a row exists: with
// CAST(extract(year FROM visit_date) AS smallint) + (32767 − T) the query
// fails if and only if a row (of those its WHERE keeps) has a year after T.
func TestArithKey_RowsOutsideDomain(t *testing.T) {
	ctx, conn := freshConn(t, time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO visits (visit_id, patient_id, visit_date) VALUES
		(1, 1, '2022-05-01'), (2, 2, '2900-01-01'), (3, 3, 'infinity'), (4, 4, '-infinity'), (5, 5, '4000-01-01 BC')`); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	for _, key := range []string{
		"CAST(extract(year FROM visit_date) AS smallint) + 30000",
		"CAST(extract(year FROM visit_date) AS smallint) - 30000",
		"CAST(extract(year FROM visit_date) AS smallint) + 0",
		"CAST(extract(year FROM visit_date) AS integer) % 7",
		"CAST(extract(doy FROM visit_date) AS bigint) + 1",
		"extract(year FROM visit_date) % 10",
	} {
		q := "SELECT " + key + " AS k, COUNT(*) FROM visits GROUP BY 1"
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		rows, err := conn.Query(ctx, p.SQL)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Errorf("%s: the emitted SQL fails on rows outside the key's domain: %v", key, err)
		}
	}
}
