"""Helpers that exist once: the terminal escaper, the git runner, the sweep point type, the method names."""

from __future__ import annotations

import subprocess

import pytest

from perfab.analyse.methods import get_method
from perfab.errors import UsageError
from perfab.git import git_output, run_git
from perfab.specfile.schema import METHODS
from perfab.terminal import visible


def test_the_escaper_shows_c0_del_and_c1_and_keeps_tab_and_newline():
    text = "a\x1b[31mred\x07\tb\nc\x7fd\x85e\x9b2Jf\xa0g"
    assert visible(text) == "a\\x1b[31mred\\x07\tb\nc\\x7fd\\x85e\\x9b2Jf\xa0g"


def test_a_stored_failure_reason_and_a_report_escape_alike():
    """The run's reason (stored) and the report used different ranges: \\x85 passed one and not the other."""
    from perfab.report.text import _visible
    from perfab.run import readings

    assert _visible is visible and readings.visible is visible


def test_git_runs_in_the_repository_and_reports_its_failure(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert run_git(tmp_path, "rev-parse", "--is-inside-work-tree", needed_for="").stdout.strip() == "true"
    with pytest.raises(UsageError, match=r"git rev-parse --verify nope failed in .*: fatal: Needed a single revision"):
        git_output(tmp_path, "rev-parse", "--verify", "nope", needed_for="")


def test_a_missing_git_names_what_it_was_needed_for(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no git on the PATH
    with pytest.raises(UsageError, match=r"git is not installed; install it \(apt-get install git\) to do this"):
        run_git(tmp_path, "status", needed_for="to do this")


def test_every_method_a_spec_may_name_is_implemented_under_that_name():
    assert all(get_method(name).name == name for name in METHODS)


def test_one_sweep_point_type():
    import perfab.analyse.model as model
    import perfab.plan as plan
    import perfab.store as store

    assert store.Params is plan.Params and model.Params is plan.Params
