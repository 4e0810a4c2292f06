package doctor

import (
	"context"
	"fmt"
)

// checkConnectionLimits warns when the server behind dsn lets its role open
// fewer connections than the proxy's pool for it may use (want, the
// setting named key): the least of max_connections (less
// superuser_reserved_connections for other roles), the role's CONNECTION
// LIMIT and the database's. Other clients share those connections, so
// "ok" means the pool fits, not that it always gets them.
func checkConnectionLimits(ctx context.Context, r *Report, ds, what, dsn, key string, want int) error {
	c, err := connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("datasets.%s: %s: connect: %w", ds, what, err)
	}
	defer c.Close(context.Background())
	var maxConns, reserved, roleLimit, dbLimit int
	var super bool
	err = c.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
			current_setting('superuser_reserved_connections')::int,
			r.rolconnlimit, d.datconnlimit, r.rolsuper
		FROM pg_catalog.pg_roles r, pg_catalog.pg_database d
		WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(&maxConns, &reserved, &roleLimit, &dbLimit, &super)
	if err != nil {
		return fmt.Errorf("datasets.%s: %s: connection limits: %w", ds, what, err)
	}
	avail, why := maxConns, fmt.Sprintf("max_connections = %d", maxConns)
	if !super {
		avail -= reserved
		why += fmt.Sprintf(" less %d reserved for superusers", reserved)
	}
	if roleLimit >= 0 && roleLimit < avail {
		avail, why = roleLimit, fmt.Sprintf("role %s has CONNECTION LIMIT %d", c.Config().User, roleLimit)
	}
	if dbLimit >= 0 && dbLimit < avail {
		avail, why = dbLimit, fmt.Sprintf("database %s has CONNECTION LIMIT %d", c.Config().Database, dbLimit)
	}
	if avail < want {
		r.add(ds, false, "%s: the server allows %d connections (%s), fewer than %s = %d: the pool fails once they are in use; lower %s or raise the limit",
			what, avail, why, key, want, key)
		return nil
	}
	r.add(ds, true, "%s: the server allows %d connections (%s), enough for %s = %d", what, avail, why, key, want)
	return nil
}
