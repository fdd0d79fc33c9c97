#!/usr/bin/env bash
# Counts the instructions a benchmark executes per operation, under
# valgrind's cachegrind: a measure that the host's noise does not move,
# for comparing two versions of the code (run it on each).
#
#   bash bench/instructions.sh [-pkg <package>] [-lines] [<benchmark regexp> ...]
#
# The default is the decision benchmarks of the root package. Give each
# regexp so that it matches one benchmark. Each runs alone (GOMAXPROCS=1,
# the garbage collector off) for 20000 and then 40000 iterations; the
# difference, divided by 20000, leaves out the setup both runs share.
#
# GODEBUG=cpu.rdtscp=off keeps the Go runtime from reading the clock with
# RDTSCP, which valgrind 3.19 cannot run (SIGILL on hosts that have it).
#
# -lines also counts the code each runs per operation: the 64-byte lines
# of machine code holding an instruction executed at least once per
# operation (bench/footprint, from a callgrind run of 20000 iterations).
# In a busy server, Caddy's own code evicts the decision's from the
# instruction cache between two requests, so each of these lines is
# fetched again for every request.
set -euo pipefail
pkg=. lines=
while :; do
	case "${1:-}" in
	-pkg) pkg=$2 && shift 2 ;;
	-lines) lines=1 && shift ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || set -- 'ServeHTTPAdmitted$' 'ServeHTTPRefused$'
command -v valgrind >/dev/null || {
	echo "bench/instructions.sh needs valgrind (apt-get install valgrind)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" "$pkg"
if [ -n "$lines" ]; then
	# The counting tool comes from this script's checkout, so that the
	# script can measure another one (run it from there).
	(cd "$(dirname "$0")/.." && go build -o "$tmp/footprint" ./bench/footprint)
fi

# count prints the instructions of one run of benchmark $1 for $2 iterations.
count() {
	GODEBUG=cpu.rdtscp=off GOGC=off GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$tmp/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2x" -test.cpu 1 2>&1 |
		awk '/I +refs:/ { gsub(",", "", $NF); print $NF }'
}

# footprint prints the hot lines of code of benchmark $1.
footprint() {
	GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --dump-instr=yes \
		--compress-pos=no --compress-strings=no --callgrind-out-file="$tmp/callgrind.out" \
		"$tmp/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime 20000x -test.cpu 1 >/dev/null 2>&1
	"$tmp/footprint" -n 20000 "$tmp/callgrind.out"
}

for re in "$@"; do
	a=$(count "$re" 20000)
	b=$(count "$re" 40000)
	echo "$re $(((b - a) / 20000)) instructions/op"
	if [ -n "$lines" ]; then
		footprint "$re"
	fi
done
