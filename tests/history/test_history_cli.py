"""``perfab history`` on stores of real sessions: sides built from the commits of a generated repository.

The sessions are run in a shuffled order of commits, as a bisection would,
so only the repository's topological order can put them in commit order.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from history_helpers import ENV, cli, make_repo, run_plain, run_session

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (make test installs it)")

SPEEDS = [1.0] * 5 + [0.868] * 5  # -13.2% from the sixth commit on


@pytest.fixture
def regressed(tmp_path, monkeypatch):
    """Ten sessions, one per commit, in a shuffled order; the sixth commit regresses by 13.2%."""
    monkeypatch.chdir(tmp_path)
    commits = make_repo(tmp_path / "repo", SPEEDS)
    order = list(range(len(commits)))
    random.Random(3).shuffle(order)
    for k, i in enumerate(order):
        run_session(tmp_path / "r.db", tmp_path, tmp_path / "repo", commits[i], seed=k)
    return tmp_path, commits


def _json(db) -> dict:
    code, out, err = cli("history", "--db", str(db), "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_sessions_are_in_commit_order_and_the_regressing_commit_is_the_change_point(regressed):
    root, commits = regressed
    doc = _json(root / "r.db")
    (series,) = doc["series"]
    assert doc["order"] == [{"side": "kernel", "by": "commit", "repository": str(root / "repo"), "note": None}]
    assert [p["commit"] for p in series["points"]] == commits
    assert [p["session"] for p in series["points"]] != sorted(p["session"] for p in series["points"])
    (change,) = series["change_points"]
    assert change["commit"] == commits[5] and change["index"] == 5 and change["p"] <= 0.05
    assert change["change"] == pytest.approx(-0.132, abs=0.01)
    assert change["machine"] == [] and doc["warnings"] == []
    assert all(p["n"] == 8 and p["lo"] <= p["median"] <= p["hi"] for p in series["points"])


def test_text_marks_the_change_between_the_last_good_and_the_first_bad_commit(regressed):
    root, commits = regressed
    code, out, err = cli("history", "--db", str(root / "r.db"))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [i for i, line in enumerate(lines) if line[12:24] in {c[:12] for c in commits}]
    assert [lines[i][12:24] for i in rows] == [c[:12] for c in commits]
    marker = next(i for i, line in enumerate(lines) if line.startswith(">> change point"))
    assert rows[4] < marker < rows[5]
    assert re.search(r"change point: -1[23]\.\d\d% regression \(mean 99,\d{3} -> 8\d,\d{3}\), p 0\.0", lines[marker])
    assert "mm: change 5" in lines[rows[5]] and "E-divisive with means" in out


def test_text_matches_golden(regressed):
    """Sessions' start times pinned (one a day from 2022-03-10, in the order they ran), the repository path
    replaced by <tmp>: everything else is what perfab stored and printed."""
    root, _ = regressed
    con = sqlite3.connect(root / "r.db")
    con.execute("UPDATE sessions SET started_at = 1646870400 + 86400 * id")
    con.commit()
    con.close()
    code, out, err = cli("history", "--db", str(root / "r.db"))
    assert code == 0 and err == ""
    _golden("regressed.text.stdout", out.replace(str(root), "<tmp>"))


def _golden(name: str, actual: str) -> None:
    path = Path(__file__).parent / "golden" / name
    if os.environ.get("PERFAB_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"{path} missing: run with PERFAB_UPDATE_GOLDEN=1 to create it"
    assert actual == path.read_text(), f"{name} differs from its golden file"


def test_a_machine_change_at_the_change_point_is_warned_about(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commits = make_repo(tmp_path / "repo", SPEEDS)
    for i, c in enumerate(commits):
        env = {**ENV, "kernel.release": "5.17.0-rc4" if i < 5 else "5.17.0-rc5"}
        run_session(tmp_path / "r.db", tmp_path, tmp_path / "repo", c, seed=i, env=env)
    doc = _json(tmp_path / "r.db")
    (change,) = doc["series"][0]["change_points"]
    assert change["machine"] == [{"key": "kernel.release", "before": "5.17.0-rc4", "after": "5.17.0-rc5"}]
    code, out, _ = cli("history", "--db", str(tmp_path / "r.db"))
    assert "!! machine differs across it: kernel.release 5.17.0-rc4 -> 5.17.0-rc5" in out
    assert "WARNINGS" in out and "that may be the cause, not the commit" in " ".join(out.split())


def test_a_setting_that_differs_in_every_session_is_not_blamed(tmp_path, monkeypatch):
    """A kernel per commit has its own release string in every session: not a machine change."""
    monkeypatch.chdir(tmp_path)
    commits = make_repo(tmp_path / "repo", SPEEDS)
    for i, c in enumerate(commits):
        run_session(tmp_path / "r.db", tmp_path, tmp_path / "repo", c, seed=i,
                    env={**ENV, "kernel.release": f"5.17.0-{c[:7]}"})
    (change,) = _json(tmp_path / "r.db")["series"][0]["change_points"]
    assert change["machine"] == []


def test_a_changed_workload_definition_at_the_change_point_is_warned_about(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commits = make_repo(tmp_path / "repo", SPEEDS)
    for i, c in enumerate(commits):
        run_session(tmp_path / "r.db", tmp_path, tmp_path / "repo", c, seed=i, threads=2 if i < 5 else 4)
    doc = _json(tmp_path / "r.db")
    (change,) = doc["series"][0]["change_points"]
    assert change["warnings"] == ["the definition of workload 'will-it-scale' changed between sessions 5 and 6"]
    assert any("changed between sessions 5 and 6, across the change point before" in w for w in doc["warnings"])


def test_without_the_repository_sessions_fall_back_to_date_order_with_the_reason(regressed):
    root, commits = regressed
    shutil.rmtree(root / "repo")
    shutil.rmtree(root / ".perfab" / "cache")
    doc = _json(root / "r.db")
    (order,) = doc["order"]
    assert order["by"] == "date" and "pass --repo PATH" in order["note"]
    sessions = [p["session"] for p in doc["series"][0]["points"]]
    assert sessions == sorted(sessions)


def test_repo_option_orders_by_another_clone(regressed):
    root, commits = regressed
    shutil.copytree(root / "repo", root / "clone")
    shutil.rmtree(root / "repo")
    code, out, err = cli("history", "--db", str(root / "r.db"), "--format", "json", "--repo", str(root / "clone"))
    doc = json.loads(out)
    assert code == 0 and doc["order"][0]["by"] == "commit"
    assert [p["commit"] for p in doc["series"][0]["points"]] == commits


def test_bad_options_are_one_line_usage_errors(regressed):
    root, _ = regressed
    db = str(root / "r.db")
    for argv, text in ((["--metric", "ops"], "--metric ops: no such metric stored; stored metrics: "),
                       (["--side", "other"], "--side other: no measured runs of that side; sides with runs: kernel"),
                       (["--repo", str(root)], "not a git repository"),
                       (["--alpha", "5"], "--alpha 5.0: must lie strictly between 0 and 1"),
                       (["nosuch"], "nosuch")):
        code, out, err = cli("history", "--db", db, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and text in err, (argv, err)


def test_sessions_without_commits_are_in_date_order_and_too_few_are_not_tested(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for seed in range(3):
        run_plain(tmp_path / "r.db", seed)
    code, out, err = cli("history", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "by session date" in out and "too few to look for a change point (need 4)" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Date"))
    assert lines[header].split() == ["Date", "Session", "Median", "Interval", "n"]
    assert [line.split()[2] for line in lines[header + 2:header + 5]] == ["1", "2", "3"]


def test_readme_example_is_the_golden_output():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    lines = readme.split("\n    perfab history: tlb\n", 1)[1].split("\n\n    Median of each", 1)[0]
    golden = (Path(__file__).parent / "golden" / "regressed.text.stdout").read_text()
    shown = "perfab history: tlb\n" + "\n".join(line[4:] for line in lines.split("\n"))
    assert golden.replace("<tmp>/repo", "/src/linux").startswith(shown + "\n")
