"""Turn a workload's stdout and stderr into named metrics.

``get_parser(name, options)`` returns a function ``(stdout, stderr) ->
dict[str, ParsedMetric]``.  Each tool has a small module here; its metric
names carry their unit (``requests_per_s``, ``latency_p99_ms``) and each
metric says which direction is better.  Output that lacks what a parser
needs raises ``ParseError`` with one line naming what was missing.

Parsers for tools Debian ships were tested against output recorded here
(``tests/data/<tool>/``); the others were written from the tools' source.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from perfab.errors import UsageError
from perfab.parsers._base import ParsedMetric, ParseError

__all__ = ["ParsedMetric", "ParseError", "get_parser", "known_parsers"]

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


def known_parsers() -> list[str]:
    """The names ``get_parser`` accepts, sorted."""
    return sorted(_MODULES)


def get_parser(name: str, options: Mapping | None = None) -> Parser:
    """The parser called ``name`` with ``options`` bound; UsageError for unknown names or options."""
    if name not in _MODULES:
        raise UsageError(f"unknown parser {name!r}: choose one of {', '.join(known_parsers())}")
    module = importlib.import_module(f"perfab.parsers.{_MODULES[name]}")
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
