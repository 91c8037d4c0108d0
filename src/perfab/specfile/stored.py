"""Questions about a spec as a session stored it, answered from its text without validating it again.

A stored spec may come from an older perfab, or have been written before a
key was refused: these answers read its TOML leniently (an unreadable text
answers None or False) and never raise.  They are the only reads of stored
spec text outside ``perfab.specfile.reader``; a session stored since schema 4
also carries its design (``Experiment.design``), which the store reads
instead of the text.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from functools import lru_cache
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


def parser_text(parser: str | None, options: dict) -> str:
    """A workload's parser and its options in words, e.g. ``keyvalue {"only": ["x"]}``."""
    return f"{parser or 'none'} {json.dumps(options, sort_keys=True)}"


def workload_definitions(exp: Any) -> dict[str, dict[str, str]]:
    """Each workload's definition (a digest of its table as the schema writes it) and its parser, by name:
    what a session stores in its design for the analysis to compare sessions."""
    from perfab.specfile.writer import table_of

    return {w.name: {"definition": _digest(table_of(w, "workload")), "parser": parser_text(w.parser, w.parser_options)}
            for w in exp.workloads}


def definitions(session: Any) -> dict[str, dict[str, str]] | None:
    """``workload_definitions`` of a stored session: from its design, else (stored before schema 4) from its
    text; None when that text no longer reads."""
    design = getattr(session, "design", None)
    if design and "workloads" in design:
        return design["workloads"]
    return _legacy_definitions(session.spec_text)


@lru_cache(maxsize=256)
def _legacy_definitions(text: str) -> dict[str, dict[str, str]] | None:
    from perfab.errors import PerfabError
    from perfab.specfile import parse_spec

    try:
        return workload_definitions(parse_spec(text, "<stored spec>"))
    except PerfabError:
        tables = [t for t in workload_tables(text) or [] if isinstance(t, dict) and "name" in t]
        if not tables:
            return None
        return {str(t["name"]): {"definition": _digest(t), "parser": parser_text(t.get("parser"),
                                                                                 t.get("parser_options", {}))}
                for t in tables}


def _digest(table: dict) -> str:
    """A short digest of a table's canonical JSON."""
    return hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()[:16]
