#!/usr/bin/env bash
# Counts the instructions a benchmark executes per operation, under
# valgrind's cachegrind: a measure that the host's noise does not move,
# for comparing two versions of the code (run it on each).
#
#   bash bench/instructions.sh [-pkg <package>] [<benchmark regexp> ...]
#
# The default is the decision benchmarks of the root package. Give each
# regexp so that it matches one benchmark. Each runs alone (GOMAXPROCS=1,
# the garbage collector off) for 20000 and then 40000 iterations; the
# difference, divided by 20000, leaves out the setup both runs share.
set -euo pipefail
pkg=.
if [ "${1:-}" = "-pkg" ]; then
	pkg=$2
	shift 2
fi
[ $# -gt 0 ] || set -- 'ServeHTTPAdmitted$' 'ServeHTTPRefused$'
command -v valgrind >/dev/null || {
	echo "bench/instructions.sh needs valgrind (apt-get install valgrind)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" "$pkg"

# count prints the instructions of one run of benchmark $1 for $2 iterations.
count() {
	GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$tmp/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2x" -test.cpu 1 2>&1 |
		awk '/I +refs:/ { gsub(",", "", $NF); print $NF }'
}

for re in "$@"; do
	a=$(count "$re" 20000)
	b=$(count "$re" 40000)
	echo "$re $(((b - a) / 20000)) instructions/op"
done
