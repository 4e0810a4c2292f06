#!/usr/bin/env bash
# Runs each fuzz target (pkg:Target) for FUZZTIME: a smoke run on top of the
# seeds that plain `go test` already runs.
#
# A crash writes its input to <pkg>/testdata/fuzz/<Target>/ and fails. The
# Go fuzzing coordinator can also fail without any crash when its worker
# processes start too slowly on a loaded machine ("fuzzing process hung or
# terminated unexpectedly" / "context deadline exceeded", no input written):
# only that case is retried, at most twice, and said so. Anything else, and a
# failure that wrote an input, fails at once.
#
# scripts/fuzz.sh --check pkg:Target ... fails if a Fuzz function of the
# tree (func FuzzX in a *_test.go file) is missing from the list.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-4s}

if [ "${1:-}" = --check ]; then
	shift
	listed=" $* "
	missing=0
	while IFS= read -r hit; do
		file=${hit%%:*}
		target=${hit#*func }
		target=${target%%(*}
		pkg=$(dirname "${file#./}")
		if [[ $listed != *" $pkg:$target "* ]]; then
			echo "fuzz: $pkg:$target ($file) is not in FUZZ_ALL (Makefile)" >&2
			missing=1
		fi
	done < <(grep -rHoE '^func Fuzz[A-Za-z0-9_]*\(' --include='*_test.go' --exclude-dir=testdata --exclude-dir=.git .)
	exit $missing
fi

# count prints how many inputs the corpus directory holds (0 if none).
count() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }

for t in "$@"; do
	pkg=${t%%:*}
	target=${t#*:}
	corpus="$pkg/testdata/fuzz/$target"
	for attempt in 1 2 3; do
		before=$(count "$corpus")
		echo "$GO test -run '^\$' -fuzz '^$target\$' -fuzztime $FUZZTIME ./$pkg"
		if out=$("$GO" test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "./$pkg" 2>&1); then
			echo "$out"
			break
		fi
		echo "$out"
		after=$(count "$corpus")
		if [ "$after" -eq "$before" ] && [ "$attempt" -lt 3 ] &&
			grep -qE 'context deadline exceeded|fuzzing process hung or terminated unexpectedly' <<<"$out"; then
			echo "fuzz: $t: the fuzzing engine timed out starting its workers (no crashing input was written); retrying" >&2
			continue
		fi
		exit 1
	done
done
