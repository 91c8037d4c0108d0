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

from perfab.parsers._base import NUM, ParseError, ParsedMetric, combined, metric, slug

OPTIONS: frozenset[str] = frozenset()

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
    out: dict[str, ParsedMetric] = {}
    for i, head in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        prefix = f"{slug(head[1])}_{slug(head[2])}"
        found = _section(prefix, text[head.end() : end])
        if not found:
            raise ParseError(f"perf bench {head[1]}/{head[2]} printed no result perfab can read: "
                             "it supports sched, syscall, futex, epoll and mem benchmarks")
        out.update(found)
    return out


def _section(prefix: str, body: str) -> dict[str, ParsedMetric]:
    """Every result form that occurs in one benchmark's output."""
    out: dict[str, ParsedMetric] = {}
    for reader in (_totals, _averaged, _summary_ms, _bandwidth):
        out.update(reader(prefix, body))
    return out


def _totals(prefix: str, body: str) -> dict[str, ParsedMetric]:
    out = {}
    if found := re.search(rf"^\s*Total time:\s+({NUM}) \[sec\]", body, re.M):
        out[f"{prefix}_total_s"] = metric(found[1], "s", False)
    if found := re.search(rf"^\s*({NUM}) usecs/op\s*$", body, re.M):
        out[f"{prefix}_us_per_op"] = metric(found[1], "us", False)
    if found := re.search(rf"^\s*({NUM}) ops/sec\s*$", body, re.M):
        out[f"{prefix}_ops_per_s"] = metric(found[1], "ops/s", True)
    return out


def _averaged(prefix: str, body: str) -> dict[str, ParsedMetric]:
    out = {}
    if found := re.search(rf"^Averaged ({NUM}) operations/sec \(\+- ({NUM})%\)", body, re.M):
        out[f"{prefix}_ops_per_s"] = metric(found[1], "ops/s", True)
        out[f"{prefix}_rsd_pct"] = metric(found[2], "%", None)
    for value, kind in re.findall(rf"^Averaged ({NUM}) (\w+) operations \(", body, re.M):
        out[f"{prefix}_{kind.lower()}_ops"] = metric(value, "count", True)
    return out


def _summary_ms(prefix: str, body: str) -> dict[str, ParsedMetric]:
    """The un-numbered last line of futex wake/requeue/wake-parallel."""
    out = {}
    if found := re.search(rf"^(?!\[Run)\S.* in ({NUM}) ms \(\+-\s*({NUM})%\)", body, re.M):
        out[f"{prefix}_ms"] = metric(found[1], "ms", False)
        out[f"{prefix}_rsd_pct"] = metric(found[2], "%", None)
    return out


def _bandwidth(prefix: str, body: str) -> dict[str, ParsedMetric]:
    """mem memcpy/memset: one rate per ``# function '<name>'`` block."""
    out = {}
    block = rf"^# function '([\w-]+)'(?:(?!^# function).)*?^\s+({NUM}) (GB|MB|KB|bytes)/sec"
    for name, value, unit in re.findall(block, body, re.M | re.S):
        out[f"{prefix}_{slug(name)}_gb_per_s"] = metric(float(value) * _GB[unit], "GiB/s", True)
    return out
