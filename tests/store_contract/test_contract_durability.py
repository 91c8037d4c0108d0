"""Every run is in the store before the next one starts, and stays there when perfab is killed.

A real ``perfab run`` (its own process) runs a probe as its workload.  Each
run of the probe counts, over its own connection to the store, the runs
already stored, and writes that count down: run k must see k - 1.  During
one run the test kills perfab with SIGKILL (no handler, no clean-up): the
runs before it are all still there, and ``--resume`` runs the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from perfab.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"
KILL_AT = 4  # the run during which perfab is killed (1-based), of 6

PROBE = f"""
import sys, time
from pathlib import Path
sys.path.insert(0, {str(SRC)!r})
from perfab.store import open_store
db, folder = sys.argv[1], Path(sys.argv[2])
n = len(list(folder.glob("seen-*"))) + 1
with open_store(db, readonly=True) as store:
    stored = len(store.run_rows("durable", all_attempts=True))
(folder / f"seen-{{n}}").write_text(str(stored))
if n == {KILL_AT}:
    time.sleep(60)  # perfab is killed meanwhile
print("ops:", n)
"""


def _spec(tmp_path: Path, db: str) -> Path:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    (tmp_path / "seen").mkdir()
    spec = tmp_path / "durable.toml"
    spec.write_text(f"""[experiment]
name = "durable"
runs = 3
warmup = 0

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "probe"
argv = [{sys.executable!r}, {str(probe)!r}, {db!r}, {str(tmp_path / "seen")!r}]
parser = "keyvalue"
timeout = 120
""")
    return spec


def _perfab(spec: Path, db: str, *more: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen([sys.executable, "-c", "from perfab.cli import main_entry; main_entry()", "run",
                             str(spec), "--db", db, "--no-report", *more], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _seen(folder: Path) -> dict[int, int]:
    return {int(p.name.split("-")[1]): int(p.read_text()) for p in folder.glob("seen-*") if p.read_text()}


def test_each_run_is_stored_before_the_next_and_survives_sigkill(db, tmp_path):
    spec = _spec(tmp_path, db)
    folder = tmp_path / "seen"
    perfab = _perfab(spec, db)
    try:
        deadline = time.monotonic() + 120
        while KILL_AT not in _seen(folder):
            assert perfab.poll() is None, perfab.communicate()
            assert time.monotonic() < deadline, "the probe's run never came"
            time.sleep(0.05)
        os.kill(perfab.pid, signal.SIGKILL)
        perfab.wait(30)
    finally:
        if perfab.poll() is None:
            perfab.kill()
            perfab.wait()
        perfab.stdout.close()
        perfab.stderr.close()
    assert perfab.returncode == -signal.SIGKILL
    assert _seen(folder) == {k: k - 1 for k in range(1, KILL_AT + 1)}  # run k saw the k - 1 before it stored
    with open_store(db, readonly=True) as store:
        rows = store.run_rows("durable", all_attempts=True)
    assert [(r["seq"], r["status"]) for r in rows] == [(seq, "ok") for seq in range(KILL_AT - 1)]
    resumed = _perfab(spec, db, "--resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    with open_store(db, readonly=True) as store:
        rows = store.run_rows("durable")
    assert [(r["seq"], r["status"]) for r in rows] == [(seq, "ok") for seq in range(6)]
