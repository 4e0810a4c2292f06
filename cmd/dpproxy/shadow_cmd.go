package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/shadowacl"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5"
)

// cmdShadow is `dpproxy shadow restrict --config FILE --dataset D
// --superuser-dsn DSN`: as a superuser of the shadow database, revoke from
// PUBLIC the volatile functions catalog statements must never reach
// (internal/shadowacl), the second guard behind the catalog route's
// allow-list. Run once per shadow database (and after a PostgreSQL major
// upgrade); the proxy's own shadow_admin stays the database's owner.
func cmdShadow(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "restrict" {
		return usagef("shadow: the only subcommand is restrict")
	}
	fs := flag.NewFlagSet("shadow restrict", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	dataset := fs.String("dataset", "", "the dataset whose shadow database to restrict")
	superDSN := fs.String("superuser-dsn", "", "a superuser's DSN to the dataset's shadow database")
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *path == "" || *dataset == "" || *superDSN == "" {
		return usagef("shadow restrict: --config FILE, --dataset D and --superuser-dsn DSN are required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	dc, ok := cfg.Datasets[*dataset]
	if !ok {
		return usagef("shadow restrict: the config has no dataset %q", *dataset)
	}
	role, err := pgx.ParseConfig(dc.Shadow)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: %w", *dataset, err)
	}
	restricted, err := shadowacl.RestrictFunctions(ctx, *superDSN, role.User, pgsql.CatalogFunctionNames())
	if err != nil {
		return err
	}
	if !restricted {
		return fmt.Errorf("shadow role %s may still execute ts_stat: is --superuser-dsn a superuser's, on the shadow database of %s?", role.User, *dataset)
	}
	fmt.Fprintf(stdout, "restricted: shadow role %s cannot execute the shadow's volatile functions beyond the catalog allow-list (dpproxy doctor checks it)\n", role.User)
	return nil
}
