"""Statistical methods are complete objects: nothing outside their registry branches on a method's name.

Every declared method is a ``Method`` named as declared, with a reference
in its docstring; the spec's choices are the registry's; a method added as
one class and one registry line is used, described and obeyed by the
analysis and the report.

The source of the package is read with ``ast``: a comparison of anything
with a method's name (``==``, ``!=``, ``in`` a literal tuple, list or set)
or a ``match`` case on one is a branch the method should answer for
itself.  The registry (``perfab.methodtraits``, which declares the names,
and ``perfab.analyse.methods``, which finds their objects) is the one
place allowed to hold them.  "sequential" also names a run order: a
comparison with something called ``order`` is about that.  Before the
methods described themselves, the check found 15 such branches in 7
modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_core_report_golden import _experiment

import perfab
from perfab import methodtraits
from perfab.analyse.compare import analyse
from perfab.analyse.methodbase import Method, Verdict
from perfab.analyse.methods import AssumeNormal, get_method, method_names
from perfab.methodtraits import DECLARED, Traits
from perfab.report.document import document
from perfab.specfile import schema
from perfab.store import Store

ROOT = Path(perfab.__file__).parent
REGISTRY = {"methodtraits.py", "analyse/methods.py"}  # where the names are declared and resolved


def _literals(node: ast.AST) -> set[str]:
    """The strings a comparison operand is, or holds as a literal collection."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _about_order(operands: list[ast.AST]) -> bool:
    return any(ast.unparse(o).endswith("order") for o in operands)


def _case_literals(pattern: ast.AST) -> set[str]:
    return {p.value.value for p in ast.walk(pattern)
            if isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant) and isinstance(p.value.value, str)}


def name_branches(tree: ast.AST, names: set[str]) -> list[str]:
    """``line: source`` of every comparison with, or ``match`` case on, one of ``names``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if set().union(*map(_literals, operands)) & names and not _about_order(operands):
                out.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.match_case) and _case_literals(node.pattern) & names:
            out.append(f"{node.pattern.lineno}: case {ast.unparse(node.pattern)}")
    return out


def test_no_module_outside_the_registry_branches_on_a_method_name():
    names = set(method_names())
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module not in REGISTRY:
            found += [f"{module}:{hit}" for hit in name_branches(ast.parse(path.read_text()), names)]
    assert not found, f"{len(found)} branch(es) on a method's name:\n" + "\n".join(found)


def test_the_name_check_sees_each_kind_of_branch_and_lets_the_run_order_pass():
    names = {"nonparametric", "exact", "normal", "sequential"}
    branches = ('if est.method == "exact": pass\n'
                'ok = name != "normal" and m in ("nonparametric", "sequential")\n'
                'pick = max(names, key=lambda m: m == "nonparametric")\n'
                'match est.method:\n    case "exact" | "normal": pass\n')
    assert sorted(int(hit.split(":")[0]) for hit in name_branches(ast.parse(branches), names)) == [1, 2, 2, 3, 5]
    other = ('if spec.order == "sequential": pass\n'
             'x = {"exact": 1}["exact"]\nkind = "normal"\nif fdr == "holm": pass\n')
    assert not name_branches(ast.parse(other), names)


def test_every_declared_method_is_a_method_named_as_declared_with_a_reference():
    for traits in DECLARED:
        method = get_method(traits.name)
        assert isinstance(method, Method) and method.name == traits.name and method.traits is traits
        assert re.search(r"References?:", type(method).__doc__), traits.name
        assert traits.fallback is None or methodtraits.declared(traits.fallback).spec
    assert schema.METHODS == methodtraits.spec_names() and "sequential" not in schema.METHODS
    assert schema.METHODS[0] == methodtraits.DEFAULT


class AssumeNothingChanged(AssumeNormal):
    """Welch's t-test (``AssumeNormal``) under another name, whose verdict rule is its own: never a change.

    A method added the documented way, one class and one registry line, to
    show the analysis and the report ask it.  Reference: ``AssumeNormal``.
    """

    name = "unchanged"

    def describe(self, confidence: float, sequential=None) -> str:
        return "Welch t that never calls a change"

    def verdict(self, est, margin, q, alpha) -> Verdict:
        return Verdict.NS


def test_a_method_added_by_one_class_and_one_registry_line_judges_and_describes_its_rows(db, monkeypatch):
    line = Traits("unchanged", f"{__name__}:AssumeNothingChanged")
    monkeypatch.setattr(methodtraits, "_BY_NAME", {**methodtraits._BY_NAME, line.name: line})
    _experiment(db, {"outline": 1.0, "inline": 1.05})
    store = Store(db)
    try:
        welch, added = analyse(store, method="normal"), analyse(store, method="unchanged")
    finally:
        store.close()
    ops = [next(r for r in a.rows if r.metric == "ops/s") for a in (welch, added)]
    assert ops[0].verdict == Verdict.CHANGE and ops[1].verdict == Verdict.NS  # its own rule, on the same numbers
    assert ops[1].estimate.method == "unchanged" and ops[1].estimate.delta == ops[0].estimate.delta
    section = document(added).sections[0]
    assert [m.name for m in section.methods] == ["unchanged"]
    assert any("Welch t that never calls a change" in line for line in section.legend)
