"""The explained diff reads the DWARF of the changed functions, and counts inline sites in them alone.

``kept`` inlines ``twice`` twice and does not change; ``grown`` inlines it
once in OLD and three times in NEW.  The whole file has 3 and 5 sites of
``twice``; the diff, which reads ``grown`` only, lists 1 and 3, and its
inline coverage is ``grown``'s.
"""

from __future__ import annotations

import re

import pytest

from perfab.size import diff_files
from perfab.size.inline import read_inline_index
from size_helpers import compile_c

SOURCE = r"""
volatile int sink;
static inline __attribute__((always_inline)) int twice(int x) { sink = x; return x * 2 + (x >> 1); }
__attribute__((noinline)) int kept(int x) { return twice(x) + twice(x + 7); }
__attribute__((noinline)) int grown(int x)
{
#ifdef OLD
	return twice(x);
#else
	return twice(x) + twice(x ^ 3) + twice(x | 5);
#endif
}
int main(int argc, char **argv) { (void)argv; return kept(argc) + grown(argc); }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    (root / "scope.c").write_text(SOURCE)
    return tuple(compile_c(root / v, "-O2", "-g", f"-D{v}", "scope.c", cwd=root) for v in ("OLD", "NEW"))


def test_unchanged_functions_are_not_read(built):
    old, new = built
    whole = [read_inline_index(p).by_callee()["twice"] for p in built]
    assert [len(sites) for sites in whole] == [3, 5], "gcc did not inline twice() as the test expects"
    d = diff_files(old, new)
    assert [f.name for f in d.families] == ["grown"]
    assert re.search(r"^twice\s+1\s+3\s", d.inline_changes, re.M), d.inline_changes


def test_inline_coverage_is_that_of_the_changed_functions(built):
    d = diff_files(*built)
    for path, pct in zip(built, (d.coverage.old_inline_pct, d.coverage.new_inline_pct)):
        grown = [s for s in read_inline_index(path).sites if s.caller == "grown"]
        size = next(m.old_bytes if path == built[0] else m.new_bytes for m in d.families[0].members)
        assert pct == pytest.approx(100 * sum(s.exclusive_bytes for s in grown) / size)
