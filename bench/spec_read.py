"""Cost of reading a spec, and of deriving one, measured side by side in one run.

1. Reading: every example spec read N times by this tree's reader and by
   the reader of another checkout (``--against SRC``, e.g. the ``src`` of a
   checkout of main), each in its own process, the two alternated five
   times (ABABABABAB); the median microseconds per read and their ratio.
2. Deriving: bisect's good/bad experiment made from a spec by
   ``Experiment.derive`` against the TOML round-trip it replaced
   (``tomllib.loads`` -> edit -> ``tomli_w.dumps`` -> ``parse_spec``), in this
   process, alternated; the median microseconds per experiment and the ratio.

    python bench/spec_read.py --against /path/to/other/checkout/src
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READS = 200  # reads of each example per process

_READER = """
import sys, time
from pathlib import Path
from perfab.specfile import parse_spec
texts = [(str(p), p.read_text()) for p in sorted(Path(sys.argv[1]).rglob("*.toml"))]
start = time.perf_counter()
for _ in range({reads}):
    for path, text in texts:
        parse_spec(text, path)
print((time.perf_counter() - start) / ({reads} * len(texts)) * 1e6)
"""


def read_us(src: Path) -> float:
    """Microseconds per spec read by the reader under ``src``, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _READER.format(reads=READS), str(ROOT / "examples")],
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         check=True)
    return float(out.stdout)


def derive_us(rounds: int = 300) -> tuple[float, float]:
    """Microseconds per bisect experiment: (derive, TOML round-trip), alternated in this process."""
    sys.path.insert(0, str(ROOT / "src"))
    import dataclasses
    import tomllib

    import tomli_w

    from perfab.specfile import load_spec, parse_spec

    exp = load_spec(ROOT / "examples" / "default.toml")

    def by_derive() -> None:
        sides = tuple(dataclasses.replace(exp.variants[0], name=f"{r}-c0ffee", git="c0ffee") for r in ("good", "bad"))
        exp.derive(name=f"{exp.name}-bisect-x", repo="/repo", variants=sides, baseline=sides[0].name)

    def by_round_trip() -> None:
        doc = tomllib.loads(exp.source)
        template = dict(doc["variant"][0])
        doc["experiment"]["name"] = f"{exp.name}-bisect-x"
        doc["experiment"]["repo"] = "/repo"
        doc["experiment"].pop("baseline", None)
        doc["variant"] = [{**template, "name": f"{r}-c0ffee", "git": "c0ffee"} for r in ("good", "bad")]
        parse_spec(tomli_w.dumps(doc), exp.path)

    times: dict[str, list[float]] = {"derive": [], "round-trip": []}
    for _ in range(rounds):
        for name, fn in (("derive", by_derive), ("round-trip", by_round_trip)):
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e6)
    return statistics.median(times["derive"]), statistics.median(times["round-trip"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="the src directory of another perfab checkout")
    args = parser.parse_args()
    if args.against is not None:
        ours, theirs = [], []
        for _ in range(5):
            ours.append(read_us(ROOT / "src"))
            theirs.append(read_us(args.against))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"read a spec: this tree {a:.0f} us, {args.against} {b:.0f} us; ratio {a / b:.2f}")
    d, r = derive_us()
    print(f"bisect experiment: derive {d:.0f} us, TOML round-trip {r:.0f} us; ratio {d / r:.2f}")


if __name__ == "__main__":
    main()
