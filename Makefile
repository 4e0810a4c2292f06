# dpproxy — see README.md.
#   make demo    build and run `dpproxy demo` (a throwaway PostgreSQL with demo data)
#   make test    all tests, unit and integration (real PostgreSQL and psql), with -race,
#                the stat-tagged statistical sweeps (make stat), then every fuzz target
#                for a few seconds (make fuzz)
#   make audit   the black-box privacy auditor: empirical ε lower bounds through the proxy
#                (AUDIT_RELEASES per database and run, default 2000; 10-15 minutes)
#   make sweep   issue 29's honesty sweep: every aggregate × key kind at ε = 1, SWEEP_RELEASES
#                releases per shape (default 500, ungrouped 4×; about 1.5 hours on 2 busy cores), interval
#                coverage and extreme errors against the truth (integration/sweep_test.go)
#   make mutate  applies the classic privacy mutations to a scratch copy and prints
#                which tests catch each (scripts/mutate; 5-10 minutes)
#   make build   build bin/dpproxy
#   make bench   end-to-end benchmark suite (bench/: PostgreSQL, PgBouncer, dpproxy; a few minutes)
#   make bench-go  the Go micro-benchmarks (go test -bench)
#   make load    the load test: 200 sessions for 30 s against the demo (integration, BENCHMARKS.md)
#   make fuzz-totality  the totality fuzzer for 10 minutes (generated queries, emitted SQL run
#                on adversarial tables; make test runs it for 35 s; docs/TESTING.md "Fuzzing")
#   make test-citus  the DP tests on Citus: a coordinator and two workers on loopback, the
#                demo distributed by patient_id; builds Citus from CITUS_VENDOR when
#                citus.so is missing (scripts/ensure-citus.sh; docs/TESTING.md
#                "Distributed PostgreSQL (Citus)")
#   make lint    gofmt -l, go vet and staticcheck
# demo and test first run scripts/ensure-deps.sh (demo: PostgreSQL only;
# test: also the real clients), which installs what is missing with apt-get
# when we are root, or prints the command.

GO ?= go
BIN := bin/dpproxy
# Extra flags for `dpproxy demo`, e.g. make demo DEMO_FLAGS="--data-dir ./demo-data"
DEMO_FLAGS ?=
# Bound of one package's go test run. proxy/ under -race takes 10–12
# minutes on 2 cores beside integration/ (12m was reached on 7 Dec 2026);
# the whole of CI takes about 20.
TEST_TIMEOUT ?= 20m

.PHONY: test-citus citus
.PHONY: all build demo test stat fuzz fuzz-check fuzz-totality audit sweep mutate bench bench-go load lint deps clean

all: build

deps:
	@scripts/ensure-deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/dpproxy

demo: build
	@scripts/ensure-deps.sh demo
	./$(BIN) demo $(DEMO_FLAGS)

# The pure packages (no goroutines, no shared state but rewrite's parser
# pool) run without the race detector, which slows them 2-15x (noise/ by
# about 4 minutes, rewrite/ by more than 2) and finds nothing there; their
# concurrency tests run under -race. Everything with goroutines or shared
# state (proxy, release, ledger, accountant's memo, integration, …) runs
# under -race.
PURE_PKGS = ./noise ./rewrite ./dpplan ./pgemit ./sensitivity ./pgsql ./policy
RACE_PKGS = $(shell $(GO) list ./... | grep -v -E '/(noise|rewrite|dpplan|pgemit|sensitivity|pgsql|policy)$$')

test: deps
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PURE_PKGS)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run 'Concurrent' ./noise ./rewrite
	$(MAKE) --no-print-directory stat
	$(MAKE) --no-print-directory fuzz-check fuzz

# Citus for the scale-out tests: built from the vendored source tarball when
# PostgreSQL 15 has no citus.so (as root: apt-get installs the build deps;
# otherwise the script prints the command). Real deployments install
# Citus's own packages instead.
CITUS_VENDOR ?= ../shared/vendor
CITUS_TIMEOUT ?= 12m
# The integration tests that run against the Citus demo (DPPROXY_CITUS=1
# points the harness's demo at a coordinator with two workers): the
# Citus-specific ones and the DP suite's aggregates, quantile methods,
# joins, partition selection, post-processing, automatic bounds and
# clipping, sample-and-aggregate and EXPLAIN.
CITUS_TESTS ?= ^(TestCitus_.*|TestDemo_Contract|TestPsql_GroupedQuery|TestPgx_CountsCloseToTruth|TestPsql_Quantiles|TestPgx_QuantileMethods|TestPgx_QuantileOfExpression|TestPgx_JoinOnUnit|TestPgx_JoinQuantilesAndPrivateKeys|TestPartitionSelection_EndToEnd|TestPost_EndToEnd|TestAutoBounds_EndToEnd|TestAutoClip_EndToEnd|TestSampleAgg_ThroughProxy|TestSampleAgg_GroupedThroughProxy|TestGaussian_EndToEnd|TestDoctor_.*|TestPublicTables|TestBoundedWork|TestPower_ContributionBounds|TestPower_QuantileUtility|TestPsql_RawRowsRefused)$$

citus:
	@CITUS_VENDOR=$(CITUS_VENDOR) scripts/ensure-citus.sh

test-citus: deps citus
	DPPROXY_CITUS=1 $(GO) test -count=1 -timeout $(CITUS_TIMEOUT) -run '^(TestEmittedSQL_Citus|TestCheckPushDown|TestDoctor_Citus.*|TestCitus_SettingsReachWorkers)$$' ./rewrite ./internal/doctor ./internal/citus ./internal/upstream
	DPPROXY_CITUS=1 $(GO) test -count=1 -timeout $(CITUS_TIMEOUT) -run '$(CITUS_TESTS)' ./integration

# The stat-tagged statistical sweeps of noise/ (many seeds and scales, fixed
# seeds; about a minute), bounded by STAT_TIMEOUT.
STAT_TIMEOUT ?= 4m
stat:
	$(GO) test -count=1 -tags stat -run '^TestStat_' -timeout $(STAT_TIMEOUT) ./noise

# Every fuzz target for FUZZTIME each: a smoke run on top of the seeds,
# which plain `go test` already runs. A failure writes the input to
# <pkg>/testdata/fuzz/<target>/; commit it with the fix. Longer runs, e.g.
# make fuzz FUZZTIME=10m FUZZ_TARGETS=rewrite:FuzzRewrite (see docs/TESTING.md "Fuzzing").
FUZZTIME ?= 4s
FUZZ_ALL := rewrite:FuzzRewrite pgsql:FuzzLex policy:FuzzPolicyParse \
	proxy:FuzzBind proxy:FuzzStartupPacket proxy:FuzzFramer proxy:FuzzLiterals proxy:FuzzSession \
	noise:FuzzMechanisms noise:FuzzCalibrations accountant:FuzzConversions
FUZZ_TARGETS ?= $(FUZZ_ALL)

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(FUZZ_TARGETS)

# The totality fuzzer (rewrite/totality_fuzz_test.go) for TOTALITY_DURATION from
# TOTALITY_SEED ("random" draws one and prints it); make test runs the same test for
# 35 s from seed 1. A failure prints the seed and query number to replay, e.g.
# make fuzz-totality TOTALITY_SEED=42 TOTALITY_QUERY=1234. The test bounds itself
# (its duration plus 10 minutes; 20 s per statement), hence -timeout 0.
TOTALITY_DURATION ?= 10m
TOTALITY_SEED ?= random
TOTALITY_QUERY ?=

fuzz-totality: deps
	DPPROXY_TOTALITY_DURATION=$(TOTALITY_DURATION) DPPROXY_TOTALITY_SEED=$(TOTALITY_SEED) \
	DPPROXY_TOTALITY_QUERY=$(TOTALITY_QUERY) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestEmittedSQL_TotalityFuzz$$' ./rewrite

# Fails when a Fuzz function of the tree is missing from FUZZ_ALL.
fuzz-check:
	@scripts/fuzz.sh --check $(FUZZ_ALL)

# The black-box privacy auditor (integration/audit_test.go; docs/TESTING.md
# "The privacy auditor"): every mechanism, AUDIT_RELEASES releases per database
# and run; make test runs a short version (4 mechanisms, 400 releases).
# AUDIT_ONLY=gaussian selects mechanisms by name. Built without -race.
AUDIT_RELEASES ?= 2000
AUDIT_ONLY ?=

audit: deps
	AUDIT_RELEASES=$(AUDIT_RELEASES) AUDIT_ONLY=$(AUDIT_ONLY) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestAudit_EmpiricalEpsilon$$' ./integration

# Issue 29's honesty sweep (integration/sweep_test.go, BENCHMARKS.md "Issue
# 29: the honesty sweep"): each shape SWEEP_RELEASES times through the proxy;
# SWEEP_ONLY=date selects shapes by a part of their name, SWEEP_WORKERS the
# releases in flight. Not part of make test (TestSweep_Honesty skips without
# SWEEP_RELEASES): even 40 releases per shape take minutes.
SWEEP_RELEASES ?= 500
SWEEP_ONLY ?=
SWEEP_WORKERS ?= 2

sweep: deps
	SWEEP_RELEASES=$(SWEEP_RELEASES) SWEEP_ONLY="$(SWEEP_ONLY)" SWEEP_WORKERS=$(SWEEP_WORKERS) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestSweep_Honesty$$' ./integration

# Not part of make test (it runs the package and end-to-end tests once per
# mutation); run it after changing a privacy-critical package.
mutate: deps
	$(GO) run ./scripts/mutate $(MUTATE_FLAGS)

# Starts its own PostgreSQL clusters, PgBouncer and bin/dpproxy (built
# without -race) on loopback and prints a table of ratios; see BENCHMARKS.md.
# Item 2 also runs on the data hash-partitioned by patient_id and on a Citus
# coordinator with two workers (hence make citus; --skip-scale-out skips).
# Extra flags, e.g. make bench BENCH_FLAGS="--duration 5s --keep".
BENCH_FLAGS ?=

bench: deps build citus
	@bench/ensure-deps.sh
	$(GO) run ./bench/cmd/dpbench --dpproxy $(BIN) $(BENCH_FLAGS)

bench-go:
	$(GO) test -run='^$$' -bench=. ./...

# make test runs a short version (100 sessions, 2 s) of the same test.
LOAD_FLAGS ?= -load.sessions 200 -load.duration 30s

load: deps
	$(GO) test -count=1 -timeout 20m -run 'TestLoad_MixedSessions' -v ./integration -args $(LOAD_FLAGS)

# staticcheck is fetched by the go command on first use (module cache).
STATICCHECK_VERSION ?= v0.8.2

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf bin
