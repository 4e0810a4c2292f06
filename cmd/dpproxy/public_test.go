package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// The config's public_max_rows bounds are internal/shadow's (config
// imports nothing of the project, so they are written twice).
func TestPublicMaxRows_SameAsShadow(t *testing.T) {
	if config.DefaultPublicMaxRows != shadow.DefaultMaxPublicRows || config.MaxPublicMaxRows != shadow.MaxMaxPublicRows {
		t.Fatalf("config public_max_rows default/max %d/%d, shadow %d/%d", config.DefaultPublicMaxRows, config.MaxPublicMaxRows,
			shadow.DefaultMaxPublicRows, shadow.MaxMaxPublicRows)
	}
}

// TestPublicRefresh: the refreshers copy the public tables again on
// their interval and on SIGHUP; a refresh that fails (the upstream table
// lost a declared column) leaves the previous copy; stop ends them.
func TestPublicRefresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := pgtest.NewDatabase(t)
	sh := pgtest.NewCluster(t).DSN("postgres")
	if err := pgtest.Exec(ctx, up, "CREATE TABLE codes (code int, label text)", "INSERT INTO codes VALUES (1, 'a')"); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, sh, "DROP ROLE IF EXISTS refresh_reader", "CREATE ROLE refresh_reader"); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Parse(strings.NewReader(`dataset: d
privacy_unit: u
budget: {epsilon: 1}
tables:
  codes:
    public: true
    columns:
      code: {type: int}
      label: {type: text}
`), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	periodic := newShadowTarget("d", sh, up, "refresh_reader", ds, 100, 300*time.Millisecond)
	if err := periodic.build(ctx, log); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, sh)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	labels := func() string {
		var s string
		if err := conn.QueryRow(ctx, "SELECT coalesce(string_agg(label, ',' ORDER BY code), '') FROM codes").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitFor := func(want, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for labels() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: shadow codes = %q, want %q", what, labels(), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := labels(); got != "a" {
		t.Fatalf("after the first build: %q, want a", got)
	}

	stop := startPublicRefresh(ctx, log, []*shadowTarget{periodic})
	if err := pgtest.Exec(ctx, up, "INSERT INTO codes VALUES (2, 'b')"); err != nil {
		t.Fatal(err)
	}
	waitFor("a,b", "interval refresh")
	stop()

	// SIGHUP only (no interval): the copy changes after the signal, not
	// before.
	onHup := newShadowTarget("d", sh, up, "refresh_reader", ds, 100, 0)
	stop = startPublicRefresh(ctx, log, []*shadowTarget{onHup})
	defer stop()
	if err := pgtest.Exec(ctx, up, "INSERT INTO codes VALUES (3, 'c')"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := labels(); got != "a,b" {
		t.Fatalf("without SIGHUP or interval the copy changed: %q", got)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("a,b,c", "SIGHUP refresh")

	// A failing refresh keeps the previous copy.
	if err := pgtest.Exec(ctx, up, "ALTER TABLE codes DROP COLUMN label"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessage("refresh of the public tables failed; the previous copy stays").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed refresh logged 30s after SIGHUP")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := labels(); got != "a,b,c" {
		t.Fatalf("after a failed refresh: %q, want the previous copy a,b,c", got)
	}
}

// TestLearnFunctions: the catalog check's static list of functions that
// alias.f must not name (attack rounds 78 and 79) covers this PostgreSQL
// with the extensions a shadow has (citext), and a function the shadow
// has beyond it (an extension's, a later release's) is refused once the
// shadow has been built (learnFunctions), not before.
func TestLearnFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	// A name of its own per run: what AddShadowFunctions learns stays for
	// the process (review 81: -count=2 failed).
	fn := fmt.Sprintf("attack79_extension_fn_%d", time.Now().UnixNano())
	if err := pgtest.Exec(ctx, dsn, "CREATE EXTENSION IF NOT EXISTS citext",
		"CREATE FUNCTION public."+fn+"(text) RETURNS text VOLATILE LANGUAGE sql AS 'SELECT $1'"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	sql, args := pgsql.ShadowFunctionsSQL()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	refused := func(f string) bool {
		q := "SELECT t." + f + " FROM unnest(ARRAY['x']) t"
		toks, err := pgsql.Lex(q)
		if err != nil {
			t.Fatal(err)
		}
		return pgsql.CheckCatalog(q, toks) != nil
	}
	if len(names) < 100 {
		t.Fatalf("the shadow lists %d functions alias.f must not name, want the 130 or so of PostgreSQL 15", len(names))
	}
	for _, f := range names {
		if f != fn && !refused(f) {
			t.Errorf("t.%s is accepted: %s is a function of this PostgreSQL that the static list lacks", f, f)
		}
	}
	if refused(fn) {
		t.Fatal("the extension's function was refused before the shadow was learned")
	}
	tg := &shadowTarget{dataset: "t", adminDSN: dsn}
	if err := tg.learnFunctions(ctx); err != nil {
		t.Fatal(err)
	}
	if !refused(fn) {
		t.Error("the shadow's own volatile function is accepted after learnFunctions")
	}
}
