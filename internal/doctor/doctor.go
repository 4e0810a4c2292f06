// Package doctor checks the live privileges of a deployment's database
// roles against least privilege (SECURITY.md, "Least privilege"):
//
//   - the data role (each dataset's upstream DSN) is not superuser,
//     createrole, createdb, replication or bypassrls, belongs to none of
//     PostgreSQL's predefined roles that read or write everything or touch
//     server files, is read-only (default_transaction_read_only = on and no
//     write privilege: INSERT/UPDATE/DELETE/TRUNCATE on a table, CREATE on
//     the database or a schema, TEMP), may SELECT only the columns the
//     policy exposes (declared visible columns, of public tables too;
//     nothing else), and cannot connect to the ledger database;
//   - the ledger role is no superuser and cannot connect to the data
//     database;
//   - the shadow role is no superuser, cannot write, its protected tables
//     hold no rows, and it cannot connect to the data database;
//   - the shadow copies of public tables (internal/shadow, mirror.go) have
//     only declared columns and as many rows as upstream, within
//     public_max_rows;
//   - every declared column's live type honours its policy type
//     (internal/catalog; the proxy refuses to start otherwise);
//   - the data and shadow servers allow at least as many connections as
//     the proxy's pools may open (upstream_max_connections,
//     shadow_max_connections);
//   - this machine has the memory every analyst's sessions may keep in
//     the proxy (max_memory_per_analyst_mb), twice over (memory.go);
//   - each protected table's layout: distributed with Citus or
//     hash-partitioned by its unit column (the per-unit stage of DP queries
//     then runs per shard or per partition), a plain table, or split by
//     another column (a warning: no gain, and on Citus failures).
//
// Each check is reported as ok or as a warning naming what is broader than
// needed and how to narrow it. Doctor connects with the configured DSNs
// and, for the cross checks, with one role's credentials to another
// database; it never reads protected rows (only catalogs, row counts of
// the shadow's protected tables, which must be zero, and row counts of
// public tables). It may import config and policy.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/shadowacl"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Finding is one check's result.
type Finding struct {
	Dataset string // "" for deployment-wide checks
	OK      bool
	// Error: the proxy will not start this way (not OK either).
	Error   bool
	Message string
}

func (f Finding) String() string {
	state := "ok"
	switch {
	case f.Error:
		state = "ERROR"
	case !f.OK:
		state = "WARNING"
	}
	if f.Dataset == "" {
		return state + ": " + f.Message
	}
	return state + ": " + f.Dataset + ": " + f.Message
}

// Report is every finding of a run.
type Report struct{ Findings []Finding }

// Warnings counts the findings that are not ok and not errors.
func (r *Report) Warnings() int {
	n := 0
	for _, f := range r.Findings {
		if !f.OK && !f.Error {
			n++
		}
	}
	return n
}

// Errors counts the findings the proxy would not start with.
func (r *Report) Errors() int {
	n := 0
	for _, f := range r.Findings {
		if f.Error {
			n++
		}
	}
	return n
}

// fail adds an error: what stops the proxy.
func (r *Report) fail(ds string, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Dataset: ds, Error: true, Message: fmt.Sprintf(format, args...)})
}

func (r *Report) add(ds string, ok bool, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Dataset: ds, OK: ok, Message: fmt.Sprintf(format, args...)})
}

// predefinedRoles are PostgreSQL's built-in roles that grant reading or
// writing every table, or server files and programs.
var predefinedRoles = []string{"pg_read_all_data", "pg_write_all_data", "pg_read_server_files",
	"pg_write_server_files", "pg_execute_server_program"}

// Check runs every check of a deployment: its config and the policies of
// its datasets. An error means a configured database could not be reached
// at all (nothing could be checked there).
func Check(ctx context.Context, cfg *config.Config, policies map[string]*policy.Dataset) (*Report, error) {
	r := &Report{}
	limit, source := MemoryLimit()
	r.Findings = append(r.Findings, MemoryFinding(cfg, limit, source))
	names := make([]string, 0, len(cfg.Datasets))
	for n := range cfg.Datasets {
		names = append(names, n)
	}
	sort.Strings(names)
	ledgerRoleChecked := false
	for _, n := range names {
		dc := cfg.Datasets[n]
		ds := policies[n]
		if ds == nil {
			return nil, fmt.Errorf("dataset %s has no policy", n)
		}
		typesOK, err := checkTypes(ctx, r, n, dc.Upstream, ds)
		if err != nil {
			return nil, err
		}
		if err := checkData(ctx, r, n, dc.Upstream, cfg.Ledger, ds, typesOK); err != nil {
			return nil, err
		}
		if dc.ResponseTime.Duration == 0 {
			r.add(n, false, "response_time is off: the time of each DP answer shows how much work the data made upstream; set datasets.%s.response_time above the slowest DP query (SECURITY.md G5)", n)
		} else {
			r.add(n, true, "response_time pads every DP answer to %v", dc.ResponseTime.Duration)
		}
		if !ledgerRoleChecked {
			if err := checkLedger(ctx, r, cfg.Ledger); err != nil {
				return nil, err
			}
			ledgerRoleChecked = true
		}
		crossCheck(ctx, r, n, "ledger", cfg.Ledger, dc.Upstream, "the data database")
		if err := checkShadow(ctx, r, n, dc.Shadow, dc.Upstream, ds); err != nil {
			return nil, err
		}
		if err := checkConnectionLimits(ctx, r, n, "upstream", dc.Upstream, "upstream_max_connections", cfg.UpstreamMaxConnections); err != nil {
			return nil, err
		}
		if err := checkConnectionLimits(ctx, r, n, "shadow", dc.Shadow, "shadow_max_connections", cfg.ShadowMaxConnections); err != nil {
			return nil, err
		}
		if err := checkPublic(ctx, r, n, dc.Shadow, dc.Upstream, ds, dc.PublicMaxRows); err != nil {
			return nil, err
		}
		if err := checkSizes(ctx, r, n, dc.Upstream, ds); err != nil {
			return nil, err
		}
		if typesOK { // the layout's advice names the unit columns, which must exist
			if err := checkLayout(ctx, r, n, dc.Upstream, ds); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// checkTypes verifies the policy's column types against the live catalog
// (internal/catalog): the proxy refuses to start on a mismatch.
// It reports whether they match.
func checkTypes(ctx context.Context, r *Report, ds, dsn string, pol *policy.Dataset) (bool, error) {
	c, err := connect(ctx, dsn)
	if err != nil {
		return false, fmt.Errorf("%s: connect as the data role: %w", ds, err)
	}
	defer c.Close(context.Background())
	problems, err := catalog.Verify(ctx, c, pol)
	if err != nil {
		return false, err
	}
	for _, p := range problems {
		// catalog.Verify names the dataset first; the finding does too.
		r.fail(ds, "column types: %s (the proxy will not start)", strings.TrimPrefix(p, pol.Name+": "))
	}
	if len(problems) == 0 {
		r.add(ds, true, "column types: every declared column's live type honours its policy type")
	}
	return len(problems) == 0, nil
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return pgx.Connect(cctx, dsn)
}

// roleAttributes checks a role's attributes and predefined-role
// memberships; what says which role it is ("data role").
func roleAttributes(ctx context.Context, r *Report, ds, what string, c *pgx.Conn) error {
	var user string
	var super, createRole, createDB, repl, bypass bool
	if err := c.QueryRow(ctx, `SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls
		FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super, &createRole, &createDB, &repl, &bypass); err != nil {
		return fmt.Errorf("%s: read role attributes: %w", what, err)
	}
	var bad []string
	for _, a := range []struct {
		set  bool
		name string
	}{{super, "SUPERUSER"}, {createRole, "CREATEROLE"}, {createDB, "CREATEDB"}, {repl, "REPLICATION"}, {bypass, "BYPASSRLS"}} {
		if a.set {
			bad = append(bad, a.name)
		}
	}
	if len(bad) > 0 {
		r.add(ds, false, "%s %s has %s; it needs none of them (ALTER ROLE %s NO%s)", what, user, strings.Join(bad, ", "),
			quoteIdent(user), strings.Join(bad, " NO"))
	} else {
		r.add(ds, true, "%s %s is not superuser, createrole, createdb, replication or bypassrls", what, user)
	}
	var member []string
	if err := c.QueryRow(ctx, `SELECT coalesce(array_agg(r), '{}') FROM unnest($1::text[]) r
		WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) AND pg_has_role(current_user, r, 'USAGE')`, predefinedRoles).Scan(&member); err != nil {
		return fmt.Errorf("%s: read role memberships: %w", what, err)
	}
	if len(member) > 0 {
		r.add(ds, false, "%s %s is a member of %s, which reads or writes everything or server files (REVOKE %s FROM %s)",
			what, user, strings.Join(member, ", "), strings.Join(member, ", "), quoteIdent(user))
	}
	return nil
}

// checkData checks the data role of a dataset; typesOK says whether the
// policy's columns matched the catalog (checkTypes).
func checkData(ctx context.Context, r *Report, ds, dsn, ledgerDSN string, pol *policy.Dataset, typesOK bool) error {
	c, err := connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("datasets.%s.upstream: connect: %w", ds, err)
	}
	defer c.Close(context.Background())
	if err := roleAttributes(ctx, r, ds, "data role", c); err != nil {
		return err
	}
	user := c.Config().User

	// Read-only.
	var readOnly string
	if err := c.QueryRow(ctx, "SELECT current_setting('default_transaction_read_only')").Scan(&readOnly); err != nil {
		return err
	}
	writes, err := writePrivileges(ctx, c)
	if err != nil {
		return err
	}
	switch {
	case readOnly == "on" && len(writes) == 0:
		r.add(ds, true, "data role %s is read-only (default_transaction_read_only = on, no write privilege)", user)
	case len(writes) == 0:
		r.add(ds, true, "data role %s has no write privilege (default_transaction_read_only is off: ALTER ROLE %s SET default_transaction_read_only = on adds a second guard)", user, quoteIdent(user))
	default:
		r.add(ds, false, "data role %s can write: %s; it needs SELECT only (REVOKE them; ALTER ROLE %s SET default_transaction_read_only = on)",
			user, strings.Join(writes, "; "), quoteIdent(user))
	}

	// SELECT only on exposed columns. The relations of the citus
	// extension (its metadata views, readable by every role, e.g.
	// citus_tables) hold no rows of the data and are left out.
	type col struct{ schema, table, column string }
	rows, err := c.Query(ctx, `SELECT n.nspname, c.relname, a.attname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
			WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e' AND e.extname = 'citus')
		  AND has_column_privilege(current_user, c.oid, a.attnum, 'SELECT')
		ORDER BY 1, 2, a.attnum`)
	if err != nil {
		return fmt.Errorf("data role: column privileges: %w", err)
	}
	readable, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (col, error) {
		var x col
		err := row.Scan(&x.schema, &x.table, &x.column)
		return x, err
	})
	if err != nil {
		return err
	}
	// schema.table.column of the declared visible columns, of public
	// tables too (the emitter and the shadow's copy read only those).
	exposed := map[string]bool{}
	var protectedCols, publicCols int
	for _, name := range pol.TableOrder {
		t := pol.Tables[name]
		for _, cname := range t.VisibleColumns() {
			exposed[t.Schema+"."+t.Name+"."+cname] = true
			if t.Public {
				publicCols++
			} else {
				protectedCols++
			}
		}
	}
	var extra []string
	seen := map[string]bool{}
	for _, x := range readable {
		k := x.schema + "." + x.table + "." + x.column
		seen[k] = true
		if !exposed[k] {
			extra = append(extra, k)
		}
	}
	var missing []string
	for k := range exposed {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if !typesOK {
		// Comparing privileges with columns that do not exist would
		// advise grants on them (new-user run: a misspelt unit_column
		// drew REVOKE and GRANT advice).
		r.add(ds, false, "data role %s: its column privileges are compared with the policy once the policy's tables and columns match the database (fix the ERRORs)", user)
		extra, missing = nil, nil
	} else if len(extra) > 0 {
		r.add(ds, false, "data role %s can SELECT columns the policy does not expose: %s (REVOKE SELECT on them; grant only the exposed columns)",
			user, summarize(extra))
	} else {
		r.add(ds, true, "data role %s can SELECT only the %d exposed columns of the protected tables and the %d declared columns of the public tables", user, protectedCols, publicCols)
	}
	if len(missing) > 0 {
		r.add(ds, false, "data role %s cannot SELECT exposed columns %s: DP queries on them will fail (GRANT SELECT (…) ON … TO %s)",
			user, summarize(missing), quoteIdent(user))
	}
	crossCheck(ctx, r, ds, "data", dsn, ledgerDSN, "the ledger database")
	return nil
}

// writePrivileges lists what the connected role may write in its database.
func writePrivileges(ctx context.Context, c *pgx.Conn) ([]string, error) {
	var out []string
	rows, err := c.Query(ctx, `SELECT format('%s on %I.%I', p, n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
		     unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
		WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		  AND has_table_privilege(current_user, c.oid, p)
		UNION ALL
		SELECT format('CREATE on schema %I', nspname) FROM pg_namespace
		WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg_toast%' AND nspname NOT LIKE 'pg_temp%'
		  AND has_schema_privilege(current_user, oid, 'CREATE')
		UNION ALL
		SELECT format('%s on database %I', p, current_database())
		FROM unnest(ARRAY['CREATE', 'TEMP']) p WHERE has_database_privilege(current_user, current_database(), p)
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("write privileges: %w", err)
	}
	out, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return out, err
}

// crossCheck connects with the credentials of one role (fromDSN) to the
// database of another DSN (target) and warns when that works and the role
// can read or write any table there. It never fails: an unreachable
// database is reported.
func crossCheck(ctx context.Context, r *Report, ds, role, fromDSN, targetDSN, what string) {
	from, err1 := pgconn.ParseConfig(fromDSN)
	target, err2 := pgx.ParseConfig(targetDSN)
	if err1 != nil || err2 != nil {
		r.add(ds, false, "cannot parse the DSNs to check whether the %s role can reach %s", role, what)
		return
	}
	target.User, target.Password = from.User, from.Password
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, target)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "28000" || pe.Code == "28P01" || pe.Code == "3D000") {
			r.add(ds, true, "%s role %s cannot connect to %s (%s)", role, from.User, what, pe.Code)
			return
		}
		r.add(ds, false, "could not check whether the %s role %s can reach %s: %s", role, from.User, what, oneLine(err))
		return
	}
	defer c.Close(context.Background())
	var tables []string
	rows, err := c.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		  AND (has_table_privilege(current_user, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
		       OR has_any_column_privilege(current_user, c.oid, 'SELECT, INSERT, UPDATE'))
		ORDER BY 1`)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		r.add(ds, false, "%s role %s can connect to %s, and its privileges there could not be read: %s", role, from.User, what, oneLine(err))
		return
	}
	if len(tables) > 0 {
		r.add(ds, false, "%s role %s can connect to %s and use its tables %s (REVOKE CONNECT ON DATABASE %s FROM %s, and PUBLIC)",
			role, from.User, what, summarize(tables), quoteIdent(target.Database), quoteIdent(from.User))
		return
	}
	r.add(ds, false, "%s role %s can connect to %s (no table privileges there; REVOKE CONNECT ON DATABASE %s FROM PUBLIC, %s)",
		role, from.User, what, quoteIdent(target.Database), quoteIdent(from.User))
}

// checkLedger checks the ledger role's attributes.
func checkLedger(ctx context.Context, r *Report, dsn string) error {
	c, err := connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("ledger: connect: %w", err)
	}
	defer c.Close(context.Background())
	return roleAttributes(ctx, r, "", "ledger role", c)
}

// checkShadow checks the shadow role of a dataset.
func checkShadow(ctx context.Context, r *Report, ds, dsn, dataDSN string, pol *policy.Dataset) error {
	c, err := connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: connect: %w", ds, err)
	}
	defer c.Close(context.Background())
	if err := roleAttributes(ctx, r, ds, "shadow role", c); err != nil {
		return err
	}
	user := c.Config().User
	writes, err := writePrivileges(ctx, c)
	if err != nil {
		return err
	}
	if len(writes) > 0 {
		r.add(ds, false, "shadow role %s can write: %s (analysts' catalog statements run as this role; REVOKE them)", user, strings.Join(writes, "; "))
	} else {
		r.add(ds, true, "shadow role %s has no write privilege", user)
	}
	// The pool's connections set client_connection_check_interval
	// (internal/shadow, startupParams): PostgreSQL 14+ on a platform that
	// can check (Linux), or every catalog statement fails to connect.
	if _, err := c.Exec(ctx, "SET client_connection_check_interval = 1000"); err != nil {
		r.fail(ds, "the shadow server cannot check that its clients are connected (client_connection_check_interval: %s): dpproxy's shadow connections set it, so every catalog statement would fail; use PostgreSQL 14 or later on Linux for the shadow", oneLine(err))
	} else {
		r.add(ds, true, "the shadow server ends a backend whose connection the proxy closed (client_connection_check_interval)")
	}
	// The second guard behind the catalog route's allow-list
	// (shadowacl.RestrictFunctions, SECURITY.md G8).
	restricted, err := shadowacl.Restricted(ctx, c, user)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: %w", ds, err)
	}
	if !restricted {
		r.add(ds, false, "shadow role %s may execute ts_stat, pg_sleep, setseed and the other volatile functions that change or read what a shared shadow session leaves for the next analyst: the catalog route's allow-list is their only guard. run, with a superuser's DSN to the shadow database: dpproxy shadow restrict --config FILE --dataset %s --superuser-dsn DSN (SECURITY.md G8)", user, ds)
	} else {
		r.add(ds, true, "shadow role %s cannot execute the volatile functions a catalog statement must not reach (ts_stat and the others are revoked in the shadow database)", user)
	}
	var nonEmpty []string
	for _, name := range pol.TableOrder {
		t := pol.Tables[name]
		if t.Public { // their copies: checkPublic
			continue
		}
		var has bool
		err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+quoteIdent(t.Schema)+"."+quoteIdent(t.Name)+")").Scan(&has)
		if err != nil {
			r.add(ds, false, "shadow table %s.%s could not be read as %s: %s", t.Schema, t.Name, user, oneLine(err))
			continue
		}
		if has {
			nonEmpty = append(nonEmpty, t.Schema+"."+t.Name)
		}
	}
	if len(nonEmpty) > 0 {
		r.add(ds, false, "shadow tables %s hold rows: the shadow catalog must be empty (analysts read it freely); TRUNCATE them", strings.Join(nonEmpty, ", "))
	} else {
		r.add(ds, true, "the shadow catalog's protected tables hold no rows")
	}
	// Analysts' catalog statements spend the shadow server's disk: a
	// sort spills up to temp_file_limit per backend (attack round 36: one
	// statement wrote 685 MB within the catalog timeout).
	var tempLimit string
	if err := c.QueryRow(ctx, "SHOW temp_file_limit").Scan(&tempLimit); err != nil {
		return fmt.Errorf("datasets.%s.shadow: SHOW temp_file_limit: %w", ds, err)
	}
	if tempLimit == "-1" {
		r.add(ds, false, "shadow role %s has no temp_file_limit: one analyst's catalog statement can fill the shadow server's disk; as a superuser, ALTER ROLE %s SET temp_file_limit = '1GB' (and bound the shadow server's memory per process: SECURITY.md, G8)", user, quoteIdent(user))
	} else {
		r.add(ds, true, "shadow role %s has temp_file_limit %s", user, tempLimit)
	}
	crossCheck(ctx, r, ds, "shadow", dsn, dataDSN, "the data database")
	return nil
}

func summarize(items []string) string {
	const show = 8
	if len(items) <= show {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:show], ", "), len(items)-show)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
