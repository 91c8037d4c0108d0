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

# A service's CPU time over each run (the whole server tree): name -> (unit, higher_is_better, label)
SERVICE = {
    "service_user_s": ("s", False, "Server user (s)"),
    "service_sys_s": ("s", False, "Server sys (s)"),
    "service_cpu_s": ("s", False, "Server CPU (s)"),
    "service_cpu_us_per_req": ("us", False, "Server CPU/req (us)"),
}
LABELS = {**RUSAGE_LABELS, **{name: label for name, (_, _, label) in SERVICE.items()}}
