"""The layout check on stored runs: rows marked layout-sensitive in every format, the aligned pair as run.

The runs come from a fake executor whose workload prints counts that
depend on the experiment (the main pair or its aligned pair, named in the
argv) and the side: one row keeps its `**` under alignment, one loses it,
one flips its sign.  The sides' build commands run for real.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from perfab.analyse.compare import analyse
from perfab.errors import SpecError
from perfab.report import render
from perfab.run.aligned import ALIGN_CFLAGS, SUFFIX, aligned, openings, pair
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.layout import PAD_VAR
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

MINE = ("kept", "vanish", "flip")  # the workload's metrics (rusage rows come besides them)
COUNTS = {  # (pair, side) -> counts printed: kept (same ** both), vanish (** then flat), flip (** then -**)
    ("main", "a"): {"kept": 1000, "vanish": 1000, "flip": 1000},
    ("main", "b"): {"kept": 1100, "vanish": 1050, "flip": 1100},
    ("aligned", "a"): {"kept": 1000, "vanish": 1000, "flip": 1000},
    ("aligned", "b"): {"kept": 1120, "vanish": 1000, "flip": 900},
}
SPEC = """
[experiment]
name = "lay"
runs = 2
warmup = 0
layout_check = true
build = "true {layout_cflags}"

[[variant]]
name = "a"
[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["count", "{experiment}", "{variant}"]
parser = "keyvalue"
""" + "".join(f'[[workload.metric]]\nname = "{m}"\ndirection = "lower"\nmethod = "exact"\n'
              for m in ("kept", "vanish", "flip"))


def _counts(argv: list[str], env: dict[str, str]) -> FakeOutcome:
    which = "aligned" if argv[1].endswith(SUFFIX) else "main"
    text = "".join(f"{k}: {v}\n" for k, v in COUNTS[(which, argv[2])].items())
    return FakeOutcome(wall_s=0.01, stdout=text.encode())


@pytest.fixture
def stored(tmp_path: Path):
    """Both pairs run into one store, as `perfab run` runs them; (store, executor, main experiment)."""
    path = tmp_path / "lay.toml"
    path.write_text(SPEC)
    exp = parse_spec(SPEC, str(path))
    store = Store(tmp_path / "r.db")
    ex = FakeExecutor(_counts)
    for one, resume in openings(store, pair(exp), False):
        Runner(one, store, TimeBackend(), ex, {"host": "t"}).run(resume=resume)
    yield store, ex, exp
    store.close()


def test_rows_whose_verdict_vanishes_or_flips_are_marked_in_every_format(stored):
    store, _, exp = stored
    a = analyse(store, "lay")
    marked = {r.metric: [d for d in r.warnings if d.kind == "layout_sensitive"] for r in a.rows}
    assert not marked["kept"] and len(marked["vanish"]) == 1 and len(marked["flip"]) == 1
    assert marked["vanish"][0].text == ("layout-sensitive: ** +5.00% here, flat +0.00% in lay+align64 (every "
                                        "function aligned to 64 bytes, a random stack offset per run)")
    assert marked["flip"][0].data == {"experiment": "lay+align64", "aligned_verdict": "**",
                                      "aligned_delta": pytest.approx(-0.1), "delta": pytest.approx(0.1)}
    summary = [w for w in a.warnings if w.kind == "layout_check"]
    assert [w.data for w in summary] == [{"experiment": "lay+align64", "checked": 3, "sensitive": 2}]
    text = render(a, "text")
    assert "vanish: layout-sensitive: ** +5.00% here, flat +0.00% in lay+align64" in " ".join(text.split())
    assert "1 of 3 `**` row(s) kept their verdict and sign; 2 layout-sensitive" in " ".join(text.split())
    assert "layout-sensitive: \\*\\* +10.00% here, \\*\\* -10.00% in lay+align64" in render(a, "markdown")
    doc = json.loads(render(a, "json"))
    kinds = {r["metric"]: [d["kind"] for d in r["warnings"]] for r in doc["rows"] if r["metric"] in MINE}
    assert kinds == {"kept": [], "vanish": ["layout_sensitive"], "flip": ["layout_sensitive"]}
    layout = {r["metric"]: r["layout"] for r in csv.DictReader(io.StringIO(render(a, "csv")))}
    assert {m: layout[m] for m in MINE} == {"kept": "", "vanish": "layout-sensitive", "flip": "layout-sensitive"}
    assert set(layout.values()) == {"", "layout-sensitive"}  # the rusage rows: not `**`, not marked
    lkp = {next(t for t in line.split() if t.startswith("w.")): line for line in render(a, "lkp").splitlines()
           if " w." in line}
    assert [m for m in MINE if lkp[f"w.{m}"].endswith("[** layout-sensitive]")] == ["vanish", "flip"]
    page = render(a, "html")
    assert "layout-sensitive: ** +5.00% here" in page and "layout-sensitive: ** +10.00% here, ** -10.00%" in page


def test_the_json_report_with_marks_validates_against_the_schema(stored):
    """The schema's check of the report tests (tests/core): no complaint, and a mark without its data fails."""
    import sys

    from perfab.report.schema import SCHEMA

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from test_core_report_document import _validate

    doc = json.loads(render(analyse(stored[0], "lay"), "json"))
    assert _validate(doc, SCHEMA) == []
    flip = next(r for r in doc["rows"] if r["metric"] == "flip")
    del flip["warnings"][0]["data"]["aligned_verdict"]
    assert _validate(doc, SCHEMA)


def test_the_aligned_pair_is_built_with_aligned_functions_and_padded_at_random(stored):
    store, ex, exp = stored
    assert [e.name for e in pair(exp)] == ["lay", "lay+align64"]
    built = {s.experiment: s.sources for s in store.sessions("lay") + store.sessions("lay+align64")}
    assert built["lay"]["a"]["command"] == ["true "]
    assert built["lay+align64"]["b"]["command"] == [f"true {ALIGN_CFLAGS}"]
    pads = {(argv[1], argv[2]): [] for argv, _, _ in ex.calls}
    for argv, env, _ in ex.calls:
        pads[(argv[1], argv[2])].append(len(env[PAD_VAR]))
    assert len(set(pads[("lay", "a")])) == 1 and pads[("lay", "a")] == pads[("lay", "b")]  # equal, fixed
    assert len(set(pads[("lay+align64", "a")] + pads[("lay+align64", "b")])) == 4  # a new offset every run
    assert "random bytes per run" in store.sessions("lay+align64")[-1].environment["layout"]


def test_kernel_sides_get_the_aligned_options():
    text = SPEC.replace('build = "true {layout_cflags}"\n', '[measure]\nbackend = "guest"\n') \
        .replace('name = "a"', 'name = "a"\n[variant.kernel]\nconfig = { PREEMPT = "y" }') \
        .replace('name = "b"', 'name = "b"\n[variant.kernel]\npatches = ["x.patch"]')
    text = text.replace("[measure]\nbackend = \"guest\"\n", "") + '[measure]\nbackend = "guest"\n'
    two = aligned(parse_spec(text, "k.toml"))
    assert two.name == "lay+align64" and two.layout == "random" and not two.layout_check
    assert dict(two.variants[0].kernel.config) == {"PREEMPT": "y", "DEBUG_FORCE_FUNCTION_ALIGN_64B": "y",
                                                   "EXPERT": "y"}
    assert two.variants[1].kernel.patches == ("x.patch",)
    assert parse_spec(two.source, "again.toml").variants[0].kernel.config == two.variants[0].kernel.config


def test_a_resume_runs_what_is_left_of_the_pair(stored, tmp_path):
    store, _, exp = stored
    assert openings(store, pair(exp), True) == [(exp, True)]  # both finished: the first says so
    fresh = Store(tmp_path / "other.db")
    assert [(e.name, r) for e, r in openings(fresh, pair(exp), True)] == [("lay", False), ("lay+align64", False)]
    fresh.close()


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace("true {layout_cflags}", "true"), "side 'a' is not built with {layout_cflags}"),
    (lambda s: s.replace('build = "true {layout_cflags}"\n', ""), "side 'a' is not built with {layout_cflags}"),
    (lambda s: s.replace('build = "true {layout_cflags}"\n', "").replace(
        'name = "a"', 'name = "a"\n[variant.kernel]\nimage = "/boot/vmlinuz"').replace(
        'name = "b"', 'name = "b"\n[variant.kernel]\nimage = "/boot/vmlinuz"') + '[measure]\nbackend = "guest"\n',
     "side 'a' boots a prebuilt image, which cannot be rebuilt with aligned functions"),
])
def test_a_side_the_check_cannot_rebuild_is_refused(edit, words):
    with pytest.raises(SpecError) as info:
        parse_spec(edit(SPEC), "lay.toml")
    assert words in str(info.value) and "experiment.layout_check" in str(info.value)
