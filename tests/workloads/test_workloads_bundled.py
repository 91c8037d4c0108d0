"""The bundled workload specs (examples/workloads/) run: each workload once per side, through its parser.

On this machine (``host.toml``, the time backend) in every ``make test``;
inside guests of Debian's kernel with this machine's root over 9p
(``guest.toml``) under ``make kernel-studies`` (``PERFAB_GUEST_WORKLOADS=1``):
one boot per workload and side, about a minute each under TCG.
"""

from __future__ import annotations

import glob
import io
import os
import re
import shutil
from pathlib import Path

import pytest

from perfab.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("ab", "nginx", "hackbench", "perf", "stress-ng", "sysbench")
WORKLOADS = {  # workload -> a metric its parser must read
    "nginx-churn": "complete_requests", "hackbench": "time_s", "sched-pipe": "sched_pipe_total_s",
    "sched-messaging": "sched_messaging_total_s", "stress-mutex": "mutex_bogo_ops",
    "stress-futex": "futex_bogo_ops", "stress-tlb-shootdown": "tlb_shootdown_bogo_ops",
    "stress-pipe": "pipe_bogo_ops", "sysbench-threads": "total_events", "sysbench-mutex": "total_events",
    "forkexec": "process_fork_execve_us", "tlb-flush": "per_task_ops_per_s",
}


def _try(spec: str, *extra: str) -> str:
    missing = [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        pytest.skip(f"make sysdeps installs {', '.join(missing)}")
    for program in ("build/forkexec", "build/tlbflush"):
        if not (ROOT / program).exists():
            pytest.skip("make workloads builds the bundled programs")
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)  # the specs name the programs and nginx.conf from the repository's top
    try:
        code = main(["plan", str(ROOT / "examples" / "workloads" / spec), "--try", *extra], out, err)
    finally:
        os.chdir(cwd)
    assert code == 0, out.getvalue()[-3000:] + err.getvalue()
    return out.getvalue()


def _each_side_read_its_metrics(text: str, sides: tuple[str, ...]) -> None:
    blocks = re.split(r"^  (?=ok|failed)", text, flags=re.M)[1:]
    seen = {}
    for block in blocks:
        head = block.splitlines()[0].split()
        seen[(head[1], head[3])] = (head[0], block)
    for workload, metric in WORKLOADS.items():
        for side in sides:
            status, block = seen[(workload, side)]
            assert status == "ok" and re.search(rf"^\s+{re.escape(metric)}\s", block, re.M), block


def test_every_bundled_workload_runs_on_this_machine():
    text = _try("host.toml")
    assert f"({2 * len(WORKLOADS)} ok, 0 failed)" in text, text
    _each_side_read_its_metrics(text, ("a", "b"))


@pytest.mark.skipif(os.environ.get("PERFAB_GUEST_WORKLOADS") != "1" or not glob.glob("/boot/vmlinuz-*"),
                    reason="boots a guest per workload and side (about 25 minutes): `make kernel-studies` runs it")
def test_every_bundled_workload_runs_in_a_guest_from_the_hosts_root():
    text = _try("guest.toml")
    assert f"({2 * len(WORKLOADS)} ok, 0 failed)" in text, text
    _each_side_read_its_metrics(text, ("nopti", "pti"))
