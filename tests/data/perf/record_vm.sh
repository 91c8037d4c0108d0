#!/bin/sh
# Re-records the vm_* fixtures in this directory on the machine it runs on.
# Recorded on: KVM guest without a hardware PMU (AMD EPYC host), Debian bookworm,
# perf 6.1.187, 2 CPUs, run as root, LC_ALL=C.  Each NAME.json holds perf's -o
# file, NAME.stderr perf's (and the workload's) stderr, NAME.rc perf's exit code.
set -u
export LC_ALL=C
rec() {
    name=$1; shift
    rm -f "$name.json"
    perf stat -j -o "$name.json" "$@" 2>"$name.stderr"
    echo $? >"$name.rc"
}
HW=task-clock,context-switches,page-faults,user_time,system_time,cycles,instructions,L1-icache-load-misses:u
rec vm_group_u -e $HW -- /bin/true
rec vm_sigsegv -e task-clock,context-switches,page-faults,user_time,system_time -- sh -c 'kill -SEGV $$'
rec vm_exit3 -e task-clock,user_time,system_time -- sh -c 'exit 3'
rec vm_bad_syntax -e cycles:zz -- /bin/true
rec vm_group_unsupported -e '{cycles:u,instructions:u}' -- /bin/true
rec vm_exec_failed -e task-clock,user_time,system_time -- /nonexistent/workload
rec vm_topdownl1 -M TopdownL1 -- /bin/true
# perf 6.1 sometimes never waits for a workload that exits at once: exit status lost
# (rc 0 instead of 3) and both rusage times <not counted>.  Repeat until it happens.
for i in $(seq 1 2000); do
    rec vm_lost_status -e task-clock,user_time,system_time -- sh -c 'exit 3'
    [ "$(cat vm_lost_status.rc)" = 0 ] && break
done
