#!/bin/sh
# Re-records the perf report fixtures in this directory.
# Run as root from this directory: sh record.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -g -o "$tmp/workload" workload.c

report() { # $1 = perf.data, $2 = fixture name
	LC_ALL=C perf --buildid-dir "$tmp/perf.buildid" report -i "$1" --stdio --no-children -g none --sort dso,sym \
		-F overhead,period,sample,dso,sym -t ';' >"$2.txt" 2>"$2.stderr"
}

LC_ALL=C perf record --no-buildid-cache -e cpu-clock -F 999 -o "$tmp/mixed.data" -- "$tmp/workload"
report "$tmp/mixed.data" mixed_cpu_clock

LC_ALL=C perf record --no-buildid-cache -e cycles -F 999 -o "$tmp/cycles.data" -- "$tmp/workload"
report "$tmp/cycles.data" cycles_fallback

LC_ALL=C perf record --no-buildid-cache -g -e cpu-clock -F 999 -o "$tmp/pipe.data" -- \
	sh -c 'dd if=/dev/zero bs=64k count=40000 status=none | md5sum'
report "$tmp/pipe.data" shell_pipeline_callgraph

LC_ALL=C perf record --no-buildid-cache -e cpu-clock -F 999 -o "$tmp/empty.data" -- true
report "$tmp/empty.data" no_samples
