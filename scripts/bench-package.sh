#!/usr/bin/env bash
# The README's measurement package (issue #14), one command after the
# other from one build, each output kept:
#
#   scripts/bench-package.sh OUTDIR          # about 30 minutes
#   SKIP_LONG=1 scripts/bench-package.sh OUTDIR   # without the 10-minute run (about 17)
#
# OUTDIR gets NN-name.txt per command (its command line, start and end
# times in UTC, then its output), the two ladders' plots, and build.txt
# (the commit, whether the tree was clean, go version, the machine).
# Nothing else should run meanwhile: the rows are only comparable within
# one run, and Skeen's rows (the four-protocol runs) show how fast the
# machine was that hour. The binary is built once into OUTDIR, so the
# package measures exactly one build; to compare two builds, alternate
# single rungs of both binaries instead (docs/batching.md has examples).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR   (SKIP_LONG=1 leaves out the 10-minute run)" >&2
	exit 2
fi
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin="$out/weft"

echo "== building $bin"
go build -o "$bin" ./cmd/weft
{
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	if [ -n "$(git status --porcelain 2>/dev/null)" ]; then echo "tree: modified"; else echo "tree: clean"; fi
	go version
	echo "cpus: $(nproc)"
	uname -srm
	echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
} >"$out/build.txt"
cat "$out/build.txt"

step=0
# run NAME ARGS...: one command of the package, its output kept in
# OUTDIR/NN-NAME.txt (progress, on stderr, is left on the terminal).
run() {
	local name=$1
	shift
	step=$((step + 1))
	local f
	f=$(printf '%s/%02d-%s.txt' "$out" "$step" "$name")
	echo "== $name: $*"
	{
		echo "\$ $*"
		echo "start: $(date -u '+%H:%M:%S UTC')"
	} >"$f"
	"$@" | tee -a "$f"
	echo "end: $(date -u '+%H:%M:%S UTC')" >>"$f"
}

run ladder "$bin" bench --protocols wbcast --durability nofsync,fsync --clients 1,32,90,180 \
	--groups-per-msg 1,2 --seed 7 --plot "$out/bench-ladder.svg"
run ladder-shared "$bin" bench --protocols wbcast --durability nofsync,fsync --clients 1,32,90,180 \
	--groups-per-msg 1,2 --seed 7 --shared-clients 1 --plot "$out/bench-ladder-shared.svg"
run protocols-fsync "$bin" bench --groups-per-msg 1,2 --clients 32 --warmup 2s --window 5s --seed 7
run protocols-nofsync "$bin" bench --durability nofsync --groups-per-msg 1,2 --clients 32 --warmup 2s --window 5s --seed 7
if [ -z "${SKIP_LONG:-}" ]; then
	run ten-minutes "$bin" bench --protocols wbcast --durability nofsync --clients 90 --groups-per-msg 1 \
		--warmup 70s --window 10m --interval 1m --seed 7
fi
run kv "$bin" bench kv --clients 32 --window 10s --seed 11
run go-benchmarks go test ./amcast/wbcast ./amcast/ftskeen ./amcast/fastcast -run '^$' -bench 'Leader|Follower' -benchtime 20000x
echo "ended: $(date -u '+%Y-%m-%d %H:%M:%S UTC')" >>"$out/build.txt"
echo "== done: $out"
