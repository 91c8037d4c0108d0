"""Every parser with the options it needs and the recorded output it reads (tests/data/<tool>/).

Shared by the declaration test and the fuzz test, so both cover every name
``known_parsers()`` lists (``test_every_parser_has_a_case`` checks that).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class Case:
    """One parser configuration and the fixture directory it is run on."""

    parser: str  # name for get_parser
    options: dict  # options for get_parser
    directory: str  # tests/data/<directory>

    @property
    def id(self) -> str:
        return f"{self.parser}{'-' + '-'.join(sorted(self.options)) if self.options else ''}"


CASES = (
    Case("ab", {}, "ab"),
    Case("wrk", {}, "wrk"),
    Case("db_bench", {}, "db_bench"),
    Case("perf-bench", {}, "perf-bench"),
    Case("hackbench", {}, "hackbench"),
    Case("sysbench", {}, "sysbench"),
    Case("stress-ng", {}, "stress-ng"),
    Case("redis-benchmark", {}, "redis-benchmark"),
    Case("pgbench", {}, "pgbench"),
    Case("gnu-time", {}, "gnu-time"),
    Case("lmbench", {}, "lmbench"),
    Case("unixbench", {}, "unixbench"),
    Case("unixbench", {"duration_s": 2}, "unixbench"),
    Case("will-it-scale", {}, "will-it-scale"),
    Case("will-it-scale", {"tasks": 2}, "will-it-scale"),
    Case("keyvalue", {}, "keyvalue"),
    Case("keyvalue", {"only": ["ops/s"], "units": {"ops/s": "ops/s"}, "higher_is_better": {"ops/s": True}},
         "keyvalue"),
    # pgbench's output read by named regexes; groups wide enough to capture 'nan' or '1e400'
    Case("regex", {"patterns": {"tps": r"^tps = (?P<value>\S+) \(without", "lat": r"latency average = (\S+) ms"},
                   "units": {"tps": "tx/s", "lat": "ms"}, "higher_is_better": {"tps": True}}, "pgbench"),
)

# recorded runs a parser refuses on purpose: (directory, stem)
REFUSED = {("perf-bench", "sched_pipe_simple")}  # `perf bench -f simple` has no header


def recorded(directory: str) -> list[tuple[str, str, str]]:
    """``(stem, stdout, stderr)`` of every recorded run in ``tests/data/<directory>``, sorted by stem.

    will-it-scale's runtest.py CSV is one stream (stdout).
    """
    base = DATA / directory
    stems = sorted({p.stem for p in base.iterdir() if p.suffix in (".txt", ".stderr", ".csv")})
    runs = []
    for stem in stems:
        streams = []
        for suffix in (".txt", ".stderr"):
            path = base / (stem + suffix)
            if suffix == ".txt" and not path.exists():
                path = base / (stem + ".csv")
            streams.append(path.read_text(encoding="utf-8", errors="replace") if path.exists() else "")
        runs.append((stem, streams[0], streams[1]))
    return runs
