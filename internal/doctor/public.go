package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// checkPublic checks the shadow copies of a dataset's public tables
// (internal/shadow, mirror.go): each is a table with only declared visible
// columns and as many rows as upstream, within maxRows; a table the proxy
// did not copy (over the cap, or no declared column) is a warning, since
// analysts' reads of it are refused. Public rows are counted, never read.
func checkPublic(ctx context.Context, r *Report, ds, shadowDSN, dataDSN string, pol *policy.Dataset, maxRows int) error {
	var public []*policy.Table
	for _, name := range pol.TableOrder {
		if t := pol.Tables[name]; t.Public {
			public = append(public, t)
		}
	}
	if len(public) == 0 {
		return nil
	}
	sh, err := connect(ctx, shadowDSN)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: connect: %w", ds, err)
	}
	defer sh.Close(context.Background())
	up, err := connect(ctx, dataDSN)
	if err != nil {
		return fmt.Errorf("datasets.%s.upstream: connect: %w", ds, err)
	}
	defer up.Close(context.Background())
	setting := "datasets." + ds + ".public_max_rows"
	for _, t := range public {
		name := t.Schema + "." + t.Name
		q := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
		var upRows int64
		if err := up.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM (SELECT FROM %s LIMIT %d) t", q, maxRows+1)).Scan(&upRows); err != nil {
			r.add(ds, false, "public table %s could not be counted upstream as the data role: %s (GRANT SELECT on its declared columns)", name, oneLine(err))
			continue
		}
		var kind string
		err := sh.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2`, t.Schema, t.Name).Scan(&kind)
		if err != nil {
			r.add(ds, false, "public table %s is missing from the shadow catalog: %s (start the proxy, which builds it)", name, oneLine(err))
			continue
		}
		if kind == "v" {
			reason := "it declares no column in the policy (declare the columns analysts may read)"
			if len(t.VisibleColumns()) > 0 {
				reason = fmt.Sprintf("it had more than %s rows when the proxy copied it (raise %s and restart the proxy)", fmt.Sprint(maxRows), setting)
			}
			r.add(ds, false, "public table %s is not copied into the shadow catalog, so analysts' reads of it are refused: %s", name, reason)
			continue
		}
		visible := map[string]bool{}
		for _, c := range t.VisibleColumns() {
			visible[c] = true
		}
		rows, err := sh.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, q)
		if err != nil {
			return fmt.Errorf("shadow: columns of %s: %w", name, err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		var extra []string
		for _, c := range cols {
			if !visible[c] {
				extra = append(extra, c)
			}
		}
		if len(extra) > 0 {
			r.add(ds, false, "the shadow copy of public table %s has columns the policy does not declare: %s (restart the proxy, which rebuilds the shadow from the policy)", name, strings.Join(extra, ", "))
			continue
		}
		var shRows int64
		if err := sh.QueryRow(ctx, "SELECT count(*) FROM "+q).Scan(&shRows); err != nil {
			r.add(ds, false, "the shadow copy of public table %s could not be read: %s", name, oneLine(err))
			continue
		}
		switch {
		case upRows > int64(maxRows):
			r.add(ds, false, "public table %s has more than %d rows upstream (%s): the next refresh will stop copying it and refuse reads (raise %s and restart the proxy)", name, maxRows, setting, setting)
		case shRows != upRows:
			r.add(ds, false, "public table %s: the shadow copy has %d rows, upstream %d (send the proxy SIGHUP, or set datasets.%s.public_refresh, to copy it again)", name, shRows, upRows, ds)
		default:
			r.add(ds, true, "public table %s: the shadow copy has the %d rows of upstream (%d declared columns; at most %d rows)", name, shRows, len(cols), maxRows)
		}
	}
	return nil
}
