#!/usr/bin/env bash
# Checks what `make bench` needs besides `make deps` (PostgreSQL, psql):
# pgbench (shipped with the PostgreSQL client/server packages) and PgBouncer.
# When something is missing, installs it with apt-get when run as root,
# otherwise prints the exact command and exits non-zero.
set -euo pipefail

pkgs=()
command -v pgbench >/dev/null 2>&1 || pkgs+=(postgresql-client)
if ! command -v pgbouncer >/dev/null 2>&1 && [[ ! -x /usr/sbin/pgbouncer ]]; then
	pkgs+=(pgbouncer)
fi
[[ ${#pkgs[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "bench: installing ${pkgs[*]} with apt-get" >&2
	apt-get install -y "${pkgs[@]}" || { apt-get update && apt-get install -y "${pkgs[@]}"; }
	# The package starts a system PgBouncer on 6432; the bench runs its own.
	if command -v systemctl >/dev/null 2>&1; then systemctl stop pgbouncer 2>/dev/null || true; fi
	exit 0
fi
echo "bench: missing ${pkgs[*]}; install with: sudo apt-get install -y ${pkgs[*]}" >&2
exit 1
