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

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined, number

OPTIONS: frozenset[str] = frozenset()

TOOL = "lmbench"

METRICS = (
    M("{label}_us", "us", False, "'<label>: X microseconds': a latency (lat_syscall, lat_proc, lat_pipe, ...)"),
    M("{label}_ns", "ns", False, "'<label>: X nanoseconds': a latency"),
    M("{label}_ms", "ms", False, "'<label>: X milliseconds': a latency"),
    M("{label}_mb_per_s", "MB/s", True, "'<label>: X MB/sec': a bandwidth (bw_pipe, bw_unix, ...)"),
    M("ctx_{size}k_{procs}procs_us", "us", False, "lat_ctx: context-switch time with <procs> processes of <size> KB"),
    M("bandwidth_mb_per_s", "MB/s", True, "bw_mem and other bw_*: the MB/s of a lone '<MB> <MB/s>' line"),
)

# printed unit -> metric name
_UNITS = {"microseconds": "{label}_us", "nanoseconds": "{label}_ns", "milliseconds": "{label}_ms",
          "MB/sec": "{label}_mb_per_s"}  # fmt: skip
_LABELLED = re.compile(rf"^([A-Za-z][^:]*): ({NUM}) (microseconds|nanoseconds|milliseconds|MB/sec)\s*$")
_CTX_HEADER = re.compile(rf'^"size=(\d+)k ovr=({NUM})')
_PAIR = re.compile(rf"^({NUM}) ({NUM})\s*$")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Every result line lmbench printed; ParseError when there is none."""
    out = Collector(TOOL, METRICS)
    ctx_size = None
    for line in combined(stdout, stderr).splitlines():
        if found := _LABELLED.match(line):
            out.add(_UNITS[found[3]], found[2], label=found[1])
        elif found := _CTX_HEADER.match(line):
            ctx_size = found[1]
        elif found := _PAIR.match(line):
            _pair(out, found, ctx_size)
        elif line.startswith('"'):
            ctx_size = None
    return out.result("'<label>: <value> microseconds' or bandwidth line")


def _pair(out: Collector, found: re.Match[str], ctx_size: str | None) -> None:
    """A ``<x> <y>`` line: lat_ctx's procs/us inside its block, else bw_*'s MB and MB/s."""
    if ctx_size is None:
        out.add("bandwidth_mb_per_s", found[2])
        return
    procs = number(found[1], "lmbench lat_ctx process count")
    if not procs.is_integer() or procs < 0:
        raise ParseError(f"lmbench lat_ctx line {found[0][:40]!r} does not start with a process count: "
                         "check the workload's output")
    out.add("ctx_{size}k_{procs}procs_us", found[2], size=ctx_size, procs=int(procs))
