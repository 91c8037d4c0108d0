"""Cross-check perfab's other-work reading (``perfab.machine.busy``) against per-process accounting.

One real session of a CPU-bound workload (python summing a range), with
``--burners N`` processes spinning beside it (default: none, whatever else
runs on the machine).  Side by side it prints:

- perfab's reading: other work's CPU seconds over the runs' windows, from
  ``/proc/stat`` less perfab's own and the runs' CPU time, and the
  capacity of those windows;
- a lower bound from ``/proc/PID/stat``: the CPU seconds of the processes
  alive at both ends of the session (short-lived processes are missed),
  scaled to the share of the session the windows cover;
- the burners' own CPU seconds, read the same way (they are alive
  throughout), also scaled.

perfab's figure must not fall below the lower bound; on a quiet machine
with burners the three agree.

    PYTHONPATH=src python bench/busy_crosscheck.py [--burners 2]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from perfab.cli import main  # noqa: E402
from perfab.machine.busy import Busy  # noqa: E402
from perfab.store import Store  # noqa: E402

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
SPEC = """
[experiment]
name = "busy-crosscheck"
runs = 10
warmup = 0

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "spin"
argv = ["python3", "-c", "sum(range(3000000))"]
"""


def process_cpu_s() -> dict[int, float]:
    """User + system seconds of every process now (its own, not its reaped children's)."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            out[int(name)] = (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime
    return out


def main_(burners: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec, db = Path(tmp) / "spec.toml", Path(tmp) / "r.db"
        spec.write_text(SPEC)
        spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
        before, start = process_cpu_s(), time.monotonic()
        code = main(["run", str(spec), "--db", str(db), "--no-report"], io.StringIO(), io.StringIO())
        after, wall = process_cpu_s(), time.monotonic() - start
        for p in spinning:
            p.kill()
            p.wait()
        assert code == 0, code
        with Store(db, readonly=True) as store:
            (session,) = store.sessions("busy-crosscheck")
        busy = Busy.from_env(session.environment)
        covered = busy.capacity_s / (wall * os.cpu_count())  # share of the session inside the runs' windows
        alive = [pid for pid in after if pid in before and pid != os.getpid()]
        lower = covered * sum(after[pid] - before[pid] for pid in alive)
        burned = covered * sum(after[p.pid] - before[p.pid] for p in spinning if p.pid in before)
        print(f"session wall {wall:.2f} s on {os.cpu_count()} CPUs, {burners} burner(s); "
              f"the runs' windows cover {100 * covered:.0f}% of it")
        print(f"perfab: other work over the windows          {busy.other_cpu_s:8.2f} CPU-s "
              f"({100 * busy.other_share():.1f}% of {busy.capacity_s:.2f})")
        print(f"/proc/PID/stat: processes alive throughout   {lower:8.2f} CPU-s (a lower bound)")
        print(f"/proc/PID/stat: the burners                  {burned:8.2f} CPU-s")
        ratio = busy.other_cpu_s / lower if lower else float("nan")
        print(f"ratio perfab / lower bound                   {ratio:8.2f}")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burners", type=int, default=0, help="processes spinning beside the session")
    main_(parser.parse_args().burners)
