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

from core_helpers import FakeOutcome, cli, fake_runner, two_sides
from test_core_report_golden import _experiment, _golden
from test_core_runner_fake import EXTERNAL
from test_core_sequential_runs import SPEC as SEQUENTIAL, _behaviour as _sequential_behaviour
from test_core_trust_store import _v1_database

from perfab.analyse.compare import analyse
from perfab.analyse.diagnostics import DATA, Diagnostic, Kind
from perfab.analyse.methods import get_method, method_names
from perfab.analyse.verdicts import Verdict
from perfab.report import render
from perfab.report.document import FORMAT_VERSION, document, mark
from perfab.report.formats import CSV_FIELDS
from perfab.report.schema import HISTORY, SCHEMA, markdown, schema_json
from perfab.specfile.backends import TIME, stored
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
    if "$ref" in schema:  # "#/$defs/NAME", in the report's schema
        return _validate(value, SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[-1]], where)
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
    verdicts = {(r["metric"], r["params"]["threads"]): (r["verdict"], r["invalid_runs"]) for r in doc["rows"]}
    assert verdicts[("ops/s", "1")] == verdicts[("ops/s", "2")] == ("**", None)
    assert {verdicts[("failed", "1")], verdicts[("failed", "2")]} == {("INVALID", 1)}
    assert verdicts[("extra", "1")] == ("-", None)
    extra = next(r for r in doc["rows"] if r["metric"] == "extra")
    assert extra["warnings"] == [{"kind": "no_samples", "text": "no usable runs on one side",
                                  "data": {"n_base": 8, "n_exp": 0}}]


def test_validation_catches_what_breaks_the_schema(db):
    """The validator above is not vacuous: a wrong version, a missing field and an unknown verdict fail."""
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    doc = json.loads(cli("report", "--db", str(db), "--format", "json")[1])
    assert _validate({**doc, "format_version": 0}, SCHEMA)
    assert _validate({k: v for k, v in doc.items() if k != "rows"}, SCHEMA)
    assert _validate({**doc, "rows": [{**doc["rows"][0], "verdict": "sig"}]}, SCHEMA)
    assert _validate({**doc, "extra": 1}, SCHEMA)


def _drifting(seed: int = 5):
    """ops/s on side b climbs 1% a run (the machine warming up); b's third run fails."""
    rng = random.Random(seed)
    count = {"a": 0, "b": 0}

    def behaviour(argv, env):
        side = argv[-1]
        count[side] += 1
        if side == "b" and count[side] == 3:
            return FakeOutcome(wall_s=0.01, exit_code=1)
        ops = 1e6 * (1 + (0.01 * count[side] if side == "b" else 0.0)) * (1 + rng.gauss(0, 0.002))
        return FakeOutcome(wall_s=0.01, stdout=f"ops/s: {ops:.0f}\n".encode())

    return behaviour


DRIFT = two_sides('order = "sequential"', runs=14, warmup=0, workload='argv = ["./bench", "{variant}"]\n'
                  'parser = "keyvalue"\n\n[[workload.metric]]\nname = "ops/s"\ndirection = "higher"\n')


def _report(db, *argv) -> dict:
    """``perfab report --format json`` of ``db``, checked against the schema."""
    code, out, err = cli("report", "--db", str(db), "--format", "json", *argv)
    assert code == 0, err
    doc = json.loads(out)
    assert _validate(doc, SCHEMA) == []
    return doc


def _diagnostics(doc: dict) -> list[dict]:
    return doc["warnings"] + [d for r in doc["rows"] for d in r["warnings"]]


def test_a_drift_failed_runs_and_sequential_order_validate_with_their_data(db):
    """Diagnostics in format 2, pinned by a golden file: each kind with its sentence and its data."""
    runner, _, store = fake_runner(DRIFT, db, _drifting())
    assert runner.run().status == "finished"
    store.close()
    doc = _report(db)
    _golden("drift.json.stdout", cli("report", "--db", str(db), "--format", "json")[1])
    by_kind = {d["kind"]: d for d in _diagnostics(doc)}
    drift = by_kind["drift"]
    assert drift["data"]["side"] == "b" and drift["data"]["rho"] > 0.5 and drift["data"]["p"] < 0.001
    assert drift["text"].startswith("drift across run order on b (Spearman rho")
    assert by_kind["failed_runs"]["data"] == {"workload": "w", "side": "b", "runs": 1}
    assert by_kind["sequential_order"]["data"] == {"order": "sequential"}
    with Store(db) as store:  # the JSON's text is the sentence the text report prints
        texts = [d.text for d in analyse(store).warnings]
    assert [d["text"] for d in doc["warnings"]] == texts


def test_a_one_session_warning_validates_with_its_side(db):
    runner, _, store = fake_runner(two_sides(variants=EXTERNAL, runs=3, warmup=1), db)
    runner.run()
    runner.run(side="new")
    store.close()
    doc = _report(db)
    one = [d for d in doc["warnings"] if d["kind"] == "one_session"]
    assert [d["data"] for d in one] == [{"side": "old"}, {"side": "new"}]
    assert one[0]["text"].startswith("one session (boot) of side 'old'")


def test_an_undecided_sequential_row_validates_with_its_state(db):
    runner, _, store = fake_runner(SEQUENTIAL.format(max_runs=12, margin=0.1), db, _sequential_behaviour(0.003, 0.05))
    assert runner.run().status == "finished"
    store.close()
    doc = _report(db)
    ops = next(r for r in doc["rows"] if r["metric"] == "ops/s")
    (seq,) = [d for d in ops["warnings"] if d["kind"] == "sequential"]
    assert ops["verdict"] == "ns" and ops["method"] == "sequential"
    assert seq["data"] == {"state": "ns", "decided_at": None} and seq["text"].startswith("max_runs reached")


def test_an_old_store_reports_in_the_current_format(tmp_path):
    """A schema-1 results file (written before format 2 existed) reports in the current format and validates."""
    path = tmp_path / "v1.db"
    _v1_database(path)
    doc = _report(path, "old")
    assert doc["format_version"] == FORMAT_VERSION and doc["kernels"] == {}
    wall = next(r for r in doc["rows"] if r["metric"] == "wall_s")
    assert [d["kind"] for d in wall["warnings"]] == ["too_few_runs"]
    assert wall["warnings"][0]["data"] == {"n_base": 2, "n_exp": 2, "alpha": 0.05}


def test_validation_catches_a_diagnostic_off_its_kind(sweep_db):
    """A diagnostic with a key its kind does not document, one missing, or an unknown kind, fails."""
    doc = _report(sweep_db, "--all")
    i, row = next((i, r) for i, r in enumerate(doc["rows"]) if r["warnings"])
    good = row["warnings"][0]

    def with_(diagnostic):
        rows = list(doc["rows"])
        rows[i] = {**row, "warnings": [diagnostic]}
        return {**doc, "rows": rows}

    assert _validate(with_(good), SCHEMA) == []
    assert _validate(with_({**good, "data": {**good["data"], "extra": 1}}), SCHEMA)
    assert _validate(with_({**good, "data": {}}), SCHEMA)
    assert _validate(with_({**good, "kind": "something_else"}), SCHEMA)
    assert _validate(with_(good["text"]), SCHEMA)  # format 1's plain sentence


def _kinds_used(folder: Path) -> set[str]:
    """Every ``Kind.NAME`` the modules under ``folder`` refer to."""
    used = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Kind":
                used.add(node.attr)
    return used


def test_every_kind_the_analysis_gives_is_documented_with_its_data_keys():
    used = _kinds_used(ROOT / "src" / "perfab" / "analyse")
    assert len(used) >= 15 and used <= {k.name for k in Kind} and set(DATA) == set(Kind)
    doc = (ROOT / "docs" / "report-json.md").read_text()
    table = {line.split(" | ")[0].strip("| `"): line for line in doc.splitlines() if line.startswith("| `")}
    for name in used:
        kind = Kind[name]
        assert kind.value in table, kind
        for key in DATA[kind].keys:
            assert f"`{key.name}` (" in table[kind.value], (kind, key.name)
    assert [v for v, _ in HISTORY] == list(range(1, FORMAT_VERSION + 1))
    assert "1 to 2" not in doc and "`{kind, text, data}`" in dict(HISTORY)[2]


def test_csv_keeps_its_columns_and_printed_verdicts(sweep_db):
    """CSV is unchanged by format 2: the same columns, the verdict as printed, no diagnostics."""
    code, out, _ = cli("report", "--db", str(sweep_db), "--format", "csv", "--all")
    lines = out.splitlines()
    assert code == 0 and lines[0].split(",") == CSV_FIELDS[:2] + ["threads"] + CSV_FIELDS[2:]
    assert sum("INVALID (1 runs)" in line for line in lines) == 2 and "no usable runs" not in out


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
    assert stored("perf").counted((("cycles", "instructions"), ("branches",))) == \
        "perf stat, one group per run: cycles,instructions | branches"
    assert "cachegrind" in stored("cachegrind").counted(((),))
    assert "QEMU" in stored("guest").counted(((),))
    assert stored("time") is TIME and stored("a-backend-from-a-newer-perfab") is TIME
    assert TIME.counted(((),)) == "wall/user/sys time, max RSS, context switches (wait4 rusage)"


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
        assert note.text == get_method(note.name).describe(a.confidence)
        assert note.text in " ".join(section.legend)
    assert all(get_method(m).describe(0.99) for m in method_names())
    assert "99% intervals" in get_method("normal").describe(0.99)


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
