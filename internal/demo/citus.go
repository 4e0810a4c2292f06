package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Distribute turns the demo's data cluster into a Citus coordinator with the
// given workers and distributes the demo's protected tables by their unit
// column, colocated: patients and visits by patient_id, so that each
// patient's rows of both tables live in the same shard group and the
// per-patient stage of every DP query runs inside the shards. Every node must
// have been started with citus.Settings. Call it after Setup.
//
// Citus propagates neither CREATE DATABASE nor the roles made before the
// extension existed, so the reader role and the database hospital (with the
// extension, citus.CreateDatabase) are created on every worker here; the reader's column grants
// are re-applied on the coordinator once the tables are distributed, which
// propagates them to the shards. A primary key of a distributed table must
// include the distribution column: visits' becomes (patient_id, visit_id).
// Distribute is idempotent.
func Distribute(ctx context.Context, coord *pgcluster.Cluster, workers []*pgcluster.Cluster, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("demo")
	if len(workers) == 0 {
		return errors.New("demo: Distribute needs at least one Citus worker")
	}
	ds := opts.Policy
	if ds == nil {
		var err error
		if ds, err = HospitalPolicy(); err != nil {
			return err
		}
	}
	pw := ""
	if opts.Passwords {
		pw = ReaderRole
	}
	start := time.Now()
	for _, w := range workers {
		if err := prepareWorker(ctx, w, pw); err != nil {
			return fmt.Errorf("citus worker %s: %w", addr(w), err)
		}
	}
	if err := citus.CreateDatabase(ctx, coord, workers, Database); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, coord.DSN(Database))
	if err != nil {
		return fmt.Errorf("connect to the citus coordinator %s: %w", addr(coord), err)
	}
	defer conn.Close(context.Background())
	var distributed int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid IN ('patients'::regclass, 'visits'::regclass)").Scan(&distributed); err != nil {
		return err
	}
	if distributed < 2 {
		// The foreign key from visits to patients is dropped while the two
		// tables are distributed one after the other, and added back once
		// both are (Citus accepts it between colocated tables on their
		// distribution column).
		if err := execAll(ctx, conn,
			"ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_patient_id_fkey",
			"ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_pkey",
			"ALTER TABLE visits ADD PRIMARY KEY (patient_id, visit_id)",
			"SELECT create_distributed_table('patients', 'patient_id')",
			"SELECT create_distributed_table('visits', 'patient_id', colocate_with => 'patients')",
			"SELECT truncate_local_data_after_distributing_table('visits')",
			"SELECT truncate_local_data_after_distributing_table('patients')",
			"ALTER TABLE visits ADD FOREIGN KEY (patient_id) REFERENCES patients",
			"ANALYZE patients",
			"ANALYZE visits",
		); err != nil {
			return fmt.Errorf("distribute the demo tables: %w", err)
		}
	}
	if err := grantReader(ctx, coord.DSN(Database), ds); err != nil {
		return fmt.Errorf("grant the reader on the distributed tables: %w", err)
	}
	log.Info("demo tables distributed with Citus", zap.Int("workers", len(workers)), zap.Duration("took", time.Since(start)))
	return nil
}

// prepareWorker creates, on one worker, what Citus does not propagate: the
// reader role, made before the extension existed, and the database with the
// same privileges as on the coordinator (citus.CreateDatabase then adds the
// extension).
func prepareWorker(ctx context.Context, w *pgcluster.Cluster, readerPassword string) error {
	admin, err := pgx.Connect(ctx, w.DSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	if err := ensureRole(ctx, admin, ReaderRole, readerPassword); err != nil {
		return err
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", Database).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if err := execAll(ctx, admin, "CREATE DATABASE "+ident(Database)); err != nil {
			return err
		}
	}
	if err := execAll(ctx, admin,
		"REVOKE ALL ON DATABASE "+ident(Database)+" FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+ident(Database)+" TO "+ident(ReaderRole),
		"ALTER ROLE "+ident(ReaderRole)+" SET default_transaction_read_only = on",
	); err != nil {
		return err
	}
	return nil
}
