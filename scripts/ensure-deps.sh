#!/usr/bin/env bash
# Checks what `make demo` and `make test` need besides Go:
#   - the PostgreSQL server binaries (initdb, pg_ctl, postgres: on PATH or
#     under /usr/lib/postgresql/*/bin) and the psql client;
#   - the real clients the proxy tests drive: a JDK (javac, java) with
#     pgjdbc (/usr/share/java/postgresql.jar), /usr/bin/python3 with
#     psycopg2, psycopg 3, asyncpg, SQLAlchemy and pandas, and node with
#     npm (node-postgres, knex and kysely are installed by the tests themselves from the npm
#     registry into the user's cache directory, ~/.cache/dpproxy-test,
#     outside the tree: internal/pgtest NodePG);
#   - Debian's chromium, headless, for the steward dashboard's test
#     (internal/admin, integration/ops_test.go).
# When something is missing, installs it with apt-get when run as root,
# otherwise prints the exact command and exits non-zero. Under CI=true the
# tests fail (never skip) when a client is missing.
set -euo pipefail

have_server() {
	local p
	if p=$(command -v postgres 2>/dev/null); then
		p=$(readlink -f "$p")
		local d
		d=$(dirname "$p")
		[[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && return 0
	fi
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && return 0
	done
	return 1
}

have_psql() { command -v psql >/dev/null 2>&1; }
have_jdk() { command -v javac >/dev/null 2>&1 && command -v java >/dev/null 2>&1; }
have_pgjdbc() { [[ -f /usr/share/java/postgresql.jar ]]; }
have_py() { [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }
have_node() { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }
have_chromium() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }

if ! command -v go >/dev/null 2>&1; then
	echo "ensure-deps: Go is not installed or not on PATH; install Go 1.26 or newer (go.mod) from https://go.dev/dl/" >&2
	exit 1
fi

missing=() # what is missing, for the message
pkgs=()    # the Debian packages that provide it
check() { # check DESCRIPTION PACKAGES... -- COMMAND...
	local what=$1
	shift
	local p=()
	while [[ $1 != -- ]]; do
		p+=("$1")
		shift
	done
	shift
	if ! "$@"; then
		missing+=("$what")
		pkgs+=("${p[@]}")
	fi
}
# `ensure-deps.sh demo` (make demo) checks only what the demo needs:
# PostgreSQL and psql. Without an argument (make test), the test clients
# too.
mode=${1:-test}
check "PostgreSQL server binaries (initdb, pg_ctl, postgres)" postgresql -- have_server
check "psql" postgresql-client -- have_psql
if [[ $mode != demo ]]; then
check "a JDK (javac, java)" default-jdk-headless -- have_jdk
check "pgjdbc (/usr/share/java/postgresql.jar)" libpostgresql-jdbc-java -- have_pgjdbc
check "psycopg2 for /usr/bin/python3" python3-psycopg2 -- have_py psycopg2
check "psycopg 3 for /usr/bin/python3" python3-psycopg -- have_py psycopg
check "asyncpg for /usr/bin/python3" python3-asyncpg -- have_py asyncpg
check "SQLAlchemy for /usr/bin/python3" python3-sqlalchemy -- have_py sqlalchemy
check "pandas for /usr/bin/python3" python3-pandas -- have_py pandas
check "node and npm" nodejs npm -- have_node
check "chromium (headless, for the dashboard test)" chromium -- have_chromium
fi
if ((${#missing[@]} == 0)); then
	exit 0
fi

# Deduplicate, keeping the order.
declare -A seen=()
uniq=()
for p in "${pkgs[@]}"; do
	[[ -n ${seen[$p]:-} ]] && continue
	seen[$p]=1
	uniq+=("$p")
done
cmd="apt-get update && apt-get install -y ${uniq[*]}"
for m in "${missing[@]}"; do
	echo "ensure-deps: missing: $m" >&2
done
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-deps: this is not a Debian/Ubuntu system; install with your package manager: PostgreSQL server and client (15 or newer, initdb/pg_ctl/postgres and psql on PATH), a JDK with the PostgreSQL JDBC driver at /usr/share/java/postgresql.jar, psycopg2, psycopg 3, asyncpg, SQLAlchemy and pandas for /usr/bin/python3, node with npm, and chromium" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "ensure-deps: install them with: sudo sh -c '$cmd'" >&2
	exit 1
fi
echo "ensure-deps: running: $cmd" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${uniq[@]}"
still=()
have_server || still+=("PostgreSQL server")
have_psql || still+=("psql")
if [[ $mode != demo ]]; then
	have_jdk || still+=("JDK")
	have_pgjdbc || still+=("pgjdbc")
	have_py psycopg2 || still+=("psycopg2")
	have_py psycopg || still+=("psycopg 3")
	have_py asyncpg || still+=("asyncpg")
	have_py sqlalchemy || still+=("SQLAlchemy")
	have_py pandas || still+=("pandas")
	have_node || still+=("node/npm")
	have_chromium || still+=("chromium")
fi
if ((${#still[@]} > 0)); then
	echo "ensure-deps: still missing after installing: ${still[*]}; check the apt-get output above" >&2
	exit 1
fi
