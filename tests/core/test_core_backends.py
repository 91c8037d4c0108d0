"""Backends are complete plugins: each declares what the rest of perfab asks of it, and nothing else
branches on a backend's name.

The registry (``perfab.run.backends.BACKENDS``) is listed, and every class in
it is checked to carry its declaration (``perfab.specfile.backends``), its
``[measure]`` keys among them, which the spec's schema reads; the spec's
rules, the analysis and the report are shown to follow the declarations.
The source of the package outside the two halves of a backend
(``run/backends/`` and ``specfile/backends.py``) is read
with ``ast``: for comparisons with a backend name, and for any string equal
to one that is not plainly something else (a literal grep would also find
``perf`` the profiler and ``guest`` the kallsyms source, which are not
backends).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from pathlib import Path

import pytest

import perfab
import perfab.run.backends as registry
from perfab.errors import SpecError, UsageError
from perfab.run.backends.base import DECLARED, Declares
from perfab.specfile import backends as declarations
from perfab.specfile import parse_spec
from perfab.specfile.schema import TABLES, keys_by_backend

ROOT = Path(perfab.__file__).parent
SPEC = """
[experiment]
name = "x"
runs = 2
[[variant]]
name = "a"
[[variant]]
name = "b"
[[workload]]
name = "w"
argv = ["true"]
[measure]
"""


def test_the_registry_lists_every_backend_by_its_name_with_the_default_first():
    assert list(registry.BACKENDS)[0] == registry.DEFAULT
    assert all(name == cls.name for name, cls in registry.BACKENDS.items())
    assert set(registry.BACKENDS) >= {"time", "perf", "cachegrind", "guest"}


@pytest.mark.parametrize("name", sorted(registry.BACKENDS))
def test_each_backend_declares_everything(name):
    cls = registry.BACKENDS[name]
    assert cls.declaration is declarations.DECLARATIONS[name]
    for attr in DECLARED:
        if attr != "counted":
            assert getattr(cls, attr) == getattr(cls.declaration, attr), f"backend {name!r}: {attr} is not declared"
    for method in ("from_measure", "counted", "groups", "wrap", "collect", "metric_info", "preflight", "prepare",
                   "for_side", "plan_lines", "service_counter", "side_sources"):
        assert callable(getattr(cls, method, None)), f"backend {name!r} has no {method}"
    assert "from_measure" in vars(cls), f"{name!r} must say how a spec makes it"
    assert isinstance(cls.counted((("cycles", "instructions"),)), str) and cls.counted(((),))
    # the keys it cannot do without are its own [measure] keys
    own = {k.name for k in cls.measure_keys.keys}
    assert all(r.key in own and r.problem and r.fix for r in cls.required)
    # a backend counts a service exactly when it says with what
    assert (cls.service_counter is not Declares.service_counter) == (cls.counts_service is not None)


def test_the_spec_reads_each_backends_keys_from_its_class():
    assert list(keys_by_backend()) == list(registry.BACKENDS)
    measure = [k.name for k in TABLES["measure"]]
    for name, cls in registry.BACKENDS.items():
        assert all(k.name in measure for k in cls.measure_keys.keys), name
    backend = TABLES["measure"][0]
    assert (backend.name, backend.default, backend.value.options()) == ("backend", registry.DEFAULT,
                                                                        tuple(registry.BACKENDS))


def test_the_schema_asks_for_the_backends_only_when_used():
    """Loading the schema alone loads no backend (they import the spec); its [measure] table still lists them."""
    import subprocess
    import sys

    code = ("import sys; from perfab.specfile import schema; loaded = 'perfab.run.backends' in sys.modules; "
            "keys = [k.name for k in schema.TABLES['measure']]; print(loaded, 'l1i' in keys, schema.owner('vcpus'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT.parent), "PATH": "/usr/bin:/bin"}).stdout.split()
    assert out == ["False", "True", "guest"]


def test_every_backend_class_in_the_package_is_registered():
    """A new backend module whose class is not in the registry would never be chosen."""
    package = Path(registry.__file__).parent
    found = set()
    for info in pkgutil.iter_modules([str(package)]):
        module = importlib.import_module(f"perfab.run.backends.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and "declaration" in vars(
                    value) and "from_measure" in vars(value):
                found.add(value)
    assert found and found <= set(registry.BACKENDS.values()), found - set(registry.BACKENDS.values())


def test_an_unknown_stored_backend_is_a_one_line_error():
    with pytest.raises(UsageError, match="unknown measurement backend 'nope'.*knows time"):
        declarations.declared("nope")


def test_the_spec_asks_the_backend_whether_it_counts_a_service(monkeypatch):
    service = '[workload.service]\nargv = ["sleep", "9"]\ncounters = "pids"\n'
    text = SPEC.replace("[measure]\n", service + "[measure]\n")
    with pytest.raises(SpecError, match=r'workload\[0\].service.counters: counts with perf stat; '
                                        r'set \[measure\] backend = "perf" or remove service.counters'):
        parse_spec(text, "s.toml")
    monkeypatch.setitem(declarations.DECLARATIONS, "time",
                        dataclasses.replace(declarations.TIME, counts_service="a counter of its own"))
    assert parse_spec(text, "s.toml").workloads[0].service.counters == "pids"


def test_the_spec_asks_the_backend_whether_its_sides_boot_kernels(monkeypatch):
    kernel = '[variant.kernel]\nimage = "/boot/vmlinuz"\n'
    text = SPEC.replace('name = "a"\n', 'name = "a"\n' + kernel).replace('name = "b"\n', 'name = "b"\n' + kernel)
    with pytest.raises(SpecError, match='boot a guest for each run; set \\[measure\\] backend = "guest"'):
        parse_spec(text, "s.toml")
    monkeypatch.setitem(declarations.DECLARATIONS, "time", dataclasses.replace(declarations.TIME, boots_kernels=True))
    assert parse_spec(text, "s.toml").variants[0].kernel is not None


def test_the_report_asks_the_backend_what_it_counted(monkeypatch):
    from perfab.report.document import counted

    class Stored:  # the two fields counted() reads of an Analysis
        backend, groups = "perf", (("cycles", "instructions"), ("branches",))

    assert counted(Stored()) == "perf stat, one group per run: cycles,instructions | branches"
    monkeypatch.setitem(declarations.DECLARATIONS, "perf",
                        dataclasses.replace(declarations.PERF, counted=lambda groups: "its own words"))
    assert counted(Stored()) == "its own words"


def _branches_on_a_backend_name(tree: ast.AST, names: set[str]) -> list[str]:
    """Comparisons of something named ``backend`` with a backend name, and literal collections of names."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = {o.value for o in ast.walk(node) if isinstance(o, ast.Constant) and isinstance(o.value, str)}
            if consts & names and "backend" in ast.unparse(node).lower():
                out.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(values & names) >= 2:
                out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_module_outside_the_backends_branches_on_a_backend_name():
    names = set(registry.BACKENDS)
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if (ROOT / "run" / "backends") in path.parents or path == ROOT / "specfile" / "backends.py":
            continue
        hits = _branches_on_a_backend_name(ast.parse(path.read_text()), names)
        found += [f"{path.relative_to(ROOT)}:{hit}" for hit in hits]
    assert not found


def test_the_name_check_sees_what_the_old_code_did():
    """The check fails on the tests the modules used to make (and not on perf the profiler)."""
    names = set(registry.BACKENDS)
    old = ('if a.backend == "perf": pass\n'
           'rusage = [m for m in seen if backend != "cachegrind"]\n'
           'BACKENDS = ("time", "perf", "cachegrind", "guest")\n')
    assert len(_branches_on_a_backend_name(ast.parse(old), names)) == 3
    assert not _branches_on_a_backend_name(ast.parse('cmd = ["perf", "record"]\nok = symbols == "guest"\n'), names)


# Strings equal to a backend name that name something else, by (module, enclosing function): why.
NOT_A_BACKEND = {
    ("metrics.py", "kind"): "a metric's kind (time)",
    ("kernel/sides.py", "launch_request"): "the kallsyms source and cache of a guest's symbols",
    ("kernel/sides.py", "_kvm_problem"): "the cache directory of a KVM probe boot",
}


def _names_something_else(node: ast.Constant, parents: dict) -> bool:
    """A backend-like string whose use shows it is not a backend: compared with or looked up in something
    other than a backend, a dict key, or a program run (an argv's first word, ``shutil.which``)."""
    up = parents[node]
    if isinstance(up, (ast.Tuple, ast.List, ast.Set)) and isinstance(parents.get(up), ast.Compare):
        up = parents[up]  # x in ("time", "rate")
    if isinstance(up, ast.Compare):
        return "backend" not in ast.unparse(up).lower()
    if isinstance(up, ast.Dict):
        return node in up.keys
    if isinstance(up, (ast.Tuple, ast.List)):
        return up.elts[0] is node and len(up.elts) > 1
    return isinstance(up, ast.Call) and ast.unparse(up.func) == "shutil.which"


def _backend_strings(tree: ast.AST, names: set[str]) -> list[tuple[str, int]]:
    """The enclosing function and line of every string equal to a backend name that may be one."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and not _names_something_else(node, parents):
            up = node
            while up in parents and not isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                up = parents[up]
            out.append((getattr(up, "name", "<module>"), node.lineno))
    return out


def test_no_backend_name_is_written_outside_the_backends():
    names = set(registry.BACKENDS)
    found, excused = [], set()
    for path in sorted(ROOT.rglob("*.py")):
        if (ROOT / "run" / "backends") in path.parents or path == ROOT / "specfile" / "backends.py":
            continue
        module = path.relative_to(ROOT).as_posix()
        for function, line in _backend_strings(ast.parse(path.read_text()), names):
            if (module, function) in NOT_A_BACKEND:
                excused.add((module, function))
            else:
                found.append(f"{module}:{line} in {function}")
    assert not found
    assert excused == set(NOT_A_BACKEND), "an excuse that no longer matches anything: remove it"


def test_the_backend_string_check_sees_names_and_lets_other_words_pass():
    names = set(registry.BACKENDS)
    named = ('def f(m):\n    BACKEND = "perf"\n    run(backend="guest")\n    return {"b": "cachegrind"}\n'
             '    if m.backend in ("time", "perf"): pass\n')
    assert sorted(line for _, line in _backend_strings(ast.parse(named), names)) == [2, 3, 4, 5, 5]
    other = ('def g(kind, symbols):\n    ok = kind in ("time", "rate") or symbols == "guest"\n'
             '    argv = ["perf", "record"]\n    table = {"time": 1}\n    return shutil.which("perf")\n')
    assert not _backend_strings(ast.parse(other), names)
