#!/usr/bin/env bash
# Checks what `make demo` and `make test` need besides Go: the PostgreSQL
# server binaries (initdb, pg_ctl, postgres: on PATH or under
# /usr/lib/postgresql/*/bin) and the psql client. When something is missing,
# installs it with apt-get when run as root, otherwise prints the exact
# command and exits non-zero.
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

if ! command -v go >/dev/null 2>&1; then
	echo "ensure-deps: Go is not installed or not on PATH; install Go 1.25 or newer from https://go.dev/dl/" >&2
	exit 1
fi

missing=()
have_server || missing+=("PostgreSQL server binaries (initdb, pg_ctl, postgres)")
have_psql || missing+=("psql")
if ((${#missing[@]} == 0)); then
	exit 0
fi

cmd="apt-get update && apt-get install -y postgresql postgresql-client"
echo "ensure-deps: missing: ${missing[*]}" >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-deps: this is not a Debian/Ubuntu system; install the PostgreSQL server and client (15 or newer) with your package manager, with initdb/pg_ctl/postgres and psql on PATH" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "ensure-deps: install them with: sudo sh -c '$cmd'" >&2
	exit 1
fi
echo "ensure-deps: running: $cmd" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y postgresql postgresql-client
if ! have_server || ! have_psql; then
	echo "ensure-deps: still missing PostgreSQL binaries after installing; check the apt-get output above" >&2
	exit 1
fi
