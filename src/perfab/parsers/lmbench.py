"""lmbench micro-benchmarks (``lat_*``, ``bw_*``), written from the lmbench source.

lmbench is not packaged by Debian; the forms below follow
``src/lib_timing.c`` (``micro()``, ``nano()``, ``milli()``, ``mb()``),
``src/lat_ctx.c`` and ``src/bw_mem.c`` of github.com/intel/lmbench:

- ``Process fork+exit: 270.0952 microseconds`` -> ``process_fork_exit_us``
- ``<label>: X nanoseconds`` / ``milliseconds`` -> ``<label>_ns`` / ``_ms``
- ``Pipe bandwidth: 3412.70 MB/sec`` -> ``pipe_bandwidth_mb_per_s``
- lat_ctx: ``"size=0k ovr=0.75`` then ``<procs> <us>`` -> ``ctx_0k_2procs_us``
- bw_mem and other bw_*: a lone ``<MB> <MB/s>`` line -> ``bandwidth_mb_per_s``

Everything goes to stderr; both streams are read.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, ParsedMetric, combined, metric, nonempty, slug

OPTIONS: frozenset[str] = frozenset()

_UNITS = {"microseconds": ("us", False), "nanoseconds": ("ns", False),
          "milliseconds": ("ms", False), "MB/sec": ("mb_per_s", True)}
_LABELLED = re.compile(rf"^([A-Za-z][^:]*): ({NUM}) (microseconds|nanoseconds|milliseconds|MB/sec)\s*$")
_CTX_HEADER = re.compile(rf'^"size=(\d+)k ovr=({NUM})')
_PAIR = re.compile(rf"^({NUM}) ({NUM})\s*$")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Every result line lmbench printed; ParseError when there is none."""
    out: dict[str, ParsedMetric] = {}
    ctx_size = None
    for line in combined(stdout, stderr).splitlines():
        if found := _LABELLED.match(line):
            suffix, better = _UNITS[found[3]]
            unit = "MB/s" if better else suffix
            out[f"{slug(found[1])}_{suffix}"] = metric(found[2], unit, better)
        elif found := _CTX_HEADER.match(line):
            ctx_size = found[1]
        elif found := _PAIR.match(line):
            out.update(_pair(found, ctx_size))
        elif line.startswith('"'):
            ctx_size = None
    return nonempty(out, "lmbench", "'<label>: <value> microseconds' or bandwidth line")


def _pair(found: re.Match[str], ctx_size: str | None) -> dict[str, ParsedMetric]:
    """A ``<x> <y>`` line: lat_ctx's procs/us inside its block, else bw_*'s MB and MB/s."""
    if ctx_size is not None:
        return {f"ctx_{ctx_size}k_{int(float(found[1]))}procs_us": metric(found[2], "us", False)}
    return {"bandwidth_mb_per_s": metric(found[2], "MB/s", True)}
