"""HTML report against the text report: render time and size of a large analysis.

Builds one experiment with the fake executor (nothing runs): 3 sides
(a baseline and two variants) x ``--runs`` measured runs, one workload whose
output carries ``--metrics`` minus 6 metrics, the 6 rusage metrics making up
the rest (so the report has exactly ``--metrics`` rows per variant).  It is
stored and analysed once; then ``render_text`` and ``render_html`` render
that same analysis in turn, ``--repeat`` times each, interleaved, and the
best and median wall time of each and the size of its output are printed
(target: HTML under 2 s and, for the bundled demo, under 2 MB).

    .venv/bin/python bench/html_render.py [--metrics 50] [--runs 100] [--repeat 5] [--out report.html]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from perfab.analyse.compare import analyse  # noqa: E402
from perfab.report.html import render_html  # noqa: E402
from perfab.report.text import render_text  # noqa: E402
from perfab.run.backends import TimeBackend  # noqa: E402
from perfab.run.executor import FakeExecutor, FakeOutcome  # noqa: E402
from perfab.run.runner import Runner  # noqa: E402
from perfab.specfile import parse_spec  # noqa: E402
from perfab.store import Store  # noqa: E402

RUSAGE_ROWS = 6  # Time elapsed, User, Sys, Max RSS, Ctx switches vol and invol (TimeBackend)
TARGET_S = 2.0
TARGET_BYTES = 2 * 1024 * 1024


def spec_text(metrics: int, runs: int) -> str:
    return (f'[experiment]\nname = "bench-html"\nruns = {runs}\nwarmup = 0\nseed = 1\n'
            '[[variant]]\nname = "base"\n[[variant]]\nname = "fast"\n[[variant]]\nname = "slow"\n'
            '[[workload]]\nname = "many"\nargv = ["bench", "{variant}"]\nparser = "keyvalue"\n'
            + "".join(f'[[workload.metric]]\nname = "m{i:02d}/s"\ndirection = "higher"\n' for i in range(metrics)))


def behaviour(metrics: int, seed: int = 1):
    """Each metric around 1e6 with 1% noise; ``fast`` 2% higher, ``slow`` 1% lower on every metric."""
    rng = random.Random(seed)
    speed = {"base": 1.0, "fast": 1.02, "slow": 0.99}

    def run(argv, env):
        lines = [f"m{i:02d}/s: {1e6 * speed[argv[1]] * (1 + rng.gauss(0, 0.01)):.1f}" for i in range(metrics)]
        return FakeOutcome(wall_s=0.01 * (1 + rng.gauss(0, 0.01)), stdout="\n".join(lines).encode())

    return run


def build(db: Path, metrics: int, runs: int):
    text = spec_text(metrics - RUSAGE_ROWS, runs)
    with Store(db) as store:
        Runner(parse_spec(text), store, TimeBackend(), FakeExecutor(behaviour(metrics - RUSAGE_ROWS)), {}).run()
        return analyse(store, "bench-html")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--metrics", type=int, default=50, help="rows per variant (default 50; at least 7)")
    p.add_argument("--runs", type=int, default=100, help="measured runs per side (default 100)")
    p.add_argument("--repeat", type=int, default=5, help="renders of each format (default 5)")
    p.add_argument("--out", type=Path, help="also write the HTML page here")
    args = p.parse_args()
    if args.metrics <= RUSAGE_ROWS:
        p.error(f"--metrics must be more than {RUSAGE_ROWS} (the rusage rows)")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        a = build(Path(tmp) / "bench.db", args.metrics, args.runs)
        print(f"built: {len({r.metric for r in a.rows})} metrics x {1 + len(a.variants)} sides x "
              f"{args.runs} runs ({len(a.rows)} rows) in {time.perf_counter() - t0:.1f} s")
    times: dict[str, list[float]] = {"text": [], "html": []}
    out: dict[str, str] = {}
    for _ in range(args.repeat):
        for name, render in (("text", render_text), ("html", render_html)):
            t = time.perf_counter()
            out[name] = render(a)
            times[name].append(time.perf_counter() - t)
    for name, ts in times.items():
        size = len(out[name].encode())
        print(f"{name:>5}: best {min(ts):.3f} s, median {statistics.median(ts):.3f} s, {size:,} bytes")
    html_s, html_bytes = statistics.median(times["html"]), len(out["html"].encode())
    print(f"html target: < {TARGET_S:.0f} s ({'met' if html_s < TARGET_S else 'MISSED'}), "
          f"< {TARGET_BYTES // 2**20} MB ({'met' if html_bytes < TARGET_BYTES else 'over'})")
    if args.out:
        args.out.write_text(out["html"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
