"""The package's import graph has no cycle: between modules, or between layers.

A layer is a top-level module or subpackage of ``perfab`` (``perfab.specfile``,
``perfab.run``, ``perfab.plan``...).  Every import counts, those inside
functions too: an import deferred to a call (for start-up time) still ties
the lower module to the higher one, so a cycle among them is a loop of
dependencies whatever the load order.  Only ``perfab.cli``, the composition
root that wires every layer, is read at module level alone (its commands
import what they run at their call), and an import under ``if
TYPE_CHECKING`` never runs.  Importing ``a.b.c`` also loads ``a`` and
``a.b``, so it counts as an import of each.

The graph is read from the source with ``ast``, whatever modules exist, so a
new module is checked as soon as it is written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import perfab

ROOT = Path(perfab.__file__).parent


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("perfab", *path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


ROOT_MODULE = "perfab.cli"  # the composition root: only its module-level imports count


def _imports(tree: ast.Module, everywhere: bool):
    """The import statements of a module, not under ``if TYPE_CHECKING``: all of them, or (``everywhere``
    false) those that run when the module loads (not in functions or classes' methods)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                stack += node.body + node.orelse
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack += node.body if everywhere else []
        elif isinstance(node, (ast.With, ast.ClassDef, ast.For, ast.While)):
            stack += [s for s in node.body if everywhere or not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        elif isinstance(node, ast.Match):
            stack += [s for case in node.cases for s in case.body]


def _targets(name: str, node, mods: dict[str, Path]) -> list[str]:
    """The package modules one import statement names (a name that is not a module counts as its module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = name if mods[name].name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]


def _loaded(target: str, importer: str, mods: dict[str, Path]) -> set[str]:
    """The package modules an import of ``target`` loads: it and its parent packages."""
    while target and target not in mods:
        target = target.rpartition(".")[0]
    out = set()
    while target and target != importer and not importer.startswith(target + "."):
        out.add(target)
        target = target.rpartition(".")[0]
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (at module level only for the composition root)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), name != ROOT_MODULE):
            for target in _targets(name, node, mods):
                edges |= _loaded(target, name, mods)
        graph[name] = edges
    return graph


def layer(module: str) -> str:
    """``perfab.run.backends.base`` -> ``perfab.run``."""
    return ".".join(module.split(".")[:2])


def layer_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph with each layer as one node (edges within a layer dropped)."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(layer(module), set()).update(layer(t) for t in targets if layer(t) != layer(module))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component, for the failure message: a -> b -> a."""
    members, start = set(component), component[0]
    seen, trail = {start: None}, [start]
    while trail:
        node = trail.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                chain = [node]
                while seen[chain[-1]] is not None:
                    chain.append(seen[chain[-1]])
                return " -> ".join([*reversed(chain), start])
            if nxt not in seen:
                seen[nxt] = node
                trail.append(nxt)
    return " ".join(component)


def test_no_module_imports_another_that_imports_it_back():
    graph = import_graph()
    assert not [_path(graph, c) for c in cycles(graph)]


def test_no_layer_imports_a_layer_that_imports_it_back():
    graph = layer_graph(import_graph())
    assert not [_path(graph, c) for c in cycles(graph)]


def test_the_checker_finds_a_cycle_and_its_path():
    """The check itself: a three-layer loop is found and spelled out; a chain is not a cycle."""
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(loop) == [["a", "b", "c"]]
    assert _path(loop, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_imports_in_functions_except_in_the_composition_root():
    graph = import_graph()
    # the runner imports perfab.run.backends.base's package at module level, and perfab.run.backends with it
    assert {"perfab.run.backends", "perfab.store", "perfab.errors"} <= graph["perfab.run.runner"]
    # the base backend reads this machine's interrupts inside preflight only: that counts
    assert "perfab.machine.interrupts" in graph["perfab.run.backends.base"]
    # the CLI imports the runner inside its commands only, and the root's function imports do not count
    assert "perfab.run.runner" not in graph["perfab.cli"]
    assert layer("perfab.run.backends.base") == "perfab.run"


def test_imports_in_functions_and_blocks_are_found_and_typing_ones_are_not():
    code = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import t1\n"
            "def f():\n    import f1\n    for x in y:\n        import f2\n"
            "class C:\n    def m(self):\n        import m1\n"
            "with open(p):\n    import w1\ntry:\n    import t2\nexcept ImportError:\n    import t3\n")
    names = lambda everywhere: sorted(a.name for node in _imports(ast.parse(code), everywhere)  # noqa: E731
                                      for a in node.names if a.name != "TYPE_CHECKING")
    assert names(True) == ["f1", "f2", "m1", "t2", "t3", "w1"]
    assert names(False) == ["t2", "t3", "w1"]
