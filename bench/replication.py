"""Boots as the unit of replication, calibrated: no-op A/As, known effects, and what it costs.

For each configuration (vCPUs, what the guest runs from, the workload), both
sides boot Debian's prebuilt kernel and differ only by a no-op word on the
kernel command line (``perfab_noop=1`` against ``perfab_noop=22``, an
unknown parameter that only reaches init's environment).  Three sessions
through the real ``perfab run``:

1. *today's default*: a pool of ``--boots`` boots per side, two runs each
   (``runs = 2 * boots``), every boot and run perturbed with the session's seed;
2. *before*: one saved guest per side and ``--before-runs`` runs restored
   from it, unperturbed (``perturb = false``, as perfab ran guests before
   boots became the unit); its report is the pseudo-replicated A/A;
3. with ``--effect``: a known effect, ``pti=off`` against ``pti=on`` (every
   system call switches page tables), at the default design (6 boots, 12 runs
   per side).

From the pool, ``--trials`` A/As of 6 boots per side are drawn (boots picked
at random without replacement within a trial, so trials overlap: the rate
is unbiased, its trials are not independent) and compared by
``perfab.analyse.compare`` as a 6-boot session would be; the pool also
gives ``boots // 6`` disjoint A/As, independent of each other.  Printed per
configuration: the rows, the share called ``**`` over the resampled and the
disjoint A/As (target: at most alpha), the ``before`` session's ``**`` rows,
and the cost: host seconds of a run that boots (and saves) its guest and of
one restored from it, and each session's wall time.

    .venv/bin/python bench/replication.py [--configs syscalls-1,...] [--boots 18] [--trials 20]
                                          [--before-runs 6] [--effect] [--keep DIR]
"""

from __future__ import annotations

import argparse
import glob
import io
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfab.analyse.compare import compare
from perfab.cli import main
from perfab.specfile import parse_spec
from perfab.store import Dataset, open_store

REPO = Path(__file__).resolve().parent.parent
UNITS = 6  # boots per side of a drawn A/A: perfab's default measure.boots


@dataclass(frozen=True)
class Config:
    """One calibration configuration."""

    name: str  # its label in the table
    vcpus: int  # measure.vcpus
    root: str  # measure.root
    argv: tuple[str, ...]  # the workload
    parser: str | None  # its parser
    measure: str  # more [measure] lines
    service: str = ""  # a [workload.service] table, with its header


NGINX = ('[workload.service]\nargv = ["nginx", "-e", "stderr", "-p", ".", "-c", "examples/workloads/nginx.conf"]\n'
         'port = 8089\nready_timeout = 120\nrequests = "complete_requests"\n')
CONFIGS = {c.name: c for c in (
    Config("syscalls-1", 1, "initramfs", (str(REPO / "build/syscalls"), "2000"), None, "cache_sim = true\n"),
    Config("forkexec-1", 1, "initramfs", (str(REPO / "build/forkexec"), "-n", "20", "exit", "execve"), "lmbench",
           "cache_sim = true\n"),
    Config("tlbflush-4", 4, "initramfs", (str(REPO / "build/tlbflush"), "-t", "4", "-n", "300"), None,
           'interrupts = ["TLB", "CAL"]\n'),
    Config("nginx-1", 1, "initramfs", ("ab", "-q", "-n", "100", "-c", "4", "http://127.0.0.1:8089/"), "ab",
           'files = ["examples/workloads/nginx.conf", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"]\n', NGINX),
    Config("nginx-1-host", 1, "host", ("ab", "-q", "-n", "100", "-c", "4", "http://127.0.0.1:8089/"), "ab", "",
           NGINX),
    Config("syscalls-4-host", 4, "host", (str(REPO / "build/syscalls"), "2000"), None, ""),
)}


def spec(c: Config, name: str, runs: int, cmdlines: tuple[str, str], extra: str = "", boots: int = UNITS) -> str:
    image = sorted(glob.glob("/boot/vmlinuz-*"))[-1]
    argv = ", ".join(f'"{a}"' for a in c.argv)
    parser = f'parser = "{c.parser}"\n' if c.parser else ""
    sides = "".join(f'[[variant]]\nname = "{side}"\n[variant.kernel]\nimage = "{image}"\ncmdline = "{cmd}"\n\n'
                    for side, cmd in zip(("a", "b"), cmdlines))
    return (f'[experiment]\nname = "{name}"\nruns = {runs}\nwarmup = 0\n{extra}\n'
            f'[measure]\nbackend = "guest"\naccel = "tcg"\nvcpus = {c.vcpus}\nmemory = 512\nroot = "{c.root}"\n'
            f'boots = {boots}\n{c.measure}\n{sides}[[workload]]\nname = "w"\nargv = [{argv}]\n{parser}'
            f"timeout = 900\n{c.service}\n[[workload.metric]]\nname = \"instructions:k\"\n")


def run(path: Path, db: Path) -> float:
    """``perfab run SPEC --no-report``; its wall seconds."""
    start = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(path), "--db", str(db), "--no-report"], out, err)
    if code != 0:
        sys.exit(f"{path}: perfab run exited {code}: {err.getvalue().strip()[-400:]}")
    return time.monotonic() - start


def subset(data: Dataset, keep: np.ndarray) -> Dataset:
    """The runs of ``data`` where ``keep`` (a mask of its table's rows) holds, with their samples."""
    from perfab.store.columns import Samples

    new_row = np.cumsum(keep) - 1
    samples = {m: Samples(new_row[s.rows[keep[s.rows]]], s.values[keep[s.rows]]) for m, s in data.samples.items()
               if keep[s.rows].any()}
    ids = set(data.table.run_id[keep].tolist())
    pick = lambda d: {k: v for k, v in d.items() if k in ids}  # noqa: E731
    return Dataset.of_columns(data.experiment, data.sessions, data.table.take(keep), samples, pick(data.excluded),
                              data.meta, pick(data.profiles))


def stars(a) -> tuple[int, int]:
    """(rows called `**`, rows with a verdict) of an analysis."""
    judged = [r for r in a.rows if r.estimate is not None]
    return sum(r.verdict.value == "**" for r in judged), len(judged)


def drawn(data: Dataset, exp, boots: int, picks: list[tuple[list[int], list[int]]]) -> tuple[int, int]:
    """`**` rows and rows over A/As of the boots ``picks`` gives each side (boot k: the runs with rep % boots = k)."""
    t = data.table
    boot = t.rep % boots
    side_a = t.variant.codes == t.variant.code("a")
    total = [0, 0]
    for a_boots, b_boots in picks:
        keep = (side_a & np.isin(boot, a_boots)) | (~side_a & np.isin(boot, b_boots))
        s, n = stars(compare(subset(data, keep), exp))
        total[0] += s
        total[1] += n
    return total[0], total[1]


def costs(data: Dataset) -> tuple[float | None, float | None]:
    """Median host seconds of a run that booted and saved its guest, and of one restored from it."""
    from perfab.replication import run_cost

    got = [run_cost(n) for n in data.table.notes.levels]
    saved = [c[1] for c in got if c and c[0] == "saved"]
    restored = [c[1] for c in got if c and c[0] == "restored"]
    med = lambda v: float(np.median(v)) if v else None  # noqa: E731
    return med(saved), med(restored)


def calibrate(c: Config, where: Path, boots: int, trials: int, before_runs: int, effect: bool, seed: int) -> dict:
    out = {"config": c.name}
    pool = where / f"{c.name}.toml"
    pool.write_text(spec(c, f"pool-{c.name}", 2 * boots, ("perfab_noop=1", "perfab_noop=22"), boots=boots))
    out["pool_s"] = run(pool, where / "pool.db")
    with open_store(where / "pool.db", create=False) as store:
        data = store.load(f"pool-{c.name}")
    exp = parse_spec(pool.read_text(), str(pool))
    rng = random.Random(seed)
    picks = [(rng.sample(range(boots), UNITS), rng.sample(range(boots), UNITS)) for _ in range(trials)]
    out["stars"], out["rows"] = drawn(data, exp, boots, picks)
    order_a, order_b = rng.sample(range(boots), boots), rng.sample(range(boots), boots)
    disjoint = [(order_a[i:i + UNITS], order_b[i:i + UNITS]) for i in range(0, boots - UNITS + 1, UNITS)]
    out["disjoint"] = (*drawn(data, exp, boots, disjoint), len(disjoint))
    out["boot_s"], out["restore_s"] = costs(data)
    before = where / f"{c.name}-before.toml"
    before.write_text(spec(c, f"before-{c.name}", before_runs, ("perfab_noop=1", "perfab_noop=22"),
                           "perturb = false\n", boots=1))
    out["before_s"] = run(before, where / "before.db")
    with open_store(where / "before.db", create=False) as store:
        out["before"] = stars(compare(store.load(f"before-{c.name}"), parse_spec(before.read_text())))
    if effect:
        known = where / f"{c.name}-pti.toml"
        known.write_text(spec(c, f"pti-{c.name}", 2 * UNITS, ("pti=off", "pti=on")))
        out["effect_s"] = run(known, where / "pti.db")
        with open_store(where / "pti.db", create=False) as store:
            a = compare(store.load(f"pti-{c.name}"), parse_spec(known.read_text()))
        row = next(r for r in a.rows if r.metric == "instructions:k")
        out["effect"] = (row.verdict.value, row.estimate.delta, row.levels.between if row.levels else None)
    return out


def show(results: list[dict], alpha: float) -> None:
    head = (f"{'configuration':<16} {'A/A ** rows':>14} {'rate':>6} {'disjoint':>12} {'before':>9} {'boot s':>7} "
            f"{'restore s':>9} {'pool s':>7} {'before s':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        d = r["disjoint"]
        fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        print(f"{r['config']:<16} {r['stars']:>5}/{r['rows']:<8} {r['stars'] / max(r['rows'], 1):>6.3f} "
              f"{d[0]:>4}/{d[1]:<3}({d[2]}) {r['before'][0]:>4}/{r['before'][1]:<4} {fmt(r['boot_s']):>7} "
              f"{fmt(r['restore_s']):>9} {r['pool_s']:>7.0f} {r['before_s']:>8.0f}")
    print(f"target: A/A `**` rows at most alpha = {alpha:g} of the rows (resampled: trials overlap; disjoint: "
          "independent A/As, their count in parentheses); before: the same A/A with one saved guest per side, "
          "unperturbed")
    for r in results:
        if "effect" in r:
            verdict, delta, between = r["effect"]
            print(f"known effect, {r['config']}: pti=on against pti=off, kernel instructions {100 * delta:+.2f}% "
                  f"{verdict} at {UNITS} boots x 2 runs per side (between boots +-{100 * (between or 0):.2f}%), "
                  f"session {r['effect_s']:.0f} s")


def main_(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--boots", type=int, default=18, help="boots per side of each configuration's A/A pool")
    p.add_argument("--trials", type=int, default=20, help="A/As of 6 boots per side drawn from the pool")
    p.add_argument("--before-runs", type=int, default=6, help="runs per side of the one-saved-guest A/A")
    p.add_argument("--effect", action="store_true", help="also the known effect (pti=on) per configuration")
    p.add_argument("--keep", help="keep the stores in this directory")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if not glob.glob("/boot/vmlinuz-*") or shutil.which("qemu-system-x86_64") is None:
        sys.exit("needs /boot/vmlinuz-* and qemu-system-x86_64 (make sysdeps)")
    results = []
    for name in args.configs.split(","):
        where = Path(args.keep or tempfile.mkdtemp(prefix="perfab-replication-")) / name
        where.mkdir(parents=True, exist_ok=True)
        results.append(calibrate(CONFIGS[name], where, args.boots, args.trials, args.before_runs, args.effect,
                                 args.seed))
        print(f"{name}: done", file=sys.stderr, flush=True)
    show(results, 0.05)


if __name__ == "__main__":
    main_()
