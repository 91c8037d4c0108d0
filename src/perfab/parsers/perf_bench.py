"""``perf bench`` in its default format: sched, syscall, futex, epoll and mem.

Each benchmark starts with ``# Running '<subsystem>/<bench>' benchmark:``;
metric names start with ``<subsystem>_<bench>_`` so that ``perf bench sched
all`` gives distinct names.  What each benchmark prints (tools/perf/bench/):

- sched pipe, syscall *: ``Total time: X [sec]``, ``X usecs/op``, ``N ops/sec``
- sched messaging: ``Total time: X [sec]``
- futex hash/lock-pi, epoll wait: ``Averaged N operations/sec (+- P%)``
- epoll ctl: ``Averaged N ADD|MOD|DEL operations (+- P%)``
- futex wake/requeue/wake-parallel: a final ``... in X ms (+-P%)`` summary
- mem memcpy/memset: ``X GB/sec`` (or MB/KB/bytes) per ``# function 'name'``

``perf bench -f simple`` prints bare numbers with no header; it is refused.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined

OPTIONS: frozenset[str] = frozenset()

TOOL = "perf bench"

METRICS = (
    M("{subsystem}_{bench}_total_s", "s", False, "'Total time: X [sec]' of sched pipe/messaging and syscall"),
    M("{subsystem}_{bench}_us_per_op", "us", False, "'X usecs/op': time per operation"),
    M("{subsystem}_{bench}_ops_per_s", "ops/s", True, "'N ops/sec' or 'Averaged N operations/sec'"),
    M("{subsystem}_{bench}_rsd_pct", "%", None, "the '(+- P%)' after an average: its relative standard deviation"),
    M("{subsystem}_{bench}_{kind}_ops", "count", True, "epoll ctl: 'Averaged N ADD|MOD|DEL operations'"),
    M("{subsystem}_{bench}_ms", "ms", False, "futex wake/requeue/wake-parallel: the summary's '... in X ms'"),
    M("{subsystem}_{bench}_{function}_gb_per_s", "GiB/s", True, "mem memcpy/memset: rate of one '# function'"),
)

_HEADER = re.compile(r"^# Running '([\w-]+)/([\w-]+)' benchmark:", re.M)
_GB = {"GB": 1.0, "MB": 1 / 1024, "KB": 1 / 1024**2, "bytes": 1 / 1024**3}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics of every benchmark section; ParseError if none is recognised."""
    text = combined(stdout, stderr)
    headers = list(_HEADER.finditer(text))
    if not headers:
        raise ParseError(
            "perf bench output has no \"# Running '<subsystem>/<bench>' benchmark:\" line: "
            "is the workload really perf bench, run without '-f simple'?"
        )
    out = Collector(TOOL, METRICS)
    for i, head in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        before = out.added
        for reader in (_totals, _averaged, _summary_ms, _bandwidth):
            reader(out, {"subsystem": head[1], "bench": head[2]}, text[head.end() : end])
        if out.added == before:
            raise ParseError(f"perf bench {head[1]}/{head[2]} printed no result perfab can read: "
                             "it supports sched, syscall, futex, epoll and mem benchmarks")
    return out.metrics


def _totals(out: Collector, names: dict, body: str) -> None:
    if found := re.search(rf"^[ \t]*Total time:\s+({NUM}) \[sec\]", body, re.M):
        out.add("{subsystem}_{bench}_total_s", found[1], **names)
    if found := re.search(rf"^[ \t]*({NUM}) usecs/op\s*$", body, re.M):
        out.add("{subsystem}_{bench}_us_per_op", found[1], **names)
    if found := re.search(rf"^[ \t]*({NUM}) ops/sec\s*$", body, re.M):
        out.add("{subsystem}_{bench}_ops_per_s", found[1], **names)


def _averaged(out: Collector, names: dict, body: str) -> None:
    if found := re.search(rf"^Averaged ({NUM}) operations/sec \(\+- ({NUM})%\)", body, re.M):
        out.add("{subsystem}_{bench}_ops_per_s", found[1], **names)
        out.add("{subsystem}_{bench}_rsd_pct", found[2], **names)
    for value, kind in re.findall(rf"^Averaged ({NUM}) (\w+) operations \(", body, re.M):
        out.add("{subsystem}_{bench}_{kind}_ops", value, kind=kind, **names)


def _summary_ms(out: Collector, names: dict, body: str) -> None:
    """The un-numbered last line of futex wake/requeue/wake-parallel."""
    if found := re.search(rf"^(?!\[Run)\S.* in ({NUM}) ms \(\+-\s*({NUM})%\)", body, re.M):
        out.add("{subsystem}_{bench}_ms", found[1], **names)
        out.add("{subsystem}_{bench}_rsd_pct", found[2], **names)


def _bandwidth(out: Collector, names: dict, body: str) -> None:
    """mem memcpy/memset: one rate per ``# function '<name>'`` block."""
    block = rf"^# function '([\w-]+)'(?:(?!^# function).)*?^[ \t]+({NUM}) (GB|MB|KB|bytes)/sec"
    for function, value, unit in re.findall(block, body, re.M | re.S):
        out.add("{subsystem}_{bench}_{function}_gb_per_s", value, scale=_GB[unit], function=function, **names)
