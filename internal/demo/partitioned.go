package demo

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// PartitionedCopy creates database name in the data cluster (unless it
// exists) with the demo's rows copied from database hospital, visits and
// patients each hash-partitioned by patient_id into parts partitions (the
// same bounds for both, so joins on the unit pair partition i with
// partition i), and the reader role's grants of the demo. For tests and
// benchmarks of DP queries on tables partitioned by their unit: the
// dataset's upstream DSN may name this database instead of hospital. Call
// it after Setup.
func PartitionedCopy(ctx context.Context, data *pgcluster.Cluster, name string, parts int, opts Options) error {
	if parts < 2 {
		return fmt.Errorf("demo: %d partitions; want at least 2", parts)
	}
	ds := opts.Policy
	if ds == nil {
		var err error
		if ds, err = HospitalPolicy(); err != nil {
			return err
		}
	}
	admin, err := pgx.Connect(ctx, data.DSN(Database))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if err := execAll(ctx, admin, "CREATE DATABASE "+ident(name)); err != nil {
		return err
	}
	dst, err := pgx.Connect(ctx, data.DSN(name))
	if err != nil {
		return err
	}
	defer dst.Close(context.Background())
	stmts := []string{
		`CREATE TABLE patients (patient_id bigint PRIMARY KEY, birth_year int NOT NULL, sex text NOT NULL, region text NOT NULL) PARTITION BY HASH (patient_id)`,
		`CREATE TABLE visits (visit_id bigint NOT NULL, patient_id bigint NOT NULL, visit_date date NOT NULL, department text NOT NULL,
			diagnosis text NOT NULL, age int NOT NULL, cost numeric(10,2) NOT NULL, length_of_stay int NOT NULL) PARTITION BY HASH (patient_id)`,
	}
	for i := 0; i < parts; i++ {
		for _, tbl := range []string{"visits", "patients"} {
			stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s_p%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)", tbl, i, tbl, parts, i))
		}
	}
	if err := execAll(ctx, dst, stmts...); err != nil {
		return err
	}
	for _, tbl := range []string{"patients", "visits"} {
		var buf bytes.Buffer
		if _, err := admin.PgConn().CopyTo(ctx, &buf, "COPY "+tbl+" TO STDOUT"); err != nil {
			return fmt.Errorf("copy %s out: %w", tbl, err)
		}
		if _, err := dst.PgConn().CopyFrom(ctx, &buf, "COPY "+tbl+" FROM STDIN"); err != nil {
			return fmt.Errorf("copy %s in: %w", tbl, err)
		}
	}
	if err := execAll(ctx, dst,
		"CREATE INDEX visits_patient_id ON visits (patient_id)",
		"REVOKE ALL ON DATABASE "+ident(name)+" FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+ident(name)+" TO "+ident(ReaderRole),
		"ANALYZE",
	); err != nil {
		return err
	}
	return grantReader(ctx, data.DSN(name), ds)
}
