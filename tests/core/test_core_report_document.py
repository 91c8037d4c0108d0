"""The report document: versioned JSON that validates against its documented schema, typed verdicts and
diagnostics chosen by kind, methods and backends that describe themselves, renderers that share it."""

from __future__ import annotations

import ast
import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from core_helpers import FakeOutcome, cli, fake_runner
from test_core_report_golden import _experiment, _golden

from perfab.analyse.compare import analyse
from perfab.analyse.diagnostics import Diagnostic, Kind
from perfab.analyse.methods import METHODS
from perfab.analyse.verdicts import Verdict
from perfab.report import render
from perfab.report.document import FORMAT_VERSION, document, mark
from perfab.report.schema import SCHEMA, markdown, schema_json
from perfab.run.backends import TimeBackend, backend_type
from perfab.store import Store

ROOT = Path(__file__).resolve().parents[2]

SWEEP = """\
[experiment]
name = "sweep-doc"
runs = 8
warmup = 0
seed = 3

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "scale"
argv = ["./bench", "{variant}", "{threads}"]
parser = "keyvalue"

[workload.params]
threads = [1, 2]

[[workload.metric]]
name = "ops/s"
direction = "higher"
primary = true

[[workload.metric]]
name = "failed"
check = 0
"""


def _sweep_behaviour(seed: int = 7):
    """ops/s per side and thread count; side b fails one request in its first two runs; only a prints extra."""
    rng = random.Random(seed)
    b_runs = iter(range(10_000))

    def behaviour(argv, env):
        side, threads = argv[1], int(argv[2])
        ops = round(1e6 * threads * (1.05 if side == "b" else 1.0) * (1 + rng.gauss(0, 0.004)))
        failed = 1 if side == "b" and next(b_runs) < 2 else 0
        extra = f"extra: {rng.randint(1, 9)}\n" if side == "a" else ""
        return FakeOutcome(wall_s=0.01, stdout=f"ops/s: {ops}\nfailed: {failed}\n{extra}".encode())

    return behaviour


@pytest.fixture
def sweep_db(db):
    runner, _, store = fake_runner(SWEEP, db, _sweep_behaviour())
    assert runner.run().status == "finished"
    store.close()
    return db


def _validate(value, schema: dict, where: str = "$") -> list[str]:
    """What in ``value`` breaks ``schema`` (the JSON Schema keywords the report's schema uses)."""
    if "anyOf" in schema:
        if all(_validate(value, s, where) for s in schema["anyOf"]):
            return [f"{where}: {value!r} matches none of {schema['anyOf']}"]
        return []
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} is not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} not in {schema['enum']}"]
    kinds = schema.get("type")
    if kinds is not None and not any(_is(value, k) for k in (kinds if isinstance(kinds, list) else [kinds])):
        return [f"{where}: {value!r} is not {kinds}"]
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return [f"{where}: {value!r} does not match {schema['pattern']}"]
    out = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{where}: {key} missing" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            extra = schema.get("additionalProperties", True)
            sub = props.get(key, extra)
            if sub is False:
                out.append(f"{where}: unexpected field {key}")
            elif isinstance(sub, dict):
                out += _validate(item, sub, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += _validate(item, schema["items"], f"{where}[{i}]")
    return out


def _is(value, kind: str) -> bool:
    return {"string": isinstance(value, str), "boolean": isinstance(value, bool), "null": value is None,
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "object": isinstance(value, dict), "array": isinstance(value, list)}[kind]


def test_the_documented_schema_is_current():
    """docs/report-json.md and .schema.json are what ``python -m perfab.report.schema [--json]`` prints; the
    README links them."""
    assert (ROOT / "docs" / "report-json.md").read_text() == markdown()
    assert json.loads((ROOT / "docs" / "report-json.schema.json").read_text()) == SCHEMA == json.loads(schema_json())
    assert "docs/report-json.md" in (ROOT / "README.md").read_text()


def test_json_report_matches_golden_and_carries_its_version(db):
    """The golden JSON pins every field: its first is ``format_version``."""
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    assert code == 0
    _golden("improved.json.stdout", out)
    doc = json.loads(out)
    assert list(doc)[0] == "format_version" and doc["format_version"] == FORMAT_VERSION == SCHEMA["properties"][
        "format_version"]["const"]
    assert _validate(doc, SCHEMA) == []


def test_sweep_with_failed_checks_and_a_one_sided_metric_validates(sweep_db):
    code, out, _ = cli("report", "--db", str(sweep_db), "--format", "json", "--all")
    doc = json.loads(out)
    assert code == 0 and _validate(doc, SCHEMA) == []
    verdicts = {(r["metric"], r["params"]["threads"]): r["verdict"] for r in doc["rows"]}
    assert verdicts[("ops/s", "1")] == verdicts[("ops/s", "2")] == "**"
    assert {verdicts[("failed", "1")], verdicts[("failed", "2")]} == {"INVALID (1 runs)"}
    assert verdicts[("extra", "1")] == "-"


def test_validation_catches_what_breaks_the_schema(db):
    """The validator above is not vacuous: a wrong version, a missing field and an unknown verdict fail."""
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    doc = json.loads(cli("report", "--db", str(db), "--format", "json")[1])
    assert _validate({**doc, "format_version": 0}, SCHEMA)
    assert _validate({k: v for k, v in doc.items() if k != "rows"}, SCHEMA)
    assert _validate({**doc, "rows": [{**doc["rows"][0], "verdict": "sig"}]}, SCHEMA)
    assert _validate({**doc, "extra": 1}, SCHEMA)


def test_rows_carry_verdicts_and_diagnostics_as_types(sweep_db):
    with Store(sweep_db) as store:
        a = analyse(store, "sweep-doc", show_all=True)
    assert all(isinstance(r.verdict, Verdict) for r in a.rows)
    assert {Verdict.CHANGE, Verdict.INVALID, Verdict.NONE} <= {r.verdict for r in a.rows}
    invalid = [r for r in a.rows if r.verdict == Verdict.INVALID]
    assert [r.invalid_runs for r in invalid] == [1, 1] and mark(invalid[0]) == "INVALID (1 runs)"
    none = [r for r in a.rows if r.verdict == Verdict.NONE]
    assert none and all([d.kind for d in r.warnings] == [Kind.NO_SAMPLES] for r in none)


def test_a_diagnostic_is_shown_by_its_kind_not_its_wording(sweep_db):
    """A refused row whose sentence happens to read like "no usable runs" is still listed with its reason."""
    with Store(sweep_db) as store:
        a = analyse(store, "sweep-doc", show_all=True)
    section = document(a).sections[0]
    assert any(p.startswith("Not compared (no usable runs on a side): extra") for p in section.problems)
    odd = Diagnostic(Kind.NON_FINITE, "no usable runs on one side", {"samples": 2})
    rows = tuple(replace(r, warnings=(odd,)) if r.verdict == Verdict.NONE else r for r in a.rows)
    section = document(replace(a, rows=rows)).sections[0]
    assert not any(p.startswith("Not compared") for p in section.problems)
    assert "extra: no usable runs on one side" in section.problems


def test_backends_describe_what_they_counted():
    assert backend_type("perf").counted((("cycles", "instructions"), ("branches",))) == \
        "perf stat, one group per run: cycles,instructions | branches"
    assert "cachegrind" in backend_type("cachegrind").counted(((),))
    assert "QEMU" in backend_type("guest").counted(((),))
    assert backend_type("time") is TimeBackend and backend_type("a-backend-from-a-newer-perfab") is TimeBackend
    assert TimeBackend.counted(((),)) == "wall/user/sys time, max RSS, context switches (wait4 rusage)"


def test_setup_says_what_the_backend_counted(db):
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    with Store(db) as store:
        a = analyse(store)
    perf = document(replace(a, backend="perf", groups=(("cycles",),)))
    assert "  counted  : perf stat, one group per run: cycles" in perf.setup
    assert "  counted  : perf stat, one group per run: cycles" in render(replace(a, backend="perf",
                                                                                groups=(("cycles",),)))


def test_each_method_describes_itself_in_the_legend(db):
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    with Store(db) as store:
        a = analyse(store)
    section = document(a).sections[0]
    assert [m.name for m in section.methods] == ["exact", "nonparametric"]
    for note in section.methods:
        assert note.text == METHODS[note.name].describe(a.confidence)
        assert note.text in " ".join(section.legend)
    assert all(m.describe(0.99) for m in METHODS.values())
    assert "99% intervals" in METHODS["normal"].describe(0.99)


def test_html_reads_the_document_not_the_text_renderer():
    """No module of the HTML report imports the plain-text renderer (it used to call its private functions)."""
    for path in (ROOT / "src" / "perfab" / "report" / "html").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = {f"{node.module}.{a.name}" for a in node.names}
                assert node.module != "perfab.report.text" and "perfab.report.text" not in names, path
            if isinstance(node, ast.Import):
                assert all(a.name != "perfab.report.text" for a in node.names), path
