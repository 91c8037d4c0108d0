"""Study 001: `asm inline` lets gcc inline obj_account() at all 16 sites; size and cachegrind explain it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from studies_helpers import cli, rows_by, run_study, spec

SPEC = spec("001-asm-inline", "cachegrind.toml")
SITES = 16  # callers in lockops.c, each a call site of obj_account()
LOCKS_PER_ACCOUNT = 4  # locked instructions in obj_account(): bts, add, add, btr
SMP_LOCKS_GROWTH = 4 * LOCKS_PER_ACCOUNT * (SITES - 1)  # 4-byte entries: 16 copies instead of 1


def locked_instructions(binary: Path) -> int:
    """Instructions with a lock prefix, counted by objdump (independent of perfab)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)],
                          capture_output=True, text=True, check=True).stdout
    return len(re.findall(r"^\s+[0-9a-f]+:\s+lock ", text, re.M))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[dict, Path]:
    """The study run once: its report and its build directory."""
    work = tmp_path_factory.mktemp("s001")
    return run_study(SPEC, work), work / ".perfab/build/asm-inline"


def test_asm_inline_runs_fewer_instructions_for_the_same_work(study):
    doc, _ = study
    rows = rows_by(doc, "metric")
    assert rows["checksum"]["verdict"] == "flat"
    assert rows["instructions"]["verdict"] == "**" and rows["instructions"]["delta"] < -0.05
    assert rows["D1 refs"]["verdict"] == "**" and rows["D1 refs"]["delta"] < 0  # no call's pushes and pops


def needs_dwarf_reader() -> None:
    pytest.importorskip("perfab_native", reason="inline causes need the DWARF reader: make native")


def test_size_explains_the_growth_by_inline_sites_and_smp_locks(study):
    needs_dwarf_reader()
    _, build = study
    old, new = build / "asm/lockops", build / "asm_inline/lockops"
    code, out, err = cli("size", "--format", "json", str(old), str(new))
    assert code == 0, err
    d = json.loads(out)
    families = {f["name"]: f for f in d["families"]}
    account = families["obj_account"]
    assert account["new_bytes"] is None and account["cause"]["kind"] == "inlined"
    assert account["cause"]["text"] == f"inlined at {SITES} sites in {SITES} functions"
    callers = [f for name, f in families.items() if name.startswith("caller")]
    assert len(callers) == SITES and all(f["delta_bytes"] > 0 for f in callers)
    assert all("now inlines obj_account (1 site)" in f["cause"]["text"] for f in callers)
    assert re.search(rf"^obj_account\s+0\s+{SITES}\s", d["inline_changes"], re.M), d["inline_changes"]

    # .smp_locks: one 4-byte entry per locked instruction, no symbol covers it.
    smp = next(s for s in d["sections"] if s["name"] == ".smp_locks")
    assert smp["old_bytes"] == 4 * locked_instructions(old)
    assert smp["new_bytes"] == 4 * locked_instructions(new)
    assert smp["delta_bytes"] == SMP_LOCKS_GROWTH
    assert smp["uncovered_delta_bytes"] == smp["delta_bytes"]


def test_text_report_names_the_section_and_the_inlined_function(study):
    needs_dwarf_reader()
    _, build = study
    code, out, err = cli("size", str(build / "asm/lockops"), str(build / "asm_inline/lockops"))
    assert code == 0, err
    assert re.search(rf"^\.smp_locks\s+\d+\s+\d+\s+\+{SMP_LOCKS_GROWTH}\s", out, re.M), out
    assert re.search(rf"^obj_account\s+\d+\s+-\s+-\d+\s+inlined at {SITES} sites", out, re.M), out
