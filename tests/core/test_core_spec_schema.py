"""The schema is the spec's one source: its typed defaults are what the reader fills in, each backend's keys
are refused under another backend, and a derived experiment's source reads back as the experiment."""

from __future__ import annotations

import dataclasses

import pytest

from core_helpers import REPO
from perfab.errors import SpecError
from perfab.specfile import parse_spec
from perfab.specfile.kinds import Sub, Subs
from perfab.specfile.schema import REQUIRED, TABLES, keys_by_backend

EXAMPLES = sorted(p for p in (REPO / "examples").rglob("*.toml"))


def two_sides(experiment: str = "", variants: str = '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n',
              extra: str = "") -> str:
    """A small valid spec with sides a and b, a workload w, and ``extra`` after it."""
    return (f'[experiment]\nname = "t"\nruns = 2\nwarmup = 0\n{experiment}\n\n{variants}\n'
            f'[[workload]]\nname = "w"\nargv = ["true"]\n{extra}')


FULL = two_sides(extra='\n[workload.service]\nargv = ["true"]\n\n[[workload.metric]]\nname = "m"\n') + \
    '\n[[variant]]\nname = "k"\n'  # a third side, with nothing set


def _objects(exp) -> dict[str, object]:
    """One dataclass per schema table, read from a spec that sets none of their optional keys."""
    return {"experiment": exp, "variant": exp.variants[2], "workload": exp.workloads[0],
            "workload.service": exp.workloads[0].service, "workload.metric": exp.workloads[0].metrics[0],
            "measure": exp.measure}


@pytest.mark.parametrize("table", ["experiment", "variant", "workload", "workload.service", "workload.metric",
                                   "measure"])
def test_an_absent_key_gets_the_schema_default(table):
    """Every key left out is filled with the schema's typed default, nothing else (one source of defaults)."""
    exp = parse_spec(FULL.replace("runs = 2\n", "").replace("warmup = 0\n", ""), "full.toml")
    obj = _objects(exp)[table]
    written = {"experiment": {"name", "baseline", "runs", "min_runs", "max_runs", "stop_on", "spending",
                              "layout_builds"},
               "variant": {"name"}, "workload": {"name", "argv"}, "workload.service": {"argv"},
               "workload.metric": {"name", "direction"}, "measure": set()}[table]
    checked = 0
    for key in TABLES[table]:
        if key.name in written or key.default is REQUIRED or isinstance(key.value, (Sub, Subs)):
            continue
        assert getattr(obj, key.attr) == key.default, (table, key.name)
        checked += 1
    assert checked >= 3


def test_runs_auto_takes_the_design_defaults():
    """``runs = "auto"`` alone gets the schema's min_runs, max_runs, stop_on and spending, and runs = max_runs."""
    exp = parse_spec(two_sides().replace("runs = 2", 'runs = "auto"'), "auto.toml")
    defaults = {k.name: k.default for k in TABLES["experiment"]}
    design = dataclasses.asdict(exp.sequential)
    assert design == {name: defaults[name] for name in ("min_runs", "max_runs", "stop_on", "spending")}
    assert exp.runs == defaults["max_runs"]


def test_a_default_shown_in_the_reference_is_the_typed_one():
    """The README's default column renders the typed default unless the key names a later resolution."""
    timeout = next(k for k in TABLES["workload"] if k.name == "timeout")
    assert (timeout.default, timeout.default_text()) == (600.0, "600")
    margin = next(k for k in TABLES["workload.metric"] if k.name == "margin")
    assert (margin.default, margin.default_text()) == (None, "experiment.margin")


@pytest.mark.parametrize("backend", [b for b, entry in keys_by_backend().items() if entry.keys])
def test_a_backends_own_key_is_refused_under_another(backend):
    """Each key a backend declares is refused under the time backend, naming that backend and the fix."""
    for key in keys_by_backend()[backend].keys:
        value = {"integer": "2", "boolean": "true"}.get(key.kind, '"x"' if key.kind == "string" else '["x"]')
        if key.name == "accel":
            value = '"tcg"'
        text = two_sides(extra=f"\n[measure]\n{key.name} = {value}\n")
        with pytest.raises(SpecError) as e:
            parse_spec(text, "b.toml")
        assert f"measure.{key.name}:" in str(e.value) and f"the {backend} backend" in str(e.value), str(e.value)
        assert f'backend = "{backend}"' in str(e.value)


def test_guest_with_cache_sim_reads_the_cachegrind_geometry():
    """A key another backend borrows under a condition is accepted there, and only under it."""
    kernel = '\n[variant.kernel]\nimage = "/boot/x"\n'
    sides = f'[[variant]]\nname = "a"\n{kernel}\n[[variant]]\nname = "b"\n{kernel}'
    text = two_sides(variants=sides, extra='\n[measure]\nbackend = "guest"\nl1i = "32K,8,64"\n')
    with pytest.raises(SpecError, match="cache_sim = true"):
        parse_spec(text, "g.toml")
    exp = parse_spec(text.replace('l1i = "32K,8,64"', 'cache_sim = true\nl1i = "32K,8,64"'), "g.toml")
    assert (exp.measure.cache_sim, exp.measure.l1i) == (True, "32K,8,64")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_a_derived_experiment_reads_back_from_its_source(path):
    """``derive`` writes its source from the typed values: reading that text gives the same experiment."""
    exp = parse_spec(path.read_text(), str(path))
    derived = exp.derive(name=f"{exp.name}-d", path="derived.toml")
    assert derived.source != exp.source and derived.spec_hash != exp.spec_hash
    again = parse_spec(derived.source, "derived.toml")
    assert dataclasses.replace(again, source="") == dataclasses.replace(derived, source="")
    assert again.name == f"{exp.name}-d" and again.variants == exp.variants and again.workloads == exp.workloads


def test_derive_checks_across_keys_and_moves_a_lost_baseline():
    """New sides are checked (a repeated name is refused); a baseline no longer among them becomes the first."""
    exp = parse_spec(two_sides(experiment='baseline = "b"'), "d.toml")
    a, b = exp.variants
    with pytest.raises(SpecError, match=r"d.toml: variant.name: a name is used twice"):
        exp.derive(variants=(a, a))
    assert exp.derive(variants=(a, dataclasses.replace(b, name="c"))).baseline == "a"
    assert exp.derive(variants=(b, a)).baseline == "b"
    swept = exp.derive(workloads=(dataclasses.replace(exp.workloads[0], params=(("n", ("1", "2")),)),))
    with pytest.raises(SpecError, match=r"variant 'a' also sets vars.n"):
        swept.derive(variants=(dataclasses.replace(a, vars={"n": "1"}), b))


def test_a_declared_backend_owns_its_keys(monkeypatch):
    """A backend registered with its own key is accepted by name, reads its key, and other backends refuse it."""
    from perfab.specfile import backends as declarations
    from perfab.specfile.kinds import Integer
    from perfab.specfile.schema import BackendKeys, Key

    rapl = dataclasses.replace(declarations.TIME, name="rapl", measure_keys=BackendKeys((
        Key("rapl_domains", Integer(1, 8), 1, "RAPL domains read."),)))
    with monkeypatch.context() as patched:
        patched.setitem(declarations.DECLARATIONS, "rapl", rapl)
        assert TABLES["measure"][-1].name == "rapl_domains"
        exp = parse_spec(two_sides(extra='\n[measure]\nbackend = "rapl"\nrapl_domains = 2\n'), "r.toml")
        assert (exp.measure.backend, exp.measure.options) == ("rapl", {"rapl_domains": 2})
        assert parse_spec(exp.derive().source, "r.toml").measure == exp.measure
        with pytest.raises(SpecError, match=r"measure.rapl_domains: is read by the rapl backend, not 'time'; "
                                            r'set backend = "rapl" or remove rapl_domains'):
            parse_spec(two_sides(extra="\n[measure]\nrapl_domains = 2\n"), "r.toml")
    with pytest.raises(SpecError, match="unknown key"):
        parse_spec(two_sides(extra="\n[measure]\nrapl_domains = 2\n"), "r.toml")


def test_the_spending_choices_are_the_functions_the_analysis_implements():
    """The schema lists the error-spending functions by name (it sits below the analysis); the analysis has
    one function for each, no more."""
    from perfab.analyse.spending import SPENDING as FUNCTIONS
    from perfab.specfile.schema import SPENDING

    assert tuple(FUNCTIONS) == SPENDING
