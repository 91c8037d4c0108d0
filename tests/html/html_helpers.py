"""Shared helpers of the HTML report tests: deterministic experiments and a small HTML reader.

Experiments run through the real runner, store and analysis with the
``FakeExecutor`` (as ``tests/core/test_core_report_golden.py`` does), so
every number is fixed by a seed.  ``Node``/``parse`` build a tree from a
page with the standard library's parser, for assertions on its structure.
"""

from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path

from perfab.analyse.compare import Analysis, analyse
from perfab.cli import main
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

REPO = Path(__file__).resolve().parents[2]

FIXED_ENV = {  # a machine snapshot that does not depend on the machine running the tests
    "cpu.model": "Test CPU 3000", "cpu.sockets": "1", "cpu.cores": "4", "cpu.threads": "8",
    "kernel.release": "6.1.0-test", "cpufreq.governor": "performance", "cpufreq.boost": "0", "cpu.smt": "on",
}

LOCKBENCH = """\
[experiment]
name = "lockbench-html"
runs = {runs}
warmup = 1
seed = 1
margin = 0.5

{variants}
[[workload]]
name = "lockbench"
argv = ["./build/{{variant}}/lockbench", "3000000"]
parser = "keyvalue"

[[workload.metric]]
name = "ops/s"
label = "{label}"
direction = "higher"
primary = true

[[workload.metric]]
name = "checksum"
label = "checksum (same work)"
method = "exact"
"""

TWO = '[[variant]]\nname = "outline"\n\n[[variant]]\nname = "inline"\n'
THREE = TWO + '\n[[variant]]\nname = "inline-O3"\n'


def lockbench(speed: dict[str, float], seed: int = 42, drift: dict[str, float] | None = None):
    """Seeded lockbench: ops/s around 1e6 * speed[side], 0.5% noise; ``drift[side]`` adds that fraction per run."""
    rng = random.Random(seed)
    count: dict[str, int] = {}

    def behaviour(argv, env):
        side = argv[0].split("/")[2]
        count[side] = count.get(side, 0) + 1
        trend = 1 + (drift or {}).get(side, 0.0) * count[side]
        ops = round(1_000_000 * speed[side] * trend * (1 + rng.gauss(0, 0.005)))
        return FakeOutcome(wall_s=round(3_000_000 / ops, 6), user_s=round(2_990_000 / ops, 6),
                           stdout=f"ops/s: {ops}\nchecksum: 4242\n".encode())

    return behaviour


def run_fake(spec_text: str, db: Path, behaviour) -> None:
    """Run a spec to the end with the fake executor and a fixed environment."""
    with Store(db) as store:
        result = Runner(parse_spec(spec_text, "spec.toml"), store, TimeBackend(), FakeExecutor(behaviour),
                        dict(FIXED_ENV)).run()
    assert result.status == "finished"


def analysis_of(db: Path, name: str | None = None) -> Analysis:
    with Store(db, readonly=True) as store:
        return analyse(store, name)


def cli(*argv: str) -> tuple[int, str, str]:
    """``perfab`` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def rename_variant(a: Analysis, old: str, new: str) -> Analysis:
    """The analysis with side ``old`` called ``new`` everywhere (names the spec reader would refuse)."""
    swap = lambda v: new if v == old else v  # noqa: E731
    return replace(a, variants=tuple(swap(v) for v in a.variants),
                   rows=tuple(replace(r, variant=swap(r.variant)) for r in a.rows),
                   runs_per_side={swap(k): v for k, v in a.runs_per_side.items()},
                   workloads=tuple(replace(w, failed={swap(k): v for k, v in w.failed.items()}) for w in a.workloads),
                   profiles={(w, swap(v)): p for (w, v), p in a.profiles.items()})


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "embed", "source", "wbr"}


@dataclass
class Node:
    """One element of a parsed page."""

    tag: str
    attrs: dict[str, str]
    children: list = field(default_factory=list)  # Node or str

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def shown(self) -> str:
        """The text a reader sees: tooltips (``<title>`` children) left out."""
        return "".join(c if isinstance(c, str) else c.shown() for c in self.children
                       if isinstance(c, str) or c.tag != "title")

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        """Every descendant element with this tag (any when None) and this class among its classes."""
        out = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (cls is None or cls in c.attrs.get("class", "").split()):
                    out.append(c)
                out += c.all(tag, cls)
        return out

    def by_id(self, ident: str) -> Node | None:
        return next((n for n in self.all() if n.attrs.get("id") == ident), None)


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(page: str) -> Node:
    b = _Builder()
    b.feed(page)
    b.close()
    return b.root


def cells(row: Node) -> list[str]:
    """The texts of a table row's cells, whitespace collapsed."""
    return [re.sub(r"\s+", " ", c.text()).strip()
            for c in row.children if isinstance(c, Node) and c.tag in ("td", "th")]


def text_table(report: str, first_label: str) -> list[list[str]]:
    """The rows of the text report's table that starts at ``first_label``: cells split on 2+ spaces."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_label))
    rows = []
    for line in lines[start:]:
        if line.startswith("---"):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows
