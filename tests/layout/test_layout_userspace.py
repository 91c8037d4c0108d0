"""The layout check on real user-space sides: the demo's program (512 sites), rebuilt with -falign-functions=64.

`perfab run` builds both pairs with gcc through the spec's build command
({layout_cflags}), runs each under cachegrind with seed 000's L1i, and
reports the main pair with the aligned pair's verdicts beside it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perfab.cli import main

REPO = Path(__file__).resolve().parents[2]
SITES = 512  # call sites of the generated program (the demo has 2048; gcc takes minutes over those)
SPEC = """
[experiment]
name = "unlock-layout"
runs = 2  # the exact method decides once a second run shows the counts repeat
warmup = 0
layout_check = true
layout_builds = 1  # one build per side: the check's aligned pair is the other placement (test_layout_builds: K)
build = "mkdir -p {{build}} && cc -O2 {{layout_cflags}} {{flags}} -o {{build}}/lockbench {source}"

[measure]
backend = "cachegrind"
l1i = "32K,8,64"
l1d = "32K,8,64"
ll = "1M,16,64"

[[variant]]
name = "outline"
vars = {{ flags = "-DUNLOCK_OUTLINE" }}

[[variant]]
name = "inline"
vars = {{ flags = "" }}

[[workload]]
name = "lockbench"
argv = ["{{build}}/lockbench", "20000"]
timeout = 300
"""


def _functions(binary: Path) -> dict[str, int]:
    """Text symbols with a size, by address (nm)."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True).stdout
    return {m[3]: int(m[0], 16) for m in re.findall(r"^([0-9a-f]+) ([0-9a-f]+) ([tT]) (\S+)$", out, re.M)}


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None, reason="needs valgrind and cc")
def test_the_demo_checked_against_aligned_functions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "lockbench.c"
    source.write_text(subprocess.run(["python3", str(REPO / "workloads" / "gen_lockbench.py"), str(SITES)],
                                     capture_output=True, text=True, check=True).stdout)
    (tmp_path / "lay.toml").write_text(SPEC.format(source=source))
    code = main(["run", "lay.toml", "--db", "r.db", "--format", "json"], out := _Buffer(), _Buffer())
    assert code == 0
    built = tmp_path / ".perfab" / "build"
    for side in ("outline", "inline"):
        plain = _functions(built / "unlock-layout" / side / "lockbench")
        aligned = _functions(built / "unlock-layout+align64" / side / "lockbench")
        assert aligned and all(addr % 64 == 0 for name, addr in aligned.items() if not name.startswith("_"))
        assert any(addr % 64 for addr in plain.values())  # gcc's own alignment (16) leaves some off a line
    doc = json.loads(out.text)
    rows = {r["metric"]: r for r in doc["rows"]}
    check = [w for w in doc["warnings"] if w["kind"] == "layout_check"]
    assert len(check) == 1 and check[0]["data"]["checked"] >= 4
    assert rows["instructions"]["verdict"] == "**" and not rows["instructions"]["warnings"]  # padding never runs
    code, twin_out = _report("unlock-layout+align64")
    twins = {r["metric"]: r for r in json.loads(twin_out)["rows"]}
    for metric, r in rows.items():
        if r["verdict"] != "**" or metric not in twins:
            continue
        t = twins[metric]
        kept = t["verdict"] == "**" and (t["delta"] > 0) == (r["delta"] > 0)
        assert kept == (not any(w["kind"] == "layout_sensitive" for w in r["warnings"])), metric


def _report(name: str) -> tuple[int, str]:
    out = _Buffer()
    return main(["report", name, "--db", "r.db", "--format", "json"], out, _Buffer()), out.text


class _Buffer:
    """A text stream whose contents are ``text``."""

    def __init__(self):
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    @property
    def text(self) -> str:
        return "".join(self.parts)
