package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/internal/shadowacl"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// refreshLockTimeout bounds how long a refresh that must rebuild the shadow
// (a column changed upstream: shadow.Refresh) waits for analysts' running
// catalog statements while it holds the locks of the tables it already
// dropped, which their next statements queue behind: it gives up (and is
// retried at the next SIGHUP or interval) rather than hold them longer. A
// refresh of rows alone takes no lock they wait for.
const refreshLockTimeout = time.Second

// shadowTarget is everything needed to (re)build one dataset's shadow
// catalog.
type shadowTarget struct {
	dataset         string
	adminDSN, upDSN string
	role            string
	policy          *policy.Dataset
	maxRows         int
	refreshEvery    time.Duration
	hasPublicTables bool
}

func newShadowTarget(name, adminDSN, upDSN, role string, ds *policy.Dataset, maxRows int, every time.Duration) *shadowTarget {
	tg := &shadowTarget{dataset: name, adminDSN: adminDSN, upDSN: upDSN, role: role, policy: ds, maxRows: maxRows, refreshEvery: every}
	for _, t := range ds.Tables {
		tg.hasPublicTables = tg.hasPublicTables || t.Public
	}
	return tg
}

// build (re)builds the shadow catalog, mirroring the public tables, and
// logs what became of each public table. Row counts of public tables are
// public data.
func (tg *shadowTarget) build(ctx context.Context, log *zap.Logger) error {
	opts := shadow.Options{
		MaxPublicRows: tg.maxRows,
		Setting:       "datasets." + tg.dataset + ".public_max_rows",
	}
	res, err := shadow.BuildWith(ctx, tg.adminDSN, tg.upDSN, tg.policy, tg.role, opts)
	if err != nil {
		return err
	}
	tg.logPublic(log, res)
	restricted, err := shadowacl.RestrictFunctions(ctx, tg.adminDSN, tg.role, pgsql.CatalogFunctionNames())
	if err != nil {
		return err
	}
	if !restricted {
		log.Warn("the shadow role may execute the shadow's volatile functions (ts_stat, pg_sleep…), so the catalog route's allow-list is their only guard: run dpproxy shadow restrict as a superuser (SECURITY.md G8; dpproxy doctor)",
			zap.String("dataset", tg.dataset))
	}
	return tg.learnFunctions(ctx)
}

// learnFunctions gives the catalog check the functions of this shadow
// server that alias.f must not name beyond those of PostgreSQL 15 (its
// extensions, a later release: pgsql.ShadowFunctionsSQL).
func (tg *shadowTarget) learnFunctions(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, tg.adminDSN)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: %w", tg.dataset, err)
	}
	defer conn.Close(context.Background())
	sql, args := pgsql.ShadowFunctionsSQL()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: reading its functions: %w", tg.dataset, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("datasets.%s.shadow: reading its functions: %w", tg.dataset, err)
	}
	pgsql.AddShadowFunctions(names)
	return nil
}

// refresh copies the public tables again, rebuilding the shadow only when
// its tables no longer match (shadow.Refresh).
func (tg *shadowTarget) refresh(ctx context.Context, log *zap.Logger) error {
	res, rebuilt, err := shadow.Refresh(ctx, tg.adminDSN, tg.upDSN, tg.policy, tg.role, shadow.Options{
		MaxPublicRows: tg.maxRows,
		Setting:       "datasets." + tg.dataset + ".public_max_rows",
		LockTimeout:   refreshLockTimeout,
	})
	if err != nil {
		return err
	}
	if rebuilt {
		log.Info("the shadow catalog's tables changed upstream or in size: rebuilt", zap.String("dataset", tg.dataset))
	}
	tg.logPublic(log, res)
	// An extension installed on the shadow since the last look (review 81).
	return tg.learnFunctions(ctx)
}

func (tg *shadowTarget) logPublic(log *zap.Logger, res *shadow.Result) {
	for _, p := range res.Public {
		if p.Unavailable != "" {
			log.Warn("public table not copied into the shadow catalog: reads of it outside DP queries are refused",
				zap.String("dataset", tg.dataset), zap.String("table", p.Schema+"."+p.Name),
				zap.String("reason", p.Unavailable), zap.String("hint", p.Hint))
			continue
		}
		log.Info("public table copied into the shadow catalog", zap.String("dataset", tg.dataset),
			zap.String("table", p.Schema+"."+p.Name), zap.Int64("rows", p.Rows), zap.String("columns", strings.Join(p.Columns, ",")))
	}
}

// startPublicRefresh re-copies the public tables of every target on
// SIGHUP and, for targets with a public_refresh interval, periodically. A
// failed refresh is logged and leaves the previous copy (the build is one
// transaction). stop ends the refreshers and waits for them.
func startPublicRefresh(ctx context.Context, log *zap.Logger, targets []*shadowTarget) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var wg sync.WaitGroup
	var kicks []chan struct{}
	for _, tg := range targets {
		if !tg.hasPublicTables {
			continue
		}
		kick := make(chan struct{}, 1)
		kicks = append(kicks, kick)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg.refreshLoop(ctx, log, kick)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: copying the public tables into the shadow catalogs again", zap.Int("datasets", len(kicks)))
				for _, k := range kicks {
					select {
					case k <- struct{}{}:
					default: // a refresh is already pending
					}
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}

func (tg *shadowTarget) refreshLoop(ctx context.Context, log *zap.Logger, kick <-chan struct{}) {
	var tick <-chan time.Time
	if tg.refreshEvery > 0 {
		t := time.NewTicker(tg.refreshEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick:
		}
		if err := tg.refresh(ctx, log); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("refresh of the public tables failed; the previous copy stays", zap.String("dataset", tg.dataset), zap.Error(err))
		}
	}
}
