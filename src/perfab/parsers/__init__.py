"""Turn a workload's stdout and stderr into named metrics.

``get_parser(name, options)`` returns a function ``(stdout, stderr) ->
dict[str, ParsedMetric]``.  Each tool has a small module here; its metric
names carry their unit (``requests_per_s``, ``latency_p99_ms``) and each
metric says which direction is better.  Output that lacks what a parser
needs, or a number that is not finite (``nan``, ``inf``, ``1e400``), raises
``ParseError`` with one line naming what was wrong; no other exception
escapes a parser, whatever the bytes.

``describe(name)`` returns a :class:`ParserInfo`: the options a parser
accepts and the metrics it declares (module-level ``METRICS``: name or name
pattern, unit, direction, meaning).  Dedicated parsers take each metric's
unit and direction from that declaration; the generic ``regex`` and
``keyvalue`` parsers give a direction only when their options do.

Parsers for tools Debian ships were tested against output recorded here
(``tests/data/<tool>/``); the others were written from the tools' source.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

from perfab.errors import UsageError
from perfab.parsers._base import DeclaredMetric, ParsedMetric, ParseError

__all__ = ["DeclaredMetric", "ParsedMetric", "ParseError", "ParserInfo", "describe", "get_parser", "known_parsers"]

# parser name -> module under perfab.parsers
_MODULES = {
    "ab": "ab",
    "wrk": "wrk",
    "db_bench": "db_bench",
    "perf-bench": "perf_bench",
    "hackbench": "hackbench",
    "sysbench": "sysbench",
    "stress-ng": "stress_ng",
    "redis-benchmark": "redis_benchmark",
    "pgbench": "pgbench",
    "gnu-time": "gnu_time",
    "lmbench": "lmbench",
    "unixbench": "unixbench",
    "will-it-scale": "will_it_scale",
    "regex": "regex",
    "keyvalue": "keyvalue",
}

Parser = Callable[[str, str], dict[str, ParsedMetric]]


@dataclass(frozen=True)
class ParserInfo:
    """What one parser accepts and produces: the material of its README entry."""

    name: str  # the name a spec's `parser = ...` uses ("wrk")
    summary: str  # the first line of the parser module's docstring
    options: tuple[str, ...]  # the option names it accepts, sorted
    metrics: tuple[DeclaredMetric, ...]  # every metric (or metric pattern) it can produce, in declaration order
    option_types: tuple[tuple[str, str, str], ...] = ()  # (option, TOML type, meaning), sorted by option


def known_parsers() -> list[str]:
    """The names ``get_parser`` accepts, sorted."""
    return sorted(_MODULES)


def describe(name: str) -> ParserInfo:
    """The options and declared metrics of the parser called ``name``; UsageError for unknown names."""
    module = _module(name)
    summary = (module.__doc__ or "").strip().splitlines()[0]
    types = getattr(module, "OPTION_TYPES", {})
    return ParserInfo(name, summary, tuple(sorted(module.OPTIONS)), tuple(module.METRICS),
                      tuple((o, *types[o]) for o in sorted(types)))


def _module(name: str) -> ModuleType:
    if name not in _MODULES:
        raise UsageError(f"unknown parser {name!r}: choose one of {', '.join(known_parsers())}")
    return importlib.import_module(f"perfab.parsers.{_MODULES[name]}")


def get_parser(name: str, options: Mapping | None = None) -> Parser:
    """The parser called ``name`` with ``options`` bound; UsageError for unknown names or options."""
    module = _module(name)
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(module.OPTIONS))
    if unknown:
        accepted = ", ".join(sorted(module.OPTIONS)) or "none"
        raise UsageError(f"parser {name!r} has no option {unknown[0]!r}: it accepts {accepted}")
    prepare = getattr(module, "prepare", None)
    bound = prepare(opts) if prepare else opts

    def parse(stdout: str, stderr: str) -> dict[str, ParsedMetric]:
        return module.parse(stdout, stderr, bound)

    parse.__name__ = f"parse_{_MODULES[name]}"
    return parse
