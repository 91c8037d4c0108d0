"""Questions about a spec as a session stored it, answered from its text without validating it again.

A stored spec may come from an older perfab, or have been written before a
key was refused: these answers read its TOML leniently (an unreadable text
answers None or False) and never raise.  They are the only reads of stored
spec text outside ``perfab.spec.reader``; a session stored since schema 4
also carries its design (``Experiment.design``), which the store reads
instead of the text.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

PARSER_KEYS = ("parser", "parser_options")  # the workload keys a parser-only change may touch


def _document(text: str) -> dict[str, Any] | None:
    """The TOML document of ``text``; None when it does not read."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return None


def workload_tables(text: str) -> list | None:
    """The ``[[workload]]`` tables as written; None when the text does not read."""
    doc = _document(text)
    return None if doc is None else doc.get("workload")


def workload_table(text: str, workload: str) -> str | None:
    """Workload ``workload``'s table as canonical JSON (to compare definitions); None when absent."""
    tables = workload_tables(text) or []
    found = [t for t in tables if isinstance(t, dict) and t.get("name") == workload]
    return json.dumps(found, sort_keys=True) if found else None


def parser_only(old_text: str, new_text: str) -> bool:
    """True when two spec texts differ, and only in their workloads' ``parser`` / ``parser_options``."""
    old, new = _document(old_text), _document(new_text)
    if old is None or new is None:
        return False
    return old != new and _without_parsers(old) == _without_parsers(new)


def _without_parsers(doc: dict) -> dict:
    workloads = [{k: v for k, v in w.items() if k not in PARSER_KEYS} if isinstance(w, dict) else w
                 for w in doc.get("workload", [])]
    return {**doc, "workload": workloads}


def legacy_design(text: str) -> dict[str, Any]:
    """The design of a session stored before schema 4 (no design of its own): sequential or not, from its text."""
    doc = _document(text) or {}
    experiment = doc.get("experiment", {})
    auto = isinstance(experiment, dict) and experiment.get("runs") == "auto"
    return {"sequential": {} if auto else None}
