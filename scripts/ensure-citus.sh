#!/usr/bin/env bash
# Makes sure PostgreSQL 15 has the Citus extension (citus.so in its lib dir),
# for `make test-citus`. When it is missing, builds Citus from the vendored
# source tarball (CITUS_VENDOR, default ../shared/vendor relative to the repo:
# citus-13.2.2.tar.gz and citus-13.2.2-pg15.patch, see the README there) and
# installs it into PostgreSQL 15's lib and extension directories.
#
# This is for the test machines, which reach no host but the package
# registries. Real users install Citus from its own packages instead (docs/TESTING.md,
# "Distributed PostgreSQL (Citus)").
#
# The build needs PostgreSQL 15's server headers and a few -dev packages: when
# run as root they are installed with apt-get; otherwise the exact command is
# printed and the script exits non-zero. Installing citus.so also needs write
# access to PostgreSQL's directories (root).
set -euo pipefail

CITUS_VERSION=${CITUS_VERSION:-13.2.2}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
repo=$(cd "$(dirname "$0")/.." && pwd)
vendor=${CITUS_VENDOR:-../shared/vendor}
case $vendor in
/*) ;;
*) vendor="$repo/$vendor" ;;
esac

if [[ ! -x $PG_CONFIG ]]; then
	echo "ensure-citus: $PG_CONFIG not found: PostgreSQL 15 is needed (apt-get install -y postgresql-15)" >&2
	exit 1
fi
libdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
if [[ -f $libdir/citus.so && -f $sharedir/extension/citus.control ]]; then
	exit 0
fi

tarball=$vendor/citus-$CITUS_VERSION.tar.gz
if [[ ! -f $tarball ]]; then
	# A clone elsewhere than next to shared/ (CI's clean clone): look for
	# shared/vendor beside each directory above the repo.
	d=$repo
	while [[ $d != / && ! -f $tarball ]]; do
		d=$(dirname "$d")
		if [[ -f $d/shared/vendor/citus-$CITUS_VERSION.tar.gz ]]; then
			vendor=$d/shared/vendor
			tarball=$vendor/citus-$CITUS_VERSION.tar.gz
		fi
	done
fi
patchfile=$vendor/citus-$CITUS_VERSION-pg15.patch
if [[ ! -f $tarball ]]; then
	echo "ensure-citus: citus.so is not in $libdir and $tarball does not exist;" >&2
	echo "  set CITUS_VENDOR to the directory holding citus-$CITUS_VERSION.tar.gz, or install Citus's own package for PostgreSQL 15" >&2
	exit 1
fi

# Build dependencies (Debian 12 package names).
deps=(postgresql-server-dev-15 liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev
	libxslt1-dev libpam0g-dev libreadline-dev flex bison make gcc)
missing=()
for p in "${deps[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "ensure-citus: building Citus needs: ${missing[*]}" >&2
		echo "  run: sudo apt-get install -y ${missing[*]}" >&2
		echo "  then: make test-citus (or install Citus's own packages for PostgreSQL 15 instead)" >&2
		exit 1
	fi
	echo "ensure-citus: installing the build dependencies: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
		apt-get update >&2
		apt-get install -y --no-install-recommends "${missing[@]}" >&2
	fi
fi
if [[ ! -w $libdir ]]; then
	echo "ensure-citus: $libdir is not writable; run as root: make test-citus (the build installs citus.so there)" >&2
	exit 1
fi

start=$(date +%s)
build=$(mktemp -d /tmp/dpproxy-citus-build.XXXXXX)
trap 'rm -rf "$build"' EXIT
echo "ensure-citus: building Citus $CITUS_VERSION from $tarball in $build" >&2
tar xzf "$tarball" -C "$build"
src=$build/citus-$CITUS_VERSION
# The patch removes Citus's own copy of have_createdb_privilege(), which
# PostgreSQL 15.20's headers declare too (15.18's do not): apply it only
# where the installed headers declare the function, so that the build works
# with the minor release a machine has as well as with the current one.
incdir=$("$PG_CONFIG" --includedir-server)
if [[ -f $patchfile ]] && grep -rqs --include='*.h' 'have_createdb_privilege' "$incdir"; then
	echo "ensure-citus: $incdir declares have_createdb_privilege(); applying $(basename "$patchfile")" >&2
	(cd "$src" && patch -p1 <"$patchfile" >&2)
fi
(
	cd "$src"
	./configure PG_CONFIG="$PG_CONFIG" --without-libcurl >"$build/configure.log" 2>&1 ||
		{ tail -40 "$build/configure.log" >&2; exit 1; }
	# with_llvm=no: no LLVM bitcode for JIT inlining (Debian's PGXS builds it
	# by default, which doubles the compile time; the tests do not use JIT).
	make -j"$(nproc)" with_llvm=no >"$build/make.log" 2>&1 || { tail -60 "$build/make.log" >&2; exit 1; }
	make install with_llvm=no >"$build/install.log" 2>&1 || { tail -40 "$build/install.log" >&2; exit 1; }
)
if [[ ! -f $libdir/citus.so ]]; then
	echo "ensure-citus: the build finished but $libdir/citus.so is missing" >&2
	exit 1
fi
echo "ensure-citus: installed Citus $CITUS_VERSION into $libdir in $(($(date +%s) - start)) s" >&2
