"""Reading a spec: one loop over the schema's tables, then small named checks across keys.

``read_table`` is the whole reader: for each key of a table's schema it
checks the value with the key's kind (or takes the typed default), recurses
into sub-tables, runs the table's cross-key rules (``perfab.specfile.rules``)
and builds the table's dataclass.  Every refusal names the file and the
dotted key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any, Callable

from perfab.errors import SpecError
from perfab.specfile import Experiment, Kernel, Measure, MetricSpec, Sequential, Service, Variant, Workload, rules
from perfab.specfile.kinds import At, Sub, Subs, toml_name, typed
from perfab.specfile.schema import DOCUMENT, REQUIRED, TABLES, Key


def read(text: str, path: str) -> Experiment:
    """The validated experiment of spec ``text`` (``path`` names it in errors)."""
    doc = load_toml(text, path)
    at = At(path, "")
    rules.no_nul(doc, at)
    values = read_keys(doc, at, DOCUMENT)
    return experiment(values, text, at)


def load_toml(text: str, path: str) -> dict[str, Any]:
    """The TOML document of spec ``text``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: malformed TOML: {e}; fix the syntax at that line") from None
    except RecursionError:
        raise SpecError(f"{path}: arrays or tables nested too deeply to read; flatten them") from None


def read_keys(t: dict, at: At, keys: tuple[Key, ...]) -> dict[str, Any]:
    """Each key's typed value (or default), by dataclass field; unknown and missing keys refused."""
    names, needed, order = _layout(keys)
    for name in t:
        if name not in names:
            raise at.child(name).fail("unknown key", f"remove it or use one of: {', '.join(sorted(names))}")
    for name in needed:
        if name not in t:
            raise at.child(name).fail("missing", "add it")
    return {attr: value(k, t[name], at.child(name)) if name in t else absent(k, at) for name, attr, k in order}


_LAYOUTS: dict[int, tuple] = {}  # id of a key tuple -> (its names, its required names sorted, (name, field, key)s)


def _layout(keys: tuple[Key, ...]) -> tuple[frozenset[str], tuple[str, ...], tuple[tuple[str, str, Key], ...]]:
    """What ``read_keys`` needs of a table's keys, worked out once per table."""
    layout = _LAYOUTS.get(id(keys))
    if layout is None or layout[3] is not keys:
        layout = (frozenset(k.name for k in keys), tuple(sorted(k.name for k in keys if k.default is REQUIRED)),
                  tuple((k.name, k.attr, k) for k in keys), keys)
        _LAYOUTS[id(keys)] = layout
    return layout[:3]


def value(key: Key, raw: Any, at: At) -> Any:
    """The typed value of ``key`` as written."""
    kind = key.value
    if isinstance(kind, Sub):
        if not isinstance(raw, dict) and kind.not_table is not None:
            raise at.fail(*kind.not_table)
        return read_table(typed(raw, at, (dict,)), at, kind.table)
    if isinstance(kind, Subs):
        return tables(typed(raw, at, (list,)), at, kind)
    return kind.read(raw, at)


def absent(key: Key, table: At) -> Any:
    """The typed default of a key absent from ``table`` (a fresh copy of a mutable one; a sub-table read empty)."""
    default = key.default
    if type(default) is dict:
        return read_table({}, table.child(key.name), key.value.table) if isinstance(key.value, Sub) else dict(default)
    return default


def tables(raw: list, at: At, kind: Subs) -> tuple:
    """An array of tables of one schema, each name used once."""
    if not raw and kind.empty is not None:
        raise at.fail(*kind.empty)
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            problem, fix = kind.element or (f"expected a table, got {toml_name(t)} {t!r}",
                                            f"write it as [[{kind.table}]] with key = value lines")
            raise at.item(i).fail(problem, fix)
        out.append(read_table(t, at.item(i), kind.table))
    seen: set[str] = set()
    for name in (x.name for x in out):
        if name in seen:
            raise at.child("name").fail(f"{name!r} is used twice", "give each one a distinct name")
        seen.add(name)
    return tuple(out)


def read_table(t: dict, at: At, table: str) -> Any:
    """Table ``t`` of schema ``table``: checked before, read key by key, checked across keys, built."""
    for rule in rules.BEFORE.get(table, ()):
        rule(t, at)
    values = read_keys(t, at, TABLES[table])
    for rule in rules.AFTER.get(table, ()):
        rule(t, values, at)
    return BUILD[table](values)


def _metric(values: dict[str, Any]) -> MetricSpec:
    """A metric declaration: ``direction`` becomes higher_is_better and no_direction."""
    direction = values.pop("direction")
    return MetricSpec(**values, higher_is_better={"higher": True, "lower": False}.get(direction),
                      no_direction=direction == "none")


def _kernel(values: dict[str, Any]) -> Kernel:
    """A side's kernel: config option names without their ``CONFIG_`` prefix."""
    values["config"] = tuple((name.removeprefix("CONFIG_"), v) for name, v in values["config"])
    return Kernel(**values)


def _measure(values: dict[str, Any]) -> Measure:
    """``[measure]``: a declared backend's keys without a field of their own go to ``options``."""
    fields = {f.name for f in dataclasses.fields(Measure)}
    return Measure(**{k: v for k, v in values.items() if k in fields},
                   options={k: v for k, v in values.items() if k not in fields})


BUILD: dict[str, Callable[[dict[str, Any]], Any]] = {
    "experiment": dict,  # completed with the other tables by ``experiment``
    "variant": lambda values: Variant(**values),
    "variant.kernel": _kernel,
    "workload": lambda values: Workload(**values),
    "workload.service": lambda values: Service(**values),
    "workload.metric": _metric,
    "measure": _measure,
}


def experiment(values: dict[str, Any], text: str, at: At) -> Experiment:
    """The whole experiment from its four tables, checked across them."""
    e = dict(values["experiment"])
    design = {name: e.pop(name) for name in ("min_runs", "max_runs", "stop_on", "spending")}
    sequential = Sequential(**design) if e["runs"] == "auto" else None
    if sequential is not None:
        e["runs"] = sequential.max_runs
    e["baseline"] = rules.baseline(e["baseline"], values["variants"], at)
    if e["layout_builds"] is None:
        e["layout_builds"] = rules.default_layout_builds(e, values["variants"], values["measure"], sequential)
    e["layout_builds"] = min(e["layout_builds"], e["runs"])  # a build without a run is no sample
    exp = Experiment(**e, variants=values["variants"], workloads=values["workloads"], measure=values["measure"],
                     source=text, path=at.path, sequential=sequential)
    for rule in rules.ACROSS:
        rule(exp, at)
    return exp


def derived(exp: Experiment, changes: dict[str, Any]) -> Experiment:
    """``exp`` with ``changes``, checked across keys, its source the spec written out (``Experiment.derive``)."""
    from perfab.specfile.writer import dump

    at = At(changes.get("path", exp.path), "")
    for table, items in (("variant", changes.get("variants", ())), ("workload", changes.get("workloads", ()))):
        names = [x.name for x in items]
        if len(set(names)) != len(names):
            raise at.child(table).child("name").fail("a name is used twice", "give each one a distinct name")
    variants = changes.get("variants", exp.variants)
    if "baseline" not in changes and exp.baseline not in {v.name for v in variants}:
        changes = {**changes, "baseline": variants[0].name}
    new = dataclasses.replace(exp, **changes)
    rules.baseline(new.baseline, new.variants, at)
    for rule in rules.ACROSS:
        rule(new, at)
    return dataclasses.replace(new, source=dump(new))
