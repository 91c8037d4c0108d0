"""Metric names perfab itself produces, with their units, directions and labels: one source of truth."""

from __future__ import annotations

# wait4 rusage of each run: name -> (unit, higher_is_better, report label)
RUSAGE = {
    "wall_s": ("s", False, "Time elapsed (s)"),
    "user_s": ("s", False, "User (s)"),
    "sys_s": ("s", False, "Sys (s)"),
    "max_rss_kb": ("KiB", False, "Max RSS (KiB)"),
    "vcsw": ("count", False, "Ctx switches vol"),
    "ivcsw": ("count", False, "Ctx switches invol"),
}
RUSAGE_LABELS = {name: label for name, (_, _, label) in RUSAGE.items()}

# A service's usage over each run (the whole server tree): name -> (unit, higher_is_better, label, exact).
# User and sys are clock-tick counts (/proc/PID/stat); CPU is the scheduler's nanosecond accounting of
# the server's threads (schedstat); reads and writes are system calls (/proc/PID/io), deterministic
# per request.  Per request: divided by the client's request count (workload.service.requests).
SERVICE = {
    "service_user_s": ("s", False, "Server user (s)", False),
    "service_sys_s": ("s", False, "Server sys (s)", False),
    "service_cpu_s": ("s", False, "Server CPU (s)", False),
    "service_cpu_us_per_req": ("us", False, "Server CPU/req (us)", False),
    "service_reads": ("count", False, "Server read calls", True),
    "service_writes": ("count", False, "Server write calls", True),
    "service_reads_per_req": ("count", False, "Server reads/req", True),
    "service_writes_per_req": ("count", False, "Server writes/req", True),
}
LABELS = {**RUSAGE_LABELS, **{name: label for name, (_, _, label, _) in SERVICE.items()}}


def service_metrics(before: dict[str, float], after: dict[str, float], requests: float | None) -> dict[str, float]:
    """A run's service metrics from the server tree's usage before and after it."""
    user, sys_ = after["user_s"] - before["user_s"], after["sys_s"] - before["sys_s"]
    cpu = (after["run_ns"] - before["run_ns"]) / 1e9 if after["run_ns"] and before["run_ns"] else user + sys_
    out = {"service_user_s": user, "service_sys_s": sys_, "service_cpu_s": cpu}
    calls = {"service_reads": "syscr", "service_writes": "syscw"}
    out.update({name: after[key] - before[key] for name, key in calls.items() if key in after and key in before})
    if requests:
        out["service_cpu_us_per_req"] = 1e6 * cpu / requests
        for name in calls:
            if name in out:
                out[f"{name}_per_req"] = out[name] / requests
    return out
