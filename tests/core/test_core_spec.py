"""Spec validation: every bad spec is one SpecError line naming the key, exit 2 through the CLI."""

from __future__ import annotations

import pytest

from core_helpers import REPO, cli, two_sides
from perfab.errors import SpecError
from perfab.specfile import expand, load_spec, parse_spec


def test_default_example_loads():
    exp = load_spec(REPO / "examples" / "default.toml")
    assert exp.name == "unlock-inline"
    assert [v.name for v in exp.variants] == ["outline", "inline"]
    assert exp.baseline == "outline"
    assert (exp.runs, exp.warmup, exp.order, exp.seed) == (20, 2, "interleaved", 1)
    assert exp.margin_pct == 0.5
    (w,) = exp.workloads
    assert w.argv == ("./build/{variant}/lockbench", "3000000")
    assert w.timeout_s == 60
    ops = w.metrics[0]
    assert (ops.name, ops.higher_is_better, ops.primary) == ("ops/s", True, True)
    assert w.metrics[1].method == "exact"
    assert exp.measure.backend == "time"


def _cli_error(tmp_path, text: str) -> str:
    """Run ``perfab run`` on ``text``; assert exit 2, one stderr line, no traceback; return the line."""
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    code, out, err = cli("run", str(spec), "--db", str(tmp_path / "r.db"))
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("perfab: ")
    return lines[0]


BAD_SPECS = {
    "malformed": ("[experiment\nname = 'x'\n", ["malformed TOML", "line 1"]),
    "unknown key": (two_sides("runz = 3"), ["experiment.runz", "unknown key", "runs", "warmup", "baseline"]),
    "wrong type": (two_sides().replace("runs = 4", 'runs = "four"'), ["experiment.runs", "expected integer", "string"]),
    "bool for int": (two_sides().replace("runs = 4", "runs = true"), ["experiment.runs", "expected int"]),
    "missing name": (two_sides().replace('name = "t"\n', ""), ["experiment.name", "missing"]),
    "missing workload argv": (two_sides(workload=""), ["workload[0].argv", "missing"]),
    "no variant": ('variant = []\n[experiment]\nname = "t"\n[[workload]]\nname = "w"\nargv = ["true"]\n',
                   ["variant", "at least one"]),
    "unknown baseline": (two_sides('baseline = "c"'), ["experiment.baseline", "'c'", "a, b"]),
    "string argv": (two_sides(workload='argv = "sleep 1"'), ["workload[0].argv", "shell = true"]),
    "bad pin": (two_sides('pin = "zero"'), ["experiment.pin", "CPU list"]),
    "bad direction": (two_sides(workload='argv = ["true"]\n[[workload.metric]]\nname = "x"\ndirection = "up"'),
                      ["workload[0].metric[0].direction", "'up'", "higher"]),
    "alpha zero": (two_sides("alpha = 0.0"), ["experiment.alpha", "between 0 and 1"]),
    "alpha one": (two_sides("alpha = 1.0"), ["experiment.alpha", "between 0 and 1"]),
    "confidence above one": (two_sides("confidence = 1.5"), ["experiment.confidence", "between 0 and 1"]),
    "mixed external": (two_sides(variants='[[variant]]\nname = "a"\nexternal = true\n\n[[variant]]\nname = "b"\n'),
                       ["variant.external", "some sides are external"]),
    "duplicate variant": (two_sides(variants='[[variant]]\nname = "a"\n\n[[variant]]\nname = "a"\n'),
                          ["variant.name", "used twice"]),
    "bad order": (two_sides('order = "zigzag"'), ["experiment.order", "interleaved"]),
    "negative runs": (two_sides().replace("runs = 4", "runs = 0"), ["experiment.runs", ">= 1"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_is_one_line_exit_2(tmp_path, case):
    text, needles = BAD_SPECS[case]
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.toml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("bad.toml: ")
    for needle in needles:
        assert needle in message, (needle, message)
    line = _cli_error(tmp_path, text)
    assert line.endswith(message.removeprefix("bad.toml: "))


def test_unknown_key_lists_allowed_keys():
    with pytest.raises(SpecError) as info:
        parse_spec(two_sides("runz = 3"), "s.toml")
    allowed = str(info.value).split("use one of: ")[1]
    assert allowed.split(", ") == sorted(["name", "runs", "warmup", "order", "seed", "pin", "max_failures",
                                          "stdout_cap", "alpha", "confidence", "fdr", "margin", "method",
                                          "baseline", "build", "repo", "build_timeout", "min_runs", "max_runs",
                                          "stop_on", "spending", "layout", "layout_check", "layout_builds", "perturb",
                                          "perturb_seed"])


def test_missing_spec_file(tmp_path):
    code, _, err = cli("run", str(tmp_path / "nope.toml"), "--db", str(tmp_path / "r.db"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "no such spec file" in err


def test_unknown_placeholder_at_expansion():
    with pytest.raises(SpecError) as info:
        expand("./build/{varaint}/x", {"variant": "a", "workload": "w"}, "workload 'w' argv")
    message = str(info.value)
    assert "{varaint}" in message and "{variant}" in message and "{workload}" in message
    assert expand("{{literal}} {variant}", {"variant": "a"}) == "{literal} a"


def test_unknown_placeholder_through_cli(tmp_path):
    line = _cli_error(tmp_path, two_sides(workload='argv = ["echo", "{nope}"]'))
    assert "unknown placeholder {nope}" in line
    assert "{variant}" in line


def test_variant_vars_are_placeholders():
    exp = parse_spec(two_sides(variants='[[variant]]\nname = "a"\nvars = {bin = "/opt/a"}\n\n'
                                        '[[variant]]\nname = "b"\nvars = {bin = "/opt/b"}\n'))
    assert exp.variants[0].vars == {"bin": "/opt/a"}


def test_external_sides_all_external_is_accepted():
    exp = parse_spec(two_sides(variants='[[variant]]\nname = "a"\nexternal = true\n\n'
                                        '[[variant]]\nname = "b"\nexternal = true\n'))
    assert all(v.external for v in exp.variants)


def test_non_table_in_variant_array_is_a_spec_error(tmp_path):
    """``variant = [1, 2]`` crashed with a TypeError traceback."""
    text = 'variant = [1, 2]\nworkload = [{name = "w", argv = ["x"]}]\n[experiment]\nname = "t"\n'
    line = _cli_error(tmp_path, text)
    assert "variant[0]: expected a table, got int" in line


def test_non_table_in_workload_array_is_a_spec_error():
    text = 'workload = ["sleep 1"]\n' + two_sides().split("[[workload]]")[0]
    with pytest.raises(SpecError, match=r"workload\[0\]: expected a table, got string"):
        parse_spec(text, "s.toml")


def test_top_level_type_error_names_the_key_without_a_leading_dot():
    with pytest.raises(SpecError) as info:
        parse_spec('variant = 3\nworkload = 3\n[experiment]\nname = "t"\n', "s.toml")
    assert str(info.value).startswith("s.toml: variant: expected array, got integer 3")
