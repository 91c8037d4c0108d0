"""The README's examples are checked: its spec parses, its commands exist, its Python runs."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from perfab.cli import build_parser, main
from perfab.specfile import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def test_readme_spec_is_valid():
    toml = blocks("toml")[0]
    exp = parse_spec(toml, "README.md")
    assert exp.measure.backend == "perf" and exp.measure.max_events_per_run == 3
    assert [v.name for v in exp.variants] == ["outline", "inline"]


def test_readme_spec_fragments_are_valid_in_the_full_spec():
    """Every further TOML block of the README, put into the full spec, still makes a valid spec."""
    import tomllib

    import tomli_w

    base = tomllib.loads(blocks("toml")[0])
    for fragment in blocks("toml")[1:]:
        doc = {k: dict(v) if isinstance(v, dict) else list(v) for k, v in base.items()}
        for key, value in tomllib.loads(fragment).items():
            if isinstance(value, dict) and not (key == "measure" and "backend" in value):
                doc[key] = {**doc.get(key, {}), **value}  # another backend's [measure] replaces the base's
            else:
                doc[key] = value
        assert parse_spec(tomli_w.dumps(doc), "README.md").workloads, fragment


def test_readme_commands_exist_and_have_help():
    commands = re.findall(r"^    perfab (\w+)", README, re.M)
    assert {"run", "report", "plan", "bisect", "list", "env", "counters", "screen", "size"} <= set(commands)
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name in commands:
        assert name in sub.choices, name
        assert helps.get(name), f"perfab {name} has no help text"


@pytest.mark.parametrize("spec", sorted((ROOT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_bundled_specs_are_valid(spec):
    assert load_spec(spec).workloads


def test_readme_python_runs(tmp_path, monkeypatch):
    (code,) = blocks("python")
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nname = "x"\nruns = 2\nwarmup = 0\n[[variant]]\nname = "a"\n'
                    '[[variant]]\nname = "b"\n[[workload]]\nname = "t"\nargv = ["true"]\n')
    assert main(["run", str(spec), "--no-report"], io.StringIO(), io.StringIO()) == 0
    namespace: dict = {}
    try:
        exec(code, namespace)
    except Exception as e:  # to_pandas without pandas is a clear error, not a crash
        assert "pip install pandas" in str(e)
    assert len(namespace["results"].runs) == 4


@pytest.mark.parametrize("kind", ["spec", "parsers"])
def test_readme_reference_sections_are_the_generated_ones(kind):
    """The spec keys and parser metrics in the README come from the code; regenerate with
    `python -m perfab.reference` after changing either."""
    from perfab.reference import section

    assert section(kind) in README, f"README's {kind} reference is stale: paste `python -m perfab.reference`"


def test_every_spec_key_the_reader_accepts_is_documented():
    from perfab.specfile.schema import TABLES

    for table, keys in TABLES.items():
        for key in keys:
            assert f"| `{key.name}` |" in README, (table, key.name)
