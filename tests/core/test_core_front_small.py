"""Small things a new user met: placeholders of git-built sides, option types in the docs, deterministic
parser metrics judged as noisy samples."""

from __future__ import annotations

import re

import pytest

from core_helpers import REPO, cli
from perfab.parsers import describe, known_parsers
from perfab.specfile.schema import TABLES

NO_GIT = '''
[experiment]
name = "no-git"
runs = 2

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["{build}/prog"]
'''


def test_build_placeholder_of_a_side_not_built_from_git_says_where_it_comes_from(tmp_path):
    (tmp_path / "spec.toml").write_text(NO_GIT)
    code, out, err = cli("plan", str(tmp_path / "spec.toml"))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "{build} is defined only for a side built from git (variant.git" in err


@pytest.mark.parametrize("name", known_parsers())
def test_every_parser_option_has_a_documented_type(name):
    info = describe(name)
    assert [o for o, _, _ in info.option_types] == list(info.options)
    assert all(kind and meaning for _, kind, meaning in info.option_types)


def test_the_regex_parsers_option_types_are_in_the_readme():
    readme = (REPO / "README.md").read_text()
    regex = readme.split("<summary><code>regex</code>")[1].split("</details>")[0]
    assert "| `patterns` | table of strings, required |" in regex
    assert "| `higher_is_better` | table of booleans |" in regex and "| `units` | table of strings |" in regex


def test_a_build_command_may_be_a_string_and_the_reference_says_so():
    kinds = {t: {k.name: k.kind for k in keys} for t, keys in TABLES.items()}
    assert kinds["experiment"]["build"] == kinds["variant"]["build"] == "array of strings, or a string"


CONSTANT = r'''
[experiment]
name = "constant"
runs = 4
warmup = 0

[[variant]]
name = "a"
vars = {{ n = "10" }}

[[variant]]
name = "b"
vars = {{ n = "12" }}

[[workload]]
name = "count"
shell = true
argv = "echo \"calls: {{n}}\""
parser = "keyvalue"
parser_options = {{ higher_is_better = {{ calls = false }} }}
{metric}
'''


def test_a_parser_metric_without_spread_is_named_as_a_likely_deterministic_count(tmp_path):
    (tmp_path / "spec.toml").write_text(CONSTANT.format(metric=""))
    code, out, err = cli("run", str(tmp_path / "spec.toml"), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("calls"))
    assert row.split()[-1] == "ns"  # 4+4 constant runs: a rank test cannot reach alpha
    assert re.search(r"calls: every run of each side read the same value \(no spread\): a deterministic count\? "
                     r'declare it with method = "exact"', " ".join(out.split()))
    declared = '[[workload.metric]]\nname = "calls"\nmethod = "exact"\n'
    (tmp_path / "exact.toml").write_text(CONSTANT.format(metric=declared).replace('"constant"', '"constant2"'))
    code, out, err = cli("run", str(tmp_path / "exact.toml"), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert next(line for line in out.splitlines() if line.startswith("calls")).split()[-1] == "**"
    assert "no spread" not in out
