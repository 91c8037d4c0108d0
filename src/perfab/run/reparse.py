"""A parser-only fix applied to the runs already stored: their outputs are read again, not run again.

When a session stopped because its parser could not read the output (at
one sweep point, say), the fix is usually in ``parser`` or
``parser_options`` alone.  ``perfab run SPEC --resume`` then accepts the
changed spec: ``parser_only`` checks that nothing else changed, and
``reparse_session`` reads every stored output of the session again with
the new parser and stores the result as a new attempt of its planned run
(the newest attempt counts; the earlier ones stay).  The run's own readings
(rusage, counters, service, machine) are kept as they were; a run that
failed to parse had none stored, so under a backend whose readings are
rusage alone (``own_readings`` false: the time backend) its rusage is
rebuilt from the run's row, and under other backends it is left failed
(its counters were not kept) and named.  An output cut at
``stdout_cap`` is never read again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from perfab.errors import PerfabError
from perfab.plan import PlannedRun
from perfab.specfile.backends import declared
from perfab.run.readings import parsed_metric, rusage_readings
from perfab.specfile import Experiment
from perfab.specfile.stored import parser_only  # noqa: F401 (the runner asks here)
from perfab.store import RunRecord
from perfab.store.dataset import params_from_json

UNPARSED = "output not parsed"  # how a run that failed to parse begins its reason


@dataclass(frozen=True)
class Reparsed:
    """What reading a session's stored outputs again came to."""

    parsed: int  # runs whose output the new parser read
    unparsed: int  # runs it could not read either
    kept: int  # runs left as they were (not a parse failure, output cut, or counters not kept)


def reparse_session(store, session: int, exp: Experiment, backend: str) -> Reparsed:
    """Read every stored output of ``session`` again with ``exp``'s parsers; a new attempt per run read."""
    from perfab.parsers import get_parser

    rows = [r for r in store.run_rows(exp.name) if r["session"] == session]
    ids = {r["run_id"] for r in rows}
    samples: dict[int, dict[str, tuple[float, str]]] = {}
    for rid, metric, value, source in store._samples(exp.name):
        if rid in ids:
            samples.setdefault(rid, {})[metric] = (value, source)
    excluded: dict[int, dict[str, str]] = {}
    for rid, metric, reason in store.exclusions(exp.name):
        if rid in ids:
            excluded.setdefault(rid, {})[metric] = reason
    profiles: dict[int, dict[str, float]] = {}
    for rid, key, share in store.profile_shares(exp.name):
        if rid in ids:
            profiles.setdefault(rid, {})[key] = share
    parsers = {w.name: get_parser(w.parser, w.parser_options) for w in exp.workloads if w.parser is not None}
    parsed = unparsed = kept = 0
    for row in rows:
        parse = parsers.get(row["workload"])
        rec = _again(store, row, parse, samples.get(row["run_id"], {}), excluded.get(row["run_id"], {}),
                     profiles.get(row["run_id"], {}), backend)
        if rec is None:
            kept += 1
            continue
        store.record_run(session, _planned(row), rec)
        parsed, unparsed = (parsed + 1, unparsed) if rec.status == "ok" else (parsed, unparsed + 1)
    return Reparsed(parsed, unparsed, kept)


def _again(store, row: dict, parse, samples: dict, excluded: dict, profile: dict, backend: str) -> RunRecord | None:
    """The run's record with its output read again, or None when it is left as it was."""
    failed = row["status"] == "failed"
    unparsed = (row["reason"] or "").startswith(UNPARSED)
    if parse is None or row["status"] not in ("ok", "failed") or (failed and not unparsed):
        return None
    stdout, stderr = store.output(row["run_id"])
    if (row["stdout_bytes"] or 0) > len(stdout) or (row["stderr_bytes"] or 0) > len(stderr):
        return None  # cut at stdout_cap: a parser reading part of it could read the wrong figure
    own = {m: vs for m, vs in samples.items() if vs[1] != "parser"}
    if failed:
        if declared(backend).own_readings:
            return None  # its counters were not stored with the failure
        own = _rusage(row)
    reason, metrics, meta = None, {m: v for m, (v, _) in own.items()}, {}
    notes = tuple(json.loads(row["notes_json"] or "[]"))
    sources = {m: s for m, (_, s) in own.items()}
    try:
        got = parse(stdout.decode(errors="replace"), stderr.decode(errors="replace"))
    except PerfabError as e:
        reason = f"{UNPARSED}: {e}"
    else:
        for m, p in got.items():
            if m not in own:
                metrics[m], sources[m], meta[m] = p.value, "parser", parsed_metric(m, p)
    return RunRecord("failed" if reason else "ok", reason, row["started_at"], row["wall_s"], row["user_s"],
                     row["sys_s"], row["max_rss_kb"], row["nvcsw"], row["nivcsw"], row["exit_code"], row["signal"],
                     bool(row["timed_out"]), stdout, stderr, row["stdout_bytes"] or 0, row["stderr_bytes"] or 0,
                     {} if reason else metrics, {} if reason else excluded, notes, meta, sources,
                     {} if reason else profile)


def _rusage(row: dict) -> dict[str, tuple[float, str]]:
    """A failed run's rusage readings from its stored row (the time backend's own metrics)."""
    return {m: (v, "rusage") for m, v in rusage_readings(row.get).items() if v is not None}


def _planned(row: dict) -> PlannedRun:
    return PlannedRun(row["seq"], row["workload"], row["variant"], row["grp"], bool(row["warmup"]), row["block"],
                      params_from_json(row["params_json"]))
