// Package demo creates the demo dataset of `dpproxy demo` and docker-compose:
// database hospital with generated patients and visits (fixed seed), plus the
// least-privilege roles and databases the proxy needs, all in one PostgreSQL
// cluster.
//
// Roles (created with LOGIN and a password when Options.Passwords says so;
// the throwaway cluster of `dpproxy demo` trusts loopback connections):
//
//   - dpproxy_reader: CONNECT on hospital only, SELECT only on the columns the
//     policy exposes (column-level GRANTs, unit column included),
//     default_transaction_read_only=on. The proxy's upstream role.
//   - dpproxy_ledger: owns database dpproxy_ledger.
//   - dpproxy_shadow_owner: owns database hospital_shadow (the proxy builds
//     the shadow catalog there at start-up).
//   - dpproxy_shadow: CONNECT on hospital_shadow only; no CREATE, no TEMP.
//     Analysts' catalog statements run as this role.
//
// CONNECT on hospital and dpproxy_ledger and TEMP on hospital_shadow are
// revoked from PUBLIC.
//
// Setup is idempotent: data already loaded (marked by a COMMENT on database
// hospital) is not generated again, and roles and grants are re-applied.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Names of the demo's databases and roles.
const (
	Database         = "hospital"
	LedgerDatabase   = "dpproxy_ledger"
	ShadowDatabase   = "hospital_shadow"
	ReaderRole       = "dpproxy_reader"
	LedgerRole       = "dpproxy_ledger"
	ShadowOwnerRole  = "dpproxy_shadow_owner"
	ShadowRole       = "dpproxy_shadow"
	dataMarkerPrefix = "dpproxy demo data"
)

// Roles lists the demo's roles.
var Roles = []string{ReaderRole, LedgerRole, ShadowOwnerRole, ShadowRole}

// Options configures Setup.
type Options struct {
	// Policy decides the column grants; nil means the embedded
	// examples/policies/hospital.yaml.
	Policy *policy.Dataset
	// Seed of the generated data; 0 means Seed.
	Seed uint64
	// Passwords: when true each role gets its name as password (as in
	// examples/dpproxy.yaml), for servers that do not trust loopback
	// (docker-compose). The throwaway demo cluster trusts loopback.
	Passwords bool
	Logger    *zap.Logger
	// Patients and Visits: sizes of the generated data; zero means
	// NumPatients and NumVisits (the demo's contract). Smaller sizes are for
	// tests; Visits must lie in [Patients, 20·Patients].
	Patients, Visits int
}

// Result holds the DSNs of a set-up demo cluster.
type Result struct {
	// AdminDSN is the superuser DSN of database hospital (the steward's
	// direct access, printed as "upstream:" by dpproxy demo).
	AdminDSN string
	// UpstreamDSN is the reader role's DSN of hospital.
	UpstreamDSN string
	// LedgerDSN is the ledger role's DSN of dpproxy_ledger.
	LedgerDSN string
	// ShadowDSN is the shadow role's DSN of hospital_shadow.
	ShadowDSN string
	// ShadowAdminDSN is the shadow owner's DSN of hospital_shadow.
	ShadowAdminDSN string
	// Generated is false when existing data was reused.
	Generated bool
}

// HospitalPolicy parses the embedded examples/policies/hospital.yaml.
func HospitalPolicy() (*policy.Dataset, error) {
	return policy.Parse(strings.NewReader(string(examples.HospitalPolicy())), "examples/policies/hospital.yaml")
}

// Setup generates and loads the demo data (unless already there) and
// creates the roles and databases of the proxy. c must allow superuser
// connections (Cluster.DSN).
func Setup(ctx context.Context, c *pgcluster.Cluster, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("demo")
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

	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("connect to %s as superuser: %w", c.DSN("postgres"), err)
	}
	defer admin.Close(context.Background())

	pw := func(role string) string {
		if opts.Passwords {
			return role
		}
		return ""
	}
	for _, role := range Roles {
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
		if err := load(ctx, c.DSN(Database), generate(seed, nP, nV)); err != nil {
			return nil, err
		}
		if _, err := admin.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS %s", ident(Database), literal(marker))); err != nil {
			return nil, err
		}
		generated = true
		log.Info("demo data generated", zap.Int("patients", nP), zap.Int("visits", nV), zap.Duration("took", time.Since(start)))
	}

	for _, db := range []struct{ name, owner string }{{LedgerDatabase, LedgerRole}, {ShadowDatabase, ShadowOwnerRole}} {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db.name).Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", ident(db.name), ident(db.owner))); err != nil {
				return nil, fmt.Errorf("create database %s: %w", db.name, err)
			}
		}
	}
	if err := execAll(ctx, admin,
		"REVOKE ALL ON DATABASE "+ident(Database)+" FROM PUBLIC",
		"REVOKE ALL ON DATABASE "+ident(LedgerDatabase)+" FROM PUBLIC",
		"REVOKE TEMPORARY ON DATABASE "+ident(ShadowDatabase)+" FROM PUBLIC",
		"GRANT CONNECT ON DATABASE "+ident(Database)+" TO "+ident(ReaderRole),
		"GRANT CONNECT ON DATABASE "+ident(ShadowDatabase)+" TO "+ident(ShadowRole),
		"ALTER ROLE "+ident(ReaderRole)+" SET default_transaction_read_only = on",
		"ALTER ROLE "+ident(ShadowRole)+" SET default_transaction_read_only = on",
	); err != nil {
		return nil, err
	}
	if err := grantReader(ctx, c.DSN(Database), ds); err != nil {
		return nil, err
	}
	if err := lockShadow(ctx, c.DSN(ShadowDatabase)); err != nil {
		return nil, err
	}
	return &Result{
		AdminDSN:       c.DSN(Database),
		UpstreamDSN:    c.RoleDSN(ReaderRole, pw(ReaderRole), Database),
		LedgerDSN:      c.RoleDSN(LedgerRole, pw(LedgerRole), LedgerDatabase),
		ShadowDSN:      c.RoleDSN(ShadowRole, pw(ShadowRole), ShadowDatabase),
		ShadowAdminDSN: c.RoleDSN(ShadowOwnerRole, pw(ShadowOwnerRole), ShadowDatabase),
		Generated:      generated,
	}, nil
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
// exposes (the whole table for public tables), and nothing else.
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
		if t.Public {
			stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON %s TO %s", tbl, r))
			continue
		}
		var cols []string
		for _, c := range t.VisibleColumns() {
			cols = append(cols, ident(c))
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
