"""End to end: programs built here, diffed, families and causes asserted exactly.

Each function of ``src/prog.c`` changes between the ``-DOLD`` and the
default build in one known way; the inline causes come from the DWARF
reader (``perfab.size.inline``) on the ``-g`` builds.
"""

from __future__ import annotations

import pytest
from size_helpers import compile_c, compilers

from perfab.size import diff_files
from perfab.size.compat import compat_results
from perfab.size.elf import read_elf
from perfab.size.symbols import read_symbols

GCC_O2 = {
    ("once", None): "inlined into its only caller run_once (2 copies)",
    ("bump", None): "inlined at 3 sites in use_bump",
    ("mix", None): "uninlined: was inlined at 2 sites in use_mix",
    ("legacy", None): "removed",
    ("fresh", None): "new",
    ("get_tag", None): "clone .isra appeared, plain get_tag vanished",
    ("scale", None): "clone .constprop appeared, plain scale vanished",
    ("process", None): "clone .part appeared, plain process vanished; inlined at 3 more sites",
    ("sum", None): "clone .cold appeared; inlined at 1 fewer site",
    ("run_once", None): "body changed; now inlines once (1 site)",
    ("use_bump", None): "body changed; now inlines bump (3 sites)",
    ("use_mix", None): "body changed; no longer inlines mix",
    ("run", None): "body changed; now inlines process (3 sites)",
    ("helper", "util.c"): "body changed",
}


def causes(d) -> dict:
    return {(f.name, f.file): f.cause.text for f in d.families}


def test_gcc_O2_families_and_causes(pair):
    d = diff_files(*pair("gcc", "-O2"))
    got = causes(d)
    assert {k: got.get(k) for k in GCC_O2} == GCC_O2
    assert set(got) - set(GCC_O2) <= {("main", None), ("report", None), ("use_tag", None)}
    assert all(got[k].startswith("body changed") for k in set(got) - set(GCC_O2))
    members = {(f.name, f.file): [(m.name, m.old_bytes is None, m.new_bytes is None) for m in f.members]
               for f in d.families}
    assert members[("process", None)] == [("process", False, True), ("process.part", True, False)]
    assert members[("sum", None)] == [("sum", False, False), ("sum.cold", True, False)]
    assert d.warnings == ()


def test_gcc_Os_families_and_causes(pair):
    got = causes(diff_files(*pair("gcc", "-Os")))
    assert got[("once", None)] == "inlined into its only caller run_once"
    assert got[("bump", None)] == "inlined at 3 sites in use_bump"
    assert got[("mix", None)] == "uninlined: was inlined at 2 sites in use_mix"
    assert got[("scale", None)] == "clone .constprop appeared, plain scale vanished"
    assert got[("helper", "util.c")] == "body changed"
    assert ("process", None) not in got  # -Os: no partial inlining, process unchanged


def test_same_named_statics_are_kept_apart(pair):
    d = diff_files(*pair("gcc", "-O2"))
    helper = [f for f in d.families if f.name == "helper"]
    assert [(f.file, f.old_bytes, f.delta_bytes > 0) for f in helper] == [("util.c", 4, True)]  # prog.c's is unchanged
    rows = {r[0]: r for r in d.tables[0].rows}
    assert "helper [util.c]" in rows and "helper [prog.c]" not in rows


def test_without_debug_info_the_symbol_diff_still_works_and_says_what_it_could_not_do(pair):
    d = diff_files(*pair("gcc", "-O2", debug=False))
    got = causes(d)
    assert got[("once", None)] == "removed" and got[("mix", None)] == "new"
    assert got[("get_tag", None)] == "clone .isra appeared, plain get_tag vanished"
    assert len(d.warnings) == 2 and all("no debug info" in w for w in d.warnings)
    assert d.coverage.old_inline_pct is None


def test_accounting_balances_per_section(pair):
    d = diff_files(*pair("gcc", "-O2"))
    for s in d.sections:
        assert s.symbol_delta_bytes - s.overlap_delta_bytes + s.uncovered_delta_bytes == s.delta_bytes
    text = next(s for s in d.sections if s.name == ".text")
    assert text.symbol_delta_bytes == sum(f.delta_bytes for f in d.families if f.kind == "text")
    assert text.delta_bytes == d.kind_totals()["text"][1] - d.kind_totals()["text"][0] - sum(
        s.delta_bytes for s in d.sections if s.kind == "text" and s.name != ".text")
    assert 50 < d.coverage.new_text_pct < 100 and 0 < d.coverage.new_inline_pct < 100


def test_default_table_matches_compat_where_the_rules_agree(pair):
    old, new = pair("gcc", "-O2")
    ours, theirs = diff_files(old, new).tables[0], compat_results(read_elf(old), read_elf(new))[0]
    assert (ours.add, ours.remove, ours.grow, ours.shrink) == (theirs.add, theirs.remove, theirs.grow, theirs.shrink)
    assert ours.up_bytes - ours.down_bytes == theirs.up_bytes - theirs.down_bytes


def test_aliases_count_once(tmp_path):
    src = tmp_path / "alias.c"
    src.write_text(
        "int real_fn(int x) { return x * 3 + 1; }\n"
        "int alias_fn(int x) __attribute__((alias(\"real_fn\")));\n"
        "int main(int c, char **v) { (void)v; return alias_fn(c) + real_fn(c); }\n"
    )
    exe = compile_c(tmp_path / "alias", "-O2", str(src))
    s = read_symbols(read_elf(exe))
    sizes = s.sizes()
    assert ("real_fn", None) in sizes and ("alias_fn", None) not in sizes
    assert s.aliases["real_fn"] == ("alias_fn",)
    compat = compat_results(read_elf(exe), read_elf(exe))[0]
    assert compat.old_total_bytes - diff_files(exe, exe).tables[0].old_total_bytes == sizes[("real_fn", None)]


@pytest.mark.parametrize("mode,titles", [("categories", ["Function", "Data", "RO Data"]), ("text", ["Function"]),
                                         ("data+rodata", ["Data"])])
def test_modes_give_bloat_o_meter_tables(pair, mode, titles):
    d = diff_files(*pair("gcc", "-O2"), mode=mode)
    assert [t.title for t in d.tables] == titles


@pytest.mark.parametrize("cc", compilers())
def test_every_installed_compiler_gives_the_same_cause_kinds(pair, cc):
    kinds = {(f.name, f.file): f.cause.kind for f in diff_files(*pair(cc, "-O2")).families}
    expected = {"legacy": "removed", "fresh": "new", "once": "inlined", "mix": "uninlined"}
    assert {name: kinds.get((name, None)) for name in expected} == expected


MOVED = {
    "main.c": "int from_a(int); int from_b(int);\nint main(int argc, char **argv) { (void)argv; return USE(argc); }\n",
    "a.c": ("__attribute__((noinline)) static int foo(int x) { return x * 3 + 1; }\n"
            "int from_a(int x) { return foo(x); }\n"),
    "b.c": "__attribute__((noinline)) int foo(int x) { return x * 5 + 2; }\nint from_b(int x) { return foo(x); }\n",
}
MEMBERS = """
import json, sys
from perfab.size import diff_files
d = diff_files(sys.argv[1], sys.argv[2], dwarf=False)
print(json.dumps([[(m.name, m.old_bytes, m.new_bytes) for m in r.members] for r in d.families if r.name == "foo"]))
"""


def test_members_of_one_name_keep_one_order_under_any_hash_seed(tmp_path):
    """A static that became global left two `foo` members (one keyed by its file, one not) whose order
    followed set iteration: the vmlinux JSON report differed between runs.  The old file's member now
    comes first."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    for name, text in MOVED.items():
        (tmp_path / name).write_text(text)
    old = compile_c(tmp_path / "old", "-O2", "-DUSE=from_a", "main.c", "a.c", cwd=tmp_path)
    new = compile_c(tmp_path / "new", "-O2", "-DUSE=from_b", "main.c", "b.c", cwd=tmp_path)
    src = str(Path(__file__).resolve().parents[2] / "src")
    seen = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=src)
        out = subprocess.run([sys.executable, "-c", MEMBERS, str(old), str(new)], env=env, capture_output=True,
                             text=True, check=True).stdout
        seen.add(out)
    assert len(seen) == 1, seen
    (members,) = json.loads(seen.pop())
    assert [m[0] for m in members] == ["foo", "foo"]
    assert members[0][1] is not None and members[1][1] is None  # the old file's foo, then the new file's
