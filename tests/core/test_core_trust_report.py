"""What reports show: directions only where declared, a workload's own metrics, escaped text everywhere."""

from __future__ import annotations

import csv
import io
import json

from core_helpers import FakeOutcome, cli, fake_runner, two_sides


def _run(db, workload: str, stdout_of, variants: str = "", runs: int = 6):
    def behaviour(argv, env):
        return FakeOutcome(wall_s=0.1, stdout=stdout_of(env.get("SIDE", "?"), len(behaviour.calls)).encode(),
                           stderr=b"\x1b[31mred alert\x1b[0m\n")

    behaviour.calls = []
    variants = variants or ('[[variant]]\nname = "a"\nenv = {SIDE = "a"}\n\n'
                            '[[variant]]\nname = "b"\nenv = {SIDE = "b"}\n')

    def counting(argv, env):
        behaviour.calls.append(1)
        return behaviour(argv, env)

    runner, _, store = fake_runner(two_sides(runs=runs, warmup=0, workload=workload, variants=variants), db, counting)
    runner.run()
    store.close()


def test_undeclared_parser_metrics_have_no_direction_and_are_hidden_unless_asked(db):
    """keyvalue once guessed 'tlb_shootdowns/s: higher = better' and that guess could fail CI."""
    workload = 'argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "ops/s"\ndirection = "higher"'
    _run(db, workload, lambda side, n: f"ops/s: {1000 + n % 3}\ntlb_shootdowns/s: {100 if side == 'a' else 150}\n")
    code, text, _ = cli("report", "--db", str(db))
    assert "tlb_shootdowns/s" not in text.split("Not shown")[0]
    hidden = "Not shown: 1 parser metric(s) without a declared direction (tlb_shootdowns/s); --all"
    assert hidden in " ".join(text.split())
    code, text, _ = cli("report", "--db", str(db), "--all")
    row = next(x for x in text.splitlines() if x.startswith("tlb_shootdowns/s"))
    assert row.split()[-1] == "**"
    assert "tlb_shootdowns/s: higher" not in " ".join(text.split()) and "tlb_shootdowns/s: lower" not in text
    code, out, _ = cli("report", "--db", str(db), "--all", "--format", "json")
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert rows["tlb_shootdowns/s"]["higher_is_better"] is None and not rows["tlb_shootdowns/s"]["regressed"]
    assert cli("report", "--db", str(db), "--all", "--fail-on-regression")[0] == 0


def test_a_workloads_own_self_metric_is_a_metric_not_a_profile(db):
    """`self.*` names from a workload were filed as profile data and vanished from the table."""
    workload = 'argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "self.time"\ndirection = "lower"'
    _run(db, workload, lambda side, n: f"self.time: {10 if side == 'a' else 12}.{n % 5}\n")
    code, text, _ = cli("report", "--db", str(db))
    assert any(line.startswith("self.time") and line.rstrip().endswith("**") for line in text.splitlines()), text
    assert "PROFILE" not in text


def test_check_rows_carry_their_medians_in_json_and_csv(db):
    workload = ('argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "failed"\ncheck = 0\n'
                '[[workload.metric]]\nname = "ops/s"\ndirection = "higher"')
    _run(db, workload, lambda side, n: f"failed: 0\nops/s: {1000 + n}\n")
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    row = next(r for r in json.loads(out)["rows"] if r["metric"] == "failed")
    assert row["verdict"] == "valid" and row["median_base"] == 0.0 and row["median_exp"] == 0.0
    code, out, _ = cli("report", "--db", str(db), "--format", "csv")
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["metric"] == "failed")
    assert row["median_base"] == "0.0" and row["verdict"] == "valid"


def test_json_is_strict_and_has_one_unit_per_column(db):
    workload = 'argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "ops/s"\ndirection = "higher"'
    _run(db, workload, lambda side, n: f"ops/s: {1000 + n % 4 if side == 'a' else 1100 + n % 4}\n", runs=2)
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    doc = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # no NaN/Infinity
    row = next(r for r in doc["rows"] if r["metric"] == "ops/s")
    assert row["basis"] == "ratio" and 0.05 < row["delta"] < 0.15 and 50 < row["shift"] < 150
    assert row["ci_lo"] in ("-inf", None) or isinstance(row["ci_lo"], float)


def test_markdown_escapes_pipes_backticks_and_newlines(db):
    label = "ops|s `x`"
    workload = ('argv = ["w", "a|b", "`c`"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "ops/s"\n'
                f'direction = "higher"\nlabel = "{label}"')
    _run(db, workload, lambda side, n: f"ops/s: {1000 + n}\n")
    code, out, _ = cli("report", "--db", str(db), "--format", "markdown")
    table = [line for line in out.splitlines() if line.startswith("| ops")]
    assert table and all(line.count("|") - line.count("\\|") == 7 for line in table), table
    assert "ops\\|s \\`x\\`" in table[0]
    assert "`` w a|b `c` ``" in out  # the command as code, fenced past its backticks


def test_csv_cells_cannot_become_formulas(db):
    workload = ('argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "ops/s"\ndirection = "higher"\n'
                'label = "=HYPERLINK(\\"http://x\\")"')
    _run(db, workload, lambda side, n: f"ops/s: {1000 + n}\n")
    code, out, _ = cli("report", "--db", str(db), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    row = next(r for r in rows if r["metric"] == "ops/s")
    assert row["label"] == "'=HYPERLINK(\"http://x\")"
    assert any(r["delta"].startswith("-") or r["delta"][0].isdigit() for r in rows if r["delta"])  # numbers stay


def test_workload_stderr_reaches_the_terminal_without_control_characters(db):
    """A failed run's reason quotes the workload's stderr; an ANSI escape there could rewrite the terminal."""
    def behaviour(argv, env):
        return FakeOutcome(wall_s=0.1, exit_code=3, stderr=b"\x1b]0;pwned\x07\x1b[2Jboom\n")

    runner, _, store = fake_runner(two_sides(runs=2, warmup=0), db, behaviour)
    try:
        runner.run()
    except Exception:
        pass
    store.close()
    code, out, err = cli("report", "--db", str(db))
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2Jboom" in out
