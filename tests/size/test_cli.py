"""``perfab size`` as a user runs it: exit codes, formats and golden reports.

Golden files live in ``golden/``; they depend on the compiler's exact code,
so they are checked only with the gcc recorded in ``golden/NOTE``.
Regenerate after an intended change with::

    PERFAB_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/size/test_cli.py -k golden
"""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest
from size_helpers import GOLDEN, size_main



def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = size_main([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def test_missing_file_is_exit_2_with_one_line(tmp_path, pair):
    code, out, err = run(tmp_path / "nope", pair()[1])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no such file" in err


def test_non_elf_is_exit_2(tmp_path, pair):
    junk = tmp_path / "junk"
    junk.write_text("#!/bin/sh\n")
    code, _, err = run(pair()[0], junk)
    assert code == 2 and err.startswith("perfab size: ") and "not an ELF file" in err


def test_bad_flags_are_exit_2_with_one_line(pair):
    for argv in (["--format", "xml", *pair()], ["-c", "-t", *pair()], [pair()[0]], ["--limit", "-1", *pair()]):
        code, out, err = run(*argv)
        assert code == 2 and out == "" and err.count("\n") == 1, argv


def test_help_goes_to_the_given_stdout():
    code, out, err = run("--help")
    assert code == 0 and err == "" and out.startswith("usage: perfab size") and "--compat" in out


def test_json_carries_families_causes_and_checks(pair):
    code, out, _ = run("--format", "json", *pair())
    doc = json.loads(out)
    assert code == 0 and doc["compat"] is False
    fam = {f["name"]: f for f in doc["families"]}
    assert fam["once"]["cause"] == {"kind": "inlined", "text": "inlined into its only caller run_once (2 copies)"}
    assert fam["get_tag"]["delta_bytes"] == sum(m["new_bytes"] or 0 for m in fam["get_tag"]["members"]) - sum(
        m["old_bytes"] or 0 for m in fam["get_tag"]["members"])
    text = next(s for s in doc["sections"] if s["name"] == ".text")
    assert text["delta_bytes"] == (text["symbol_delta_bytes"] - text["overlap_delta_bytes"]
                                   + text["uncovered_delta_bytes"])


def test_markdown_has_tables(pair):
    code, out, _ = run("--format", "markdown", "--no-dwarf", "--limit", "3", *pair())
    assert code == 0 and "| Family | old | new | delta | cause | members |" in out and "`Total: Before=" in out
    assert "| Sizes (like size(1)) | old | new | delta |" in out and "\\|delta\\|" in out


def test_limit_states_what_was_cut(pair):
    code, out, _ = run("--limit", "3", "--no-dwarf", *pair())
    assert code == 0
    cut = [line for line in out.splitlines() if line.startswith("... ")]
    assert len(cut) >= 2 and all("cut (each |delta| <=" in line and "net" in line for line in cut)
    assert "Total: Before=" in out  # totals always cover every row


def _gcc_version() -> str:
    return subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]


@pytest.mark.parametrize("name,flags", [("gcc-O2.txt", []), ("gcc-O2-no-dwarf.txt", ["--no-dwarf"]),
                                        ("gcc-O2-c.txt", ["-c", "--no-dwarf", "--limit", "8"])])
def test_golden_text_report(pair, name, flags):
    note = (GOLDEN / "NOTE").read_text()
    if _gcc_version() not in note:
        pytest.skip(f"golden reports were made with another gcc ({_gcc_version()!r} not in golden/NOTE)")
    code, out, err = run(*flags, *pair("gcc", "-O2"))
    assert code == 0 and err == ""
    path = GOLDEN / name
    if os.environ.get("PERFAB_REGEN_GOLDEN"):
        path.write_text(out)
    assert out == path.read_text()


def test_stripped_file_is_a_usage_error_except_in_compat(tmp_path, pair):
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(pair()[1])], check=True)
    code, out, err = run(pair()[0], stripped)
    assert code == 2 and out == "" and "no .symtab (stripped)" in err and err.count("\n") == 1
    code, out, _ = run("--compat", stripped, stripped)
    assert code == 0 and out.endswith("Total: Before=0, After=0, chg +0.00%\n")


def _parsers_made(monkeypatch, *argv) -> tuple[list, tuple[int, str, str]]:
    """Every argument parser ``perfab size ARGV`` builds, and (exit code, stdout, stderr)."""
    import argparse

    made = []
    init = argparse.ArgumentParser.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(argparse.ArgumentParser, "__init__", record)
    return made, run(*argv)


@pytest.mark.parametrize("argv", [("--help",), ("--format", "pdf", "A", "B"), ("A",), ("--bogus", "A", "B")],
                         ids=["help", "bad-choice", "missing-new", "unknown-option"])
def test_help_and_usage_errors_come_from_the_one_parser_of_perfab(monkeypatch, argv):
    """`perfab size` had a second parser of its own beside the subcommand `perfab --help` lists: its help and
    errors must come from `perfab`'s parser, whose `size` subparser holds the command's own arguments."""
    made, (code, out, err) = _parsers_made(monkeypatch, *argv)
    sized = [p for p in made if p.prog == "perfab size"]
    top = [p for p in made if p.prog == "perfab"]
    assert len(sized) == 1 and len(top) == 1, [p.prog for p in made]
    sub = next(a for a in top[0]._actions if a.dest == "command")
    assert sub.choices["size"] is sized[0]
    assert {"--compat", "--limit", "--format", "old", "new"} <= {s for a in sized[0]._actions
                                                                for s in (*a.option_strings, a.dest)}
    if argv == ("--help",):
        assert (code, err) == (0, "") and out == sized[0].format_help()
    else:
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("perfab size: ") and err.endswith("; see `perfab size --help`\n"), err


def test_perfab_help_lists_size_with_the_help_of_its_command():
    from perfab.cli import build_parser
    from perfab.commands.size import Size

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {a.dest: a.help for a in sub._choices_actions}["size"] == Size.help
    assert sub.choices["size"].description == Size.description
