"""A guest run from a fresh boot against one from the side's saved guest, side by side in one run.

Each run is what a session's runner executes for a run on a kernel side:
``python -m perfab.kernel.launch REQUEST`` with Debian's kernel under TCG,
one vCPU, icount and the plugin counting (the guest backend's defaults), and
a static loop of ``getppid`` as the workload.  Runs alternate between a
fresh boot per run (``snapshot = false``) and a start from the saved guest
(``snapshot = true``), after one warm-up run of each (the first snapshot run
boots and saves the guest; the first run of all fetches the kernel's
symbols), so load that comes and goes hits both alike.

The figure the goal is about is a run's wall time (the launcher's, as the
runner waits for it) over the workload's own emulated time
(``guest_wall_s``): goal at most 3 s.  Also printed: the ratio of the two
modes per pair, the saved guest's size and the time to save it, each
mode's instruction counts, and whether the restored runs counted what the
run that booted and saved the guest counted (every count the launcher
sums: instructions, and with ``--models`` the cache, branch and coherence
models; with ``--vcpus 2`` each vCPU's instructions too).

    PYTHONPATH=src python bench/guest_snapshot.py [--pairs 3] [--loops 200000] [--kernel BZIMAGE]
                                                  [--vcpus 2] [--models]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
GOAL_S = 3.0  # wall time over the workload's emulated time, per run
LOOP_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    printf("looped %ld\n", n);
    return 0;
}
"""


COUNTING = {"cache": False, "l1d": "32768:8:64", "branch": False, "coherence": False}  # the backend's default
MODELS = {"cache": True, "l1i": "32768:8:64", "l1d": "32768:8:64", "ll": "8388608:16:64", "branch": True,
          "coherence": True}


def launch(args, loop: str, snapshot: bool, work: Path, cache: str) -> dict:
    """One run through the launcher; its result document with the launcher's wall time added."""
    result = work / f"result-{time.monotonic_ns()}.json"
    request = {"kernel": args.kernel, "argv": [loop, str(args.loops)], "accel": "tcg", "vcpus": args.vcpus,
               "memory_mb": 512, "plugin": MODELS if args.models else COUNTING, "symbols": "guest", "top": 200,
               "cache_dir": cache, "snapshot": snapshot, "timeout_s": 600, "result": str(result)}
    path = work / "request.json"
    path.write_text(json.dumps(request))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(path)], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    wall = time.monotonic() - start
    body = json.loads(result.read_text()) if result.exists() else {}
    if done.returncode != 0 or body.get("failure"):
        raise SystemExit(f"run failed ({done.returncode}): {body.get('failure')}\n{done.stderr.decode()[-2000:]}")
    return {**body, "wall_s": wall}


def over(run: dict) -> float:
    return run["wall_s"] - (run["guest_wall_s"] or 0.0)


def report(runs: dict[str, list[dict]], first: dict, cache: str) -> None:
    print(f"{'mode':10} {'runs':>4} {'wall s':>8} {'emulated s':>11} {'wall - emulated s':>18} "
          f"{'user insns':>11} {'kernel insns':>13}")
    for mode, got in runs.items():
        counts = {(r["counts"]["insns_user"], r["counts"]["insns_kernel"]) for r in got}
        user, kernel = (f"{next(iter(counts))[0]:,}", f"{next(iter(counts))[1]:,}") if len(counts) == 1 \
            else ("varies", "varies")
        print(f"{mode:10} {len(got):4d} {statistics.median(r['wall_s'] for r in got):8.2f} "
              f"{statistics.median(r['guest_wall_s'] for r in got):11.4f} "
              f"{statistics.median(over(r) for r in got):18.2f} {user:>11} {kernel:>13}")
    ratios = [over(b) / over(s) for b, s in zip(runs["boot"], runs["snapshot"])]
    print(f"boot / snapshot, wall - emulated per pair: {statistics.median(ratios):.1f}x "
          f"(pairs: {', '.join(f'{r:.1f}' for r in ratios)})")
    worst = max(over(r) for r in runs["snapshot"])
    print(f"snapshot runs: {statistics.median(over(r) for r in runs['snapshot']):.2f} s (worst {worst:.2f} s) of wall "
          f"time over the workload's emulated time; goal <= {GOAL_S:g} s: "
          f"{'met' if worst <= GOAL_S else 'not met'}")
    same = all(r["counts"] == first["counts"] and r["per_vcpu"] == first["per_vcpu"] and
               r["guest_wall_s"] == first["guest_wall_s"] for r in runs["snapshot"])
    print(f"restored runs counted what the saving run counted ({len(first['counts'])} counts, per vCPU, "
          f"emulated time): {'yes' if same else 'NO'}")
    symbol_diff(runs["boot"][0], runs["snapshot"][0])
    states = list(Path(cache, "snapshots").glob(f"{first['snapshot']}.state"))
    size = f"{states[0].stat().st_size / 1e6:.0f} MB" if states else "?"
    print(f"the saving run: {first['wall_s']:.1f} s wall ({first['start']}); saved guest {size}")


def symbol_diff(boot: dict, snap: dict, top: int = 8) -> None:
    """The kernel symbols whose instructions differ most between a fresh-boot run and a snapshot run."""
    def table(run: dict) -> dict[str, int]:
        return {name: insns for name, insns, _ in (run.get("symbols") or {}).get("by_insns", [])}
    a, b = table(boot), table(snap)
    moved = sorted(((b.get(n, 0) - a.get(n, 0), n) for n in set(a) | set(b)), key=lambda d: -abs(d[0]))
    total = snap["counts"]["insns_kernel"] - boot["counts"]["insns_kernel"]
    print(f"kernel instructions, snapshot - boot: {total:+,}; by symbol (of the top 200 of each):")
    for delta, name in moved[:top]:
        if delta:
            print(f"  {delta:+10,}  {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs (default 3)")
    ap.add_argument("--loops", type=int, default=200000, help="getppid calls of the workload (default 200000)")
    ap.add_argument("--kernel", default=sorted(glob.glob("/boot/vmlinuz-*"))[-1], help="kernel image")
    ap.add_argument("--vcpus", type=int, default=1, help="vCPUs of each guest (default 1)")
    ap.add_argument("--models", action="store_true", help="the cache, branch and coherence models on")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-guest-snapshot-"))
    try:
        return measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the saved guest is tens of MB


def measure(args, work: Path) -> int:
    """The warm-up runs, the interleaved pairs and the report, in ``work``."""
    (work / "loop.c").write_text(LOOP_C)
    loop = str(work / "loop")
    subprocess.run(["gcc", "-O2", "-static", "-o", loop, str(work / "loop.c")], check=True)
    cache = str(work / "cache")
    print(f"kernel {args.kernel}, {args.loops} getppid, {args.vcpus} vCPU(s), "
          f"{'every model' if args.models else 'counting'}, load average {os.getloadavg()[0]:.1f} at the start")
    launch(args, loop, False, work, cache)  # warm: kallsyms, direct image, archives
    first = launch(args, loop, True, work, cache)  # boots and saves the guest
    runs: dict[str, list[dict]] = {"boot": [], "snapshot": []}
    for _ in range(args.pairs):
        for mode in runs:
            runs[mode].append(launch(args, loop, mode == "snapshot", work, cache))
    assert all(r["start"] == "restored" for r in runs["snapshot"]), [r["start"] for r in runs["snapshot"]]
    report(runs, first, cache)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
