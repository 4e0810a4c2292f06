// Package demo creates the demo dataset of `dpproxy demo` and docker-compose:
// database hospital with generated patients and visits (fixed seed), plus the
// least-privilege roles and databases the proxy needs, in TWO PostgreSQL
// clusters:
//
//   - the data cluster: database hospital (the data), database
//     dpproxy_ledger (the accountant's ledger) and their roles;
//   - the shadow cluster: only the shadow catalog, in a database named like
//     the dataset (hospital), so that current_database(), \l and JDBC
//     catalog names match what the analyst connected to.
//
// The shadow catalog must not share a cluster with the data: some statistics
// are cluster-wide and readable by every role of the cluster, whatever
// database it is connected to (pg_stat_database's tup_inserted/tup_returned
// of every database, pg_database_size() of any database, pg_stat_activity of
// every session). Analysts' catalog statements run on the shadow connection,
// so in a shared cluster they could read exact row counts of the data —
// exactly what DP protects. Setup refuses two connections to the same
// cluster (same pg_control_system().system_identifier).
//
// Roles (created with LOGIN and a password when Options.Passwords says so;
// the throwaway clusters of `dpproxy demo` trust loopback connections):
//
//   - data cluster, dpproxy_reader: CONNECT on hospital only, SELECT only on
//     the columns the policy exposes (column-level GRANTs, unit column
//     included), default_transaction_read_only=on. The proxy's upstream role.
//   - data cluster, dpproxy_ledger: owns database dpproxy_ledger.
//   - shadow cluster, dpproxy_shadow_owner: owns the shadow's database
//     hospital (the proxy builds the shadow catalog there at start-up).
//   - shadow cluster, dpproxy_shadow: CONNECT on the shadow's hospital only;
//     no CREATE, no TEMP, default_transaction_read_only=on and
//     track_activities=off (other analysts' catalog statements, which share
//     this role, do not show in pg_stat_activity). Analysts' catalog
//     statements run as this role.
//
// The shadow roles do not exist in the data cluster, and the data roles not
// in the shadow cluster. In both clusters every database's CONNECT (and
// TEMP) is revoked from PUBLIC and granted only to the role that needs it.
//
// Setup is idempotent: data already loaded (marked by a COMMENT on database
// hospital) is not generated again, and roles and grants are re-applied. It
// also removes, from the data cluster, the shadow database and roles that
// earlier versions put there (database hospital_shadow).
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/shadowacl"
	"github.com/dpproxy/dpproxy/pgsql"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// Names of the demo's databases and roles.
const (
	// Database is the data database in the data cluster and the dataset's
	// name.
	Database       = "hospital"
	LedgerDatabase = "dpproxy_ledger"
	// ShadowDatabase is the shadow catalog's database in the shadow
	// cluster: named like the dataset, so analysts see the name they
	// connected to.
	ShadowDatabase  = Database
	ReaderRole      = "dpproxy_reader"
	LedgerRole      = "dpproxy_ledger"
	ShadowOwnerRole = "dpproxy_shadow_owner"
	ShadowRole      = "dpproxy_shadow"

	// legacyShadowDatabase is where versions before the two-cluster demo
	// put the shadow catalog, inside the data cluster.
	legacyShadowDatabase = "hospital_shadow"
	dataMarkerPrefix     = "dpproxy demo data"
	shadowComment        = "dpproxy shadow catalog of dataset " + Database + ": the exposed schema, no rows"
)

var (
	// DataRoles are the demo's roles in the data cluster.
	DataRoles = []string{ReaderRole, LedgerRole}
	// ShadowRoles are the demo's roles in the shadow cluster.
	ShadowRoles = []string{ShadowOwnerRole, ShadowRole}
	// Roles lists all the demo's roles (DataRoles, then ShadowRoles).
	Roles = []string{ReaderRole, LedgerRole, ShadowOwnerRole, ShadowRole}
)

// Options configures Setup.
type Options struct {
	// Policy decides the column grants; nil means the embedded
	// examples/policies/hospital.yaml.
	Policy *policy.Dataset
	// Seed of the generated data; 0 means Seed.
	Seed uint64
	// Passwords: when true each role gets its name as password (as in
	// examples/dpproxy.yaml), for servers that do not trust loopback
	// (docker-compose). The throwaway demo clusters trust loopback.
	Passwords bool
	Logger    *zap.Logger
	// Patients and Visits: sizes of the generated data; zero means
	// NumPatients and NumVisits (the demo's contract). Smaller sizes are for
	// tests; Visits must lie in [Patients, 20·Patients].
	Patients, Visits int
}

// Result holds the DSNs of the set-up demo clusters.
type Result struct {
	// AdminDSN is the superuser DSN of database hospital in the data
	// cluster (the steward's direct access, printed as "upstream:" by
	// dpproxy demo).
	AdminDSN string
	// UpstreamDSN is the reader role's DSN of hospital (data cluster).
	UpstreamDSN string
	// LedgerDSN is the ledger role's DSN of dpproxy_ledger (data cluster).
	LedgerDSN string
	// ShadowDSN is the shadow role's DSN of hospital in the shadow cluster.
	ShadowDSN string
	// ShadowAdminDSN is the shadow owner's DSN of hospital in the shadow
	// cluster.
	ShadowAdminDSN string
	// Generated is false when existing data was reused.
	Generated bool
}

// HospitalPolicy parses the embedded examples/policies/hospital.yaml.
func HospitalPolicy() (*policy.Dataset, error) {
	return policy.Parse(strings.NewReader(string(examples.HospitalPolicy())), "examples/policies/hospital.yaml")
}

// ErrSameCluster is wrapped by Setup's error when the data and the shadow
// cluster are one server.
var ErrSameCluster = errors.New("the shadow catalog must live in a different PostgreSQL cluster than the data: cluster-wide statistics (pg_stat_database, pg_database_size, pg_stat_activity) would show the data's row counts and sessions to analysts")

// Setup generates and loads the demo data into the data cluster (unless
// already there), creates the ledger database, and creates the shadow
// catalog's database and roles in the shadow cluster. Both clusters must
// allow superuser connections (Cluster.DSN) and be different servers.
func Setup(ctx context.Context, data, shadow *pgcluster.Cluster, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("demo")
	if data == nil || shadow == nil {
		return nil, errors.New("demo: Setup needs a data cluster and a separate shadow cluster")
	}
	ds := opts.Policy
	if ds == nil {
		var err error
		if ds, err = HospitalPolicy(); err != nil {
			return nil, err
		}
	}
	if ds.Name != Database {
		return nil, fmt.Errorf("the demo policy must be for dataset %q, not %q", Database, ds.Name)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = Seed
	}
	nP, nV := opts.Patients, opts.Visits
	if nP == 0 && nV == 0 {
		nP, nV = NumPatients, NumVisits
	}
	if nP < 1 || nV < nP || nV > MaxVisitsPerPatient*nP {
		return nil, fmt.Errorf("demo sizes: %d visits for %d patients; want 1 to %d visits per patient", nV, nP, MaxVisitsPerPatient)
	}
	marker := fmt.Sprintf("%s (seed %d, %d patients, %d visits)", dataMarkerPrefix, seed, nP, nV)

	admin, err := pgx.Connect(ctx, data.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("connect to the data cluster %s as superuser: %w", addr(data), err)
	}
	defer admin.Close(context.Background())
	shadowAdmin, err := pgx.Connect(ctx, shadow.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("connect to the shadow cluster %s as superuser: %w", addr(shadow), err)
	}
	defer shadowAdmin.Close(context.Background())
	dataID, err := systemID(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("data cluster: %w", err)
	}
	shadowID, err := systemID(ctx, shadowAdmin)
	if err != nil {
		return nil, fmt.Errorf("shadow cluster: %w", err)
	}
	if dataID == shadowID {
		return nil, fmt.Errorf("%w; %s and %s are the same cluster (system identifier %d): start a second PostgreSQL server for the shadow", ErrSameCluster, addr(data), addr(shadow), dataID)
	}

	pw := func(role string) string {
		if opts.Passwords {
			return role
		}
		return ""
	}

	// The data cluster.
	if err := dropLegacyShadow(ctx, admin, log); err != nil {
		return nil, err
	}
	for _, role := range DataRoles {
		if err := ensureRole(ctx, admin, role, pw(role)); err != nil {
			return nil, err
		}
	}
	var comment *string
	err = admin.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", Database).Scan(&comment)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("look up database %s: %w", Database, err)
	}
	generated := false
	if !exists || comment == nil || *comment != marker {
		if exists {
			log.Info("dropping incomplete or different demo database", zap.String("database", Database))
			if _, err := admin.Exec(ctx, "DROP DATABASE "+ident(Database)+" WITH (FORCE)"); err != nil {
				return nil, fmt.Errorf("drop database %s: %w", Database, err)
			}
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(Database)); err != nil {
			return nil, fmt.Errorf("create database %s: %w", Database, err)
		}
		start := time.Now()
		if err := load(ctx, data.DSN(Database), generate(seed, nP, nV)); err != nil {
			return nil, err
		}
		if _, err := admin.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS %s", ident(Database), literal(marker))); err != nil {
			return nil, err
		}
		generated = true
		log.Info("demo data generated", zap.Int("patients", nP), zap.Int("visits", nV), zap.Duration("took", time.Since(start)))
	}
	if err := ensureDatabase(ctx, admin, LedgerDatabase, LedgerRole); err != nil {
		return nil, err
	}
	if err := execAll(ctx, admin,
		"REVOKE ALL ON DATABASE "+ident(Database)+" FROM PUBLIC",
		"REVOKE ALL ON DATABASE "+ident(LedgerDatabase)+" FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+ident(Database)+" TO "+ident(ReaderRole),
		"ALTER ROLE "+ident(ReaderRole)+" SET default_transaction_read_only = on",
	); err != nil {
		return nil, err
	}
	if err := grantReader(ctx, data.DSN(Database), ds); err != nil {
		return nil, err
	}

	// The shadow cluster.
	for _, role := range ShadowRoles {
		if err := ensureRole(ctx, shadowAdmin, role, pw(role)); err != nil {
			return nil, err
		}
	}
	if err := ensureDatabase(ctx, shadowAdmin, ShadowDatabase, ShadowOwnerRole); err != nil {
		return nil, err
	}
	if err := execAll(ctx, shadowAdmin,
		"ALTER DATABASE "+ident(ShadowDatabase)+" OWNER TO "+ident(ShadowOwnerRole),
		fmt.Sprintf("COMMENT ON DATABASE %s IS %s", ident(ShadowDatabase), literal(shadowComment)),
		// PUBLIC keeps no CONNECT anywhere: the shadow role reaches only
		// its database.
		"REVOKE ALL ON DATABASE "+ident(ShadowDatabase)+" FROM PUBLIC",
		"REVOKE ALL ON DATABASE postgres FROM PUBLIC",
		"REVOKE ALL ON DATABASE template1 FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+ident(ShadowDatabase)+" TO "+ident(ShadowRole),
		"ALTER ROLE "+ident(ShadowRole)+" SET default_transaction_read_only = on",
		// Analysts share this role: without this, pg_stat_activity would
		// show each analyst the others' catalog statements.
		"ALTER ROLE "+ident(ShadowRole)+" SET track_activities = off",
	); err != nil {
		return nil, err
	}
	if err := lockShadow(ctx, shadow.DSN(ShadowDatabase)); err != nil {
		return nil, err
	}
	// The shadow's second guard, as a steward would set it up: the
	// shadow role cannot execute volatile functions (ts_stat, pg_sleep…)
	// beyond those catalog statements may call.
	if _, err := shadowacl.RestrictFunctions(ctx, shadow.DSN(ShadowDatabase), ShadowRole, pgsql.CatalogFunctionNames()); err != nil {
		return nil, err
	}
	return &Result{
		AdminDSN:       data.DSN(Database),
		UpstreamDSN:    data.RoleDSN(ReaderRole, pw(ReaderRole), Database),
		LedgerDSN:      data.RoleDSN(LedgerRole, pw(LedgerRole), LedgerDatabase),
		ShadowDSN:      shadow.RoleDSN(ShadowRole, pw(ShadowRole), ShadowDatabase),
		ShadowAdminDSN: shadow.RoleDSN(ShadowOwnerRole, pw(ShadowOwnerRole), ShadowDatabase),
		Generated:      generated,
	}, nil
}

// addr is the cluster's host:port (DSNs may hold a password).
func addr(c *pgcluster.Cluster) string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// systemID returns the cluster's unique identifier (set by initdb).
func systemID(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var id int64
	if err := conn.QueryRow(ctx, "SELECT system_identifier FROM pg_catalog.pg_control_system()").Scan(&id); err != nil {
		return 0, fmt.Errorf("read the system identifier: %w", err)
	}
	return id, nil
}

// ensureDatabase creates the database, owned by owner, unless it exists.
func ensureDatabase(ctx context.Context, conn *pgx.Conn, name, owner string) error {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", ident(name), ident(owner))); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// dropLegacyShadow removes the shadow database and roles that earlier
// versions created in the data cluster (e.g. a kept --data-dir or docker
// volume).
func dropLegacyShadow(ctx context.Context, conn *pgx.Conn, log *zap.Logger) error {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", legacyShadowDatabase).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		log.Info("removing the shadow catalog of an earlier version from the data cluster", zap.String("database", legacyShadowDatabase))
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident(legacyShadowDatabase)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", legacyShadowDatabase, err)
		}
	}
	for _, role := range ShadowRoles {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", role).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		// The role's privileges live in the data cluster's databases
		// (CONNECT on database objects is in the shared catalog).
		for _, db := range []string{Database, LedgerDatabase} {
			if _, err := conn.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(db)+" FROM "+ident(role)); err != nil && !isUndefinedDatabase(err) {
				return fmt.Errorf("revoke the privileges of %s on %s: %w", role, db, err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+ident(role)); err != nil {
			return fmt.Errorf("drop role %s of an earlier version from the data cluster: %w", role, err)
		}
	}
	return nil
}

func isUndefinedDatabase(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "3D000"
}

func ensureRole(ctx context.Context, conn *pgx.Conn, role, password string) error {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", role).Scan(&n); err != nil {
		return err
	}
	verb := "ALTER"
	if n == 0 {
		verb = "CREATE"
	}
	pass := "PASSWORD NULL"
	if password != "" {
		pass = "PASSWORD " + literal(password)
	}
	sql := fmt.Sprintf("%s ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS %s", verb, ident(role), pass)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s role %s: %w", strings.ToLower(verb), role, err)
	}
	return nil
}

// load creates the tables and copies the rows in one transaction.
func load(ctx context.Context, dsn string, d *Data) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if err := execAll(ctx, tx.Conn(),
		`CREATE TABLE patients (
			patient_id bigint PRIMARY KEY,
			birth_year int NOT NULL,
			sex text NOT NULL,
			region text NOT NULL)`,
		`CREATE TABLE visits (
			visit_id bigint PRIMARY KEY,
			patient_id bigint NOT NULL REFERENCES patients,
			visit_date date NOT NULL,
			department text NOT NULL,
			diagnosis text NOT NULL,
			age int NOT NULL,
			cost numeric(10,2) NOT NULL,
			length_of_stay int NOT NULL)`,
	); err != nil {
		return err
	}
	// COPY in PostgreSQL's text format, encoded here: several times faster
	// than pgx's per-value encoding (which matters under -race in tests).
	// No value contains a tab, newline or backslash.
	var buf bytes.Buffer
	for _, p := range d.Patients {
		buf.WriteString(strconv.FormatInt(p.ID, 10) + "\t" + strconv.Itoa(p.BirthYear) + "\t" + p.Sex + "\t" + p.Region + "\n")
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, &buf, "COPY patients (patient_id, birth_year, sex, region) FROM STDIN"); err != nil {
		return fmt.Errorf("copy patients: %w", err)
	}
	buf.Reset()
	for _, v := range d.Visits {
		b := buf.AvailableBuffer()
		b = strconv.AppendInt(b, v.ID, 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, v.PatientID, 10)
		b = append(b, '\t')
		b = v.Date.AppendFormat(b, time.DateOnly)
		b = append(b, '\t')
		b = append(b, v.Department...)
		b = append(b, '\t')
		b = append(b, v.Diagnosis...)
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(v.Age), 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, v.CostCents/100, 10)
		b = append(b, '.', byte('0'+v.CostCents%100/10), byte('0'+v.CostCents%10), '\t')
		b = strconv.AppendInt(b, int64(v.LengthOfStay), 10)
		b = append(b, '\n')
		buf.Write(b)
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, &buf,
		"COPY visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay) FROM STDIN"); err != nil {
		return fmt.Errorf("copy visits: %w", err)
	}
	if err := execAll(ctx, tx.Conn(), "CREATE INDEX visits_patient_id ON visits (patient_id)"); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "ANALYZE")
	return err
}

// grantReader gives the reader role SELECT on exactly the columns the policy
// exposes (of public tables too), and nothing else.
func grantReader(ctx context.Context, dsn string, ds *policy.Dataset) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	r := ident(ReaderRole)
	stmts := []string{
		"REVOKE ALL ON SCHEMA public FROM PUBLIC",
		"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM " + r,
	}
	schemas := map[string]bool{}
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		schemas[t.Schema] = true
		tbl := ident(t.Schema) + "." + ident(t.Name)
		// Column grants survive a table-level REVOKE only if revoked too.
		stmts = append(stmts, fmt.Sprintf("REVOKE ALL ON %s FROM %s", tbl, r))
		// Public tables too: only their declared columns are read (DP
		// queries and the shadow's copy, internal/shadow).
		var cols []string
		for _, c := range t.VisibleColumns() {
			cols = append(cols, ident(c))
		}
		if len(cols) == 0 {
			continue
		}
		stmts = append(stmts, fmt.Sprintf("GRANT SELECT (%s) ON %s TO %s", strings.Join(cols, ", "), tbl, r))
	}
	for s := range schemas {
		stmts = append(stmts, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", ident(s), r))
	}
	return execAll(ctx, conn, stmts...)
}

// lockShadow leaves the shadow role no way to create objects.
func lockShadow(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return execAll(ctx, conn,
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"ALTER SCHEMA public OWNER TO "+ident(ShadowOwnerRole),
	)
}

func execAll(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", firstLine(s), err)
		}
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Load creates the demo's patients and visits tables in the database at
// dsn and fills them with d (for tests that need the demo data without a
// cluster of their own).
func Load(ctx context.Context, dsn string, d *Data) error { return load(ctx, dsn, d) }
