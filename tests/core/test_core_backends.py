"""Backends are complete plugins: each declares what the rest of perfab asks of it, and nothing else
branches on a backend's name.

The registry (``perfab.run.backends.BACKENDS``) is listed, and every class in
it is checked for each declaration in ``base.DECLARED``; the spec reader,
the analysis and the report are shown to follow the declarations, including
those of a backend added to the registry here.  The source of the package
outside ``run/backends/`` is read with ``ast`` for comparisons with a backend
name (a literal grep would also find ``perf`` the profiler and ``guest`` the
kallsyms source, which are not backends).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import perfab
import perfab.run.backends as registry
from perfab.errors import SpecError, UsageError
from perfab.run.backends.base import DECLARED, Declares, Option
from perfab.spec import parse_spec
from perfab.spec.schema import allowed

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
    for attr, kind in DECLARED.items():
        assert hasattr(cls, attr), f"backend {name!r} does not declare {attr}"
        assert isinstance(getattr(cls, attr), kind), f"backend {name!r}: {attr} is not {kind}"
    for method in ("from_measure", "describe", "groups", "wrap", "collect", "metric_info", "prepare", "for_side",
                   "plan_lines", "count_service", "option_problem"):
        assert callable(getattr(cls, method, None)), f"backend {name!r} has no {method}"
    assert "from_measure" in vars(cls) and "describe" in vars(cls), f"{name!r} must say how it is made and described"
    assert isinstance(cls.describe((("cycles", "instructions"),)), str) and cls.describe(((),))


@pytest.mark.parametrize("name", sorted(registry.BACKENDS))
def test_declared_keys_are_spec_keys_and_switches_are_the_backends_own(name):
    cls = registry.BACKENDS[name]
    keys = allowed("measure")
    own = {o.key for o in cls.options}
    assert all(isinstance(o, Option) and o.key in keys for o in cls.options)
    assert all(r.key in keys and r.problem and r.fix for r in cls.required)
    for key, switch in cls.options_when.items():
        assert key in keys and key not in own and switch in own, (key, switch)
    # a backend counts a service exactly when it says with what
    assert (cls.count_service is not Declares.count_service) == (cls.counts_service is not None)


def test_no_key_belongs_to_two_backends():
    owners = [o.key for cls in registry.BACKENDS.values() for o in cls.options]
    assert len(owners) == len(set(owners))


def test_every_backend_class_in_the_package_is_registered():
    """A new backend module whose class is not in the registry would never be chosen."""
    package = Path(registry.__file__).parent
    found = set()
    for info in pkgutil.iter_modules([str(package)]):
        module = importlib.import_module(f"perfab.run.backends.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and isinstance(
                    vars(value).get("name"), str) and "wrap" in vars(value) and "groups" in vars(value):
                found.add(value)
    assert found and found <= set(registry.BACKENDS.values()), found - set(registry.BACKENDS.values())


def test_an_unknown_stored_backend_is_a_one_line_error():
    with pytest.raises(UsageError, match="unknown measurement backend 'nope'.*knows time"):
        registry.declared("nope")


class _Added(Declares):
    """A backend added to the registry: reads max_events_per_run, counts nothing, boots nothing."""

    name = "added"
    options = (Option("max_events_per_run"),)
    options_when: dict[str, str] = {}
    required = ()
    wraps_workload = simulated = slows_workload = own_readings = boots_kernels = own_interrupts = False
    counts_service = None

    @classmethod
    def from_measure(cls, measure):
        return cls()

    @classmethod
    def describe(cls, groups):
        return "the added backend's readings"


@pytest.fixture
def added(monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "added", _Added)
    return _Added


def test_a_backend_added_to_the_registry_is_chosen_and_its_key_refused_elsewhere(added):
    exp = parse_spec(SPEC + 'backend = "added"\nmax_events_per_run = 4\n', "s.toml")
    assert exp.measure.backend == "added" and isinstance(registry.make_backend(exp.measure), _Added)
    with pytest.raises(SpecError, match=r"measure.max_events_per_run: is read by the added backend, not 'time'; "
                                        r'set backend = "added" or remove max_events_per_run'):
        parse_spec(SPEC + "max_events_per_run = 4\n", "s.toml")


def test_without_it_the_key_is_any_backends(added, monkeypatch):
    monkeypatch.delitem(registry.BACKENDS, "added")
    assert parse_spec(SPEC + "max_events_per_run = 4\n", "s.toml").measure.max_events_per_run == 4
    with pytest.raises(SpecError, match="measure.backend: unknown value 'added'"):
        parse_spec(SPEC + 'backend = "added"\n', "s.toml")


def test_the_report_and_the_analysis_ask_the_backend(added):
    from perfab.report.text import _counted

    class Stored:  # the two fields _counted reads of an Analysis
        backend, groups = "added", ((),)

    assert _counted(Stored()) == "the added backend's readings"
    assert registry.BACKENDS["perf"].describe((("cycles", "instructions"), ("branches",))) == \
        "perf stat, one group per run: cycles,instructions | branches"


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
        if (ROOT / "run" / "backends") in path.parents:
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
