#!/usr/bin/env bash
# Measures how much machine code a benchmark runs per operation: the
# 64-byte lines holding an instruction executed at least once per
# operation (bench/footprint). In a busy server, Caddy's own code evicts
# the decision's from the instruction cache between two requests, so each
# of these lines is fetched again for every request.
#
#   bash bench/footprint.sh [-pkg <package>] [<benchmark regexp>]
#
# The default is the admitted decision of the root package. The benchmark
# runs alone under valgrind's callgrind (GOMAXPROCS=1, the garbage
# collector off) for 20000 iterations; the count does not depend on the
# host.
set -euo pipefail
pkg=.
if [ "${1:-}" = "-pkg" ]; then
	pkg=$2
	shift 2
fi
re=${1:-'ServeHTTPAdmitted$'}
command -v valgrind >/dev/null || {
	echo "bench/footprint.sh needs valgrind (apt-get install valgrind)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" "$pkg"
# The counting tool comes from this script's checkout, so that the script
# can measure another one (run it from there).
(cd "$(dirname "$0")/.." && go build -o "$tmp/footprint" ./bench/footprint)
GODEBUG=asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --dump-instr=yes \
	--compress-pos=no --compress-strings=no --callgrind-out-file="$tmp/callgrind.out" \
	"$tmp/bench.test" -test.run '^$' -test.bench "$re" -test.benchtime 20000x -test.cpu 1 >/dev/null 2>&1
"$tmp/footprint" -n 20000 "$tmp/callgrind.out"
