"""compare_inlines and format_inline_changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inline_helpers import source_lines
from perfab.size.causes import InlineView
from perfab.size.inline import InlineChange, InlineIndex, compare_inlines, format_inline_changes, read_inline_index

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def outlined_vs_inlined(build):
    old = read_inline_index(build("sites.c", "-O2", "-g", "-DHELPER_OUTLINE"))
    new = read_inline_index(build("sites.c", "-O2", "-g"))
    return old, new


def test_inlining_a_helper_shows_every_new_site(outlined_vs_inlined):
    old, new = outlined_vs_inlined
    changes = compare_inlines(old, new)
    assert [c.callee for c in changes] == ["helper"]
    (helper,) = changes
    assert (helper.sites_old, helper.sites_new) == (0, 7)
    assert helper.inclusive_new == sum(s.inclusive_bytes for s in new.by_callee()["helper"])
    assert helper.bytes_per_site_new == pytest.approx(helper.inclusive_new / 7)
    assert helper.bytes_per_site_old == 0.0 and helper.inclusive_old == 0
    callers = dict(helper.top_callers)
    assert set(callers) == {"one", "two", "three"} and sum(callers.values()) == helper.inclusive_new
    assert helper.top_callers[0][0] == "two"  # three sites: the largest delta
    lines = source_lines("sites.c", "helper(")
    assert helper.evidence[0] in {f"sites.c:{n} in two" for n in lines}


def test_reverse_direction_is_the_negated_change(outlined_vs_inlined):
    old, new = outlined_vs_inlined
    (fwd,) = compare_inlines(old, new)
    (back,) = compare_inlines(new, old)
    assert (back.sites_old, back.sites_new) == (fwd.sites_new, fwd.sites_old)
    assert back.inclusive_delta == -fwd.inclusive_delta
    assert sorted(back.top_callers) == sorted((c, -d) for c, d in fwd.top_callers)


def test_identical_files_have_no_changes(outlined_vs_inlined):
    _, new = outlined_vs_inlined
    assert compare_inlines(new, new) == []
    assert format_inline_changes([]) == "inline sites: no change\n"


def change(callee: str, sites: tuple[int, int], per_site: tuple[float, float], caller: str, where: str):
    incl = (round(sites[0] * per_site[0]), round(sites[1] * per_site[1]))
    return InlineChange(
        callee=callee,
        sites_old=sites[0],
        sites_new=sites[1],
        bytes_per_site_old=per_site[0],
        bytes_per_site_new=per_site[1],
        exclusive_old=incl[0],
        exclusive_new=incl[1],
        inclusive_old=incl[0],
        inclusive_new=incl[1],
        top_callers=((caller, incl[1] - incl[0]),),
        evidence=(f"{where} in {caller}",),
    )


def test_format_matches_golden_and_fits_80_columns():
    changes = [
        change("_raw_spin_unlock", (0, 152), (0.0, 18.5), "copy_process", "kernel/fork.c:2381"),
        change("copy_mm", (0, 1), (0.0, 2242.0), "copy_process", "kernel/fork.c:2263"),
        change("a_callee_name_long_enough_to_be_cut_at_the_column", (3, 2), (40.0, 40.0), "f", "x.c:1"),
        change("small", (10, 10), (4.0, 4.5), "g", "y.c:2"),
        change("smaller", (1, 1), (4.0, 5.0), "h", "z.c:3"),
    ]
    text = format_inline_changes(changes, limit=3)
    assert text == (GOLDEN / "format_inline_changes.txt").read_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.splitlines()[-1].startswith("(2 more changed callees not shown, inclusive delta +6 bytes)")


def test_lockbench_inlined_unlock_grows_every_site(tmp_path):
    """Seed 000 in small: the bundled lock/unlock workload built both ways."""
    root = Path(__file__).resolve().parents[2]
    source = tmp_path / "lockbench.c"
    gen = [sys.executable, str(root / "workloads" / "gen_lockbench.py"), "32"]
    source.write_text(subprocess.run(gen, check=True, capture_output=True, text=True).stdout)
    built = {}
    for side, flags in (("outline", ["-DUNLOCK_OUTLINE"]), ("inline", [])):
        built[side] = tmp_path / side
        subprocess.run(["gcc", "-O2", "-g", *flags, "-o", side, "lockbench.c"], cwd=tmp_path, check=True)
    changes = compare_inlines(read_inline_index(built["outline"]), read_inline_index(built["inline"]))
    unlock = next(c for c in changes if c.callee == "unlock")
    assert changes[0] is unlock
    assert unlock.sites_old == 0 and unlock.sites_new == source.read_text().count("\tunlock(")
    assert 8 <= unlock.bytes_per_site_new <= 128
    assert unlock.evidence[0].startswith("lockbench.c:")


def by_values(index):
    """The same sites as values only, so compare_inlines takes its per-site Python tally."""
    return InlineIndex(tuple(index.sites), index.covered_bytes, index.function_bytes)


@pytest.mark.parametrize("source,old_flags,new_flags", [
    ("sites.c", ("-O2", "-DHELPER_OUTLINE"), ("-O2",)),
    ("nested.c", ("-Os",), ("-O3",)),
])
def test_compiled_tally_matches_the_per_site_tally(build, source, old_flags, new_flags):
    """The compiled reader's per-callee comparison gives the changes the per-site Python tally gives."""
    old, new = (read_inline_index(build(source, *flags, "-g")) for flags in (old_flags, new_flags))
    for a, b in ((old, new), (new, old)):
        native = compare_inlines(a, b)
        assert native and any(c.evidence for c in native)
        assert native == compare_inlines(by_values(a), by_values(b))


def test_sites_grouped_lazily_match_the_listed_grouping(build):
    """Families' sites built from the columns on demand equal the grouping of every site's value."""
    index = read_inline_index(build("nested.c", "-O2", "-g"))
    lazy, listed = InlineView.of(index), InlineView.of(by_values(index))
    assert index.columns is not None and by_values(index).columns is None
    for groups, values in ((lazy.by_callee, listed.by_callee), (lazy.by_caller, listed.by_caller)):
        assert values.groups and groups.groups.keys() == values.groups.keys()
        for base in values.groups:
            sites = values.get(base)
            assert groups.get(base) == sites and groups.count(base) == len(sites) == values.count(base)
        assert groups.get("no such function", []) == [] and groups.count("no such function") == 0
    assert all(s.parent is None for base in lazy.by_caller.groups for s in lazy.by_caller.get(base))
    assert any(s.parent is not None for base in lazy.by_callee.groups for s in lazy.by_callee.get(base))
