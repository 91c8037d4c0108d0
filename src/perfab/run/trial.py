"""A parser dry-run: each workload once per side and sweep point, before a session is spent on it.

``try_spec`` runs the spec's plan cut to one measured run per cell (side
and point) and no warm-up, through the same runner, backend, services and
parser as ``perfab run``, into a throw-away SQLite file that is deleted
afterwards: nothing reaches the results database.  Every run counts, a
failed one too (the abort limit is lifted), so a regex that fails at one
sweep point only shows there.  ``parse_output`` reads an output file
already at hand with a workload's parser, without running anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfab.errors import UsageError
from perfab.specfile import Experiment, Workload

_EVERY_RUN_MAY_FAIL = 1 << 30  # a trial never aborts: each cell's outcome is what it is for


@dataclass(frozen=True)
class Reading:
    """One metric a trial run produced."""

    metric: str  # metric name
    value: float  # the value read
    unit: str | None  # its unit as the parser or backend gave it
    source: str  # parser | backend | rusage | service | machine


@dataclass(frozen=True)
class Trial:
    """One trial run: a workload on one side at one sweep point."""

    workload: str  # workload name
    side: str  # variant name
    params: tuple[tuple[str, str], ...]  # sweep point, () outside sweeps
    status: str  # ok | failed | interrupted
    reason: str | None  # why it failed, e.g. "output not parsed: ..."
    readings: tuple[Reading, ...]  # what each metric read, in the order stored
    stdout_tail: tuple[str, ...]  # the last lines of stdout, for fixing a parser


def trial_spec(exp: Experiment) -> Experiment:
    """``exp`` cut to one measured run per cell, no warm-up, in plan order, never aborting."""
    return dataclasses.replace(exp, runs=1, warmup=0, order="sequential", sequential=None,
                               max_failures=_EVERY_RUN_MAY_FAIL, layout_builds=1)


def try_spec(exp: Experiment, side: str | None = None, say: Callable[[str], None] = lambda line: None,
             executor=None) -> list[Trial]:
    """Run every workload once per side (or only ``side``) and sweep point; what each run read."""
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.store import Store

    trial = trial_spec(exp)
    with tempfile.TemporaryDirectory(prefix="perfab-try-") as tmp, Store(Path(tmp) / "try.db") as store:
        with (RealExecutor() if executor is None else contextlib.nullcontext(executor)) as ex:
            runner = Runner(trial, store, make_backend(trial.measure), ex, {}, say=say)
            runner.busy = None  # a handful of runs: too few to judge the machine by
            runner.run(side=side)
        return _trials(store, trial.name)


def _trials(store, name: str) -> list[Trial]:
    """The stored trial runs, with their readings and the tail of their output."""
    from perfab.store.dataset import params_from_json

    data = store.load(name)
    out = []
    for row in store.run_rows(name):
        values = data.values.get(row["run_id"], {})
        readings = tuple(_reading(data.meta.get((row["workload"], m)), m, v) for m, v in values.items())
        stdout = store.output(row["run_id"])[0].decode(errors="replace").rstrip().splitlines()
        out.append(Trial(row["workload"], row["variant"], params_from_json(row["params_json"]), row["status"],
                         row["reason"], readings, tuple(stdout[-3:])))
    return out


def _reading(meta, metric: str, value: float) -> Reading:
    return Reading(metric, value, meta.unit if meta else None, meta.origin if meta else "backend")


def parse_output(exp: Experiment, workload: str | None, stdout_path: str,
                 stderr_path: str | None = None) -> tuple[Workload, dict]:
    """Read a saved output file with a workload's parser: (the workload, metric -> ParsedMetric)."""
    from perfab.parsers import get_parser

    chosen = _workload(exp, workload)
    if chosen.parser is None:
        raise UsageError(f"workload {chosen.name!r} has no parser; set workload.parser in {exp.path}")
    parse = get_parser(chosen.parser, chosen.parser_options)
    cap = exp.stdout_cap_bytes
    return chosen, parse(_read(stdout_path, cap), _read(stderr_path, cap) if stderr_path else "")


def _workload(exp: Experiment, name: str | None) -> Workload:
    """The named workload, or the spec's only workload with a parser."""
    if name is not None:
        return exp.workload(name)
    parsed = [w for w in exp.workloads if w.parser is not None]
    if len(parsed) == 1:
        return parsed[0]
    if not parsed:
        raise UsageError(f"no workload of {exp.path} has a parser; set workload.parser")
    raise UsageError(f"{exp.path} has several workloads with a parser ({', '.join(w.name for w in parsed)}); "
                     "choose one with --workload NAME")


def _read(path: str, cap: int) -> str:
    """A saved output, as ``run`` would read it: a regular file of at most ``cap`` bytes (experiment.stdout_cap);
    a FIFO, a device or a directory is refused unread, and a longer file too (run fails such a run unparsed)."""
    fix = "give the file the workload's output was saved to"
    try:
        with open(path, "rb", opener=_no_block) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                from perfab.kernel.preflight import file_kind

                raise UsageError(f"{path} is {file_kind(st.st_mode)}, not a saved output; {fix}")
            data = f.read(cap + 1)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}; {fix}") from None
    if len(data) > cap:
        raise UsageError(f"{path} holds more than experiment.stdout_cap ({cap:,} bytes), and `perfab run` fails such "
                         "a run unparsed (a parser reading part of it could read the wrong figure); raise stdout_cap "
                         "in the spec")
    return data.decode(errors="replace")


def _no_block(path: str, flags: int) -> int:
    """Open without waiting for a FIFO's writer: it is refused, not read."""
    return os.open(path, flags | os.O_NONBLOCK)
