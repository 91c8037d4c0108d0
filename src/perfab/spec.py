"""Stage 1: the experiment spec, read from TOML into typed, validated values.

A spec names the sides to compare (``[[variant]]``), what to run on each
(``[[workload]]``), how often and in which order (``[experiment]``) and how
each run is measured (``[measure]``).  Every key is checked: an unknown key,
a wrong type or a missing required key is a ``SpecError`` naming the file,
the key and the fix.  See ``examples/default.toml`` for a complete spec.
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfab.errors import SpecError

ORDERS = ("interleaved", "alternate", "sequential", "random")
BACKENDS = ("time", "perf", "cachegrind")
FDR_METHODS = ("bh", "holm")
METHODS = ("nonparametric", "exact", "normal")


@dataclass(frozen=True)
class MetricSpec:
    """How one metric of a workload is labelled and judged."""

    name: str  # metric name as the parser or backend produces it
    unit: str | None = None  # overrides the parser's unit
    higher_is_better: bool | None = None  # None: keep the parser's / backend's direction
    margin_pct: float | None = None  # equivalence margin for `flat`; None: the experiment default
    primary: bool = False  # a `**` regression here fails `report --fail-on-regression`
    check: float | None = None  # a check metric must equal this in every run (shown `valid`)
    method: str | None = None  # statistical method override: nonparametric | exact | normal
    label: str | None = None  # row label in the report


@dataclass(frozen=True)
class Service:
    """A server started before a workload's runs and stopped by pid afterwards, always."""

    argv: tuple[str, ...]  # the server command (placeholders expanded per variant)
    port: int | None  # wait until 127.0.0.1:port accepts connections
    ready_timeout_s: float  # give up waiting after this long
    cwd: str | None  # working directory for the server


@dataclass(frozen=True)
class Workload:
    """One command run many times on every side."""

    name: str  # row-group name in the report
    argv: tuple[str, ...]  # the command; a single shell string when shell is true
    shell: bool  # run argv[0] with /bin/sh -c
    cwd: str | None  # working directory (placeholders allowed)
    timeout_s: float  # a run taking longer is killed and recorded as failed
    parser: str | None  # name of a perfab.parsers parser for the workload's output
    parser_options: dict[str, Any]  # options for that parser
    setup: tuple[str, ...]  # shell commands run once before this workload's runs
    teardown: tuple[str, ...]  # shell commands run once after, always
    service: Service | None  # a server the workload talks to
    metrics: tuple[MetricSpec, ...]  # declarations for the workload's metrics


@dataclass(frozen=True)
class Variant:
    """One side of the comparison."""

    name: str  # side name, usable as {variant} in commands
    env: dict[str, str]  # extra environment for this side's runs
    wrap: tuple[str, ...]  # argv prefix, e.g. ("taskset", "-c", "1")
    vars: dict[str, str]  # extra placeholders, e.g. {bin} -> ./build/inline
    setup: tuple[str, ...]  # shell commands run when the runner switches to this side
    teardown: tuple[str, ...]  # shell commands run when it switches away, always
    external: bool  # the side cannot be switched within a session (e.g. a booted kernel)
    detect: str | None  # shell command whose output identifies the current external side
    detect_pattern: str | None  # regex matched against detect's output


@dataclass(frozen=True)
class Measure:
    """How each run is measured."""

    backend: str  # time | perf | cachegrind
    counters: tuple[str, ...]  # perf events, e.g. ("cycles", "L1-icache-load-misses:k")
    max_events_per_run: int | None  # PMU counter budget; None: probe it
    l1i: str | None  # cachegrind geometry "size,assoc,line", None: the host's
    l1d: str | None  # cachegrind D1 geometry
    ll: str | None  # cachegrind last-level geometry
    callgrind_toggle: str | None  # measure only this function (callgrind --toggle-collect)
    profile: bool  # also sample every run with perf record and compare per-symbol self time
    profile_event: str | None  # event to sample; None: cycles with a PMU, cpu-clock without
    profile_freq: int  # samples per second


@dataclass(frozen=True)
class Experiment:
    """A whole validated spec."""

    name: str  # experiment name; the key in the results database
    runs: int  # measured runs per side and workload
    warmup: int  # unmeasured runs per side and workload, before the measured ones
    order: str  # interleaved | alternate | sequential | random
    seed: int  # seed of the randomized order
    pin: str | None  # CPU list for the workload, e.g. "2" or "0-1"
    max_failures: int | None  # abort when more runs than this fail; None: a quarter of the plan
    stdout_cap_bytes: int  # keep this much of each run's stdout and stderr verbatim
    alpha: float  # false discovery rate target for `**`
    confidence: float  # confidence level of the reported intervals
    fdr: str  # bh | holm
    margin_pct: float  # default equivalence margin for `flat`, in percent
    method: str  # default statistical method
    baseline: str  # name of the baseline variant
    variants: tuple[Variant, ...]  # two or more sides
    workloads: tuple[Workload, ...]  # one or more workloads
    measure: Measure  # how runs are measured
    source: str  # the spec's text, stored with every session
    path: str  # where the spec was read from

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise SpecError(f"{self.path}: no variant named {name!r}; known: {', '.join(v.name for v in self.variants)}")

    @property
    def spec_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> Experiment:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise SpecError(f"{p}: no such spec file; pass the path of an experiment TOML (see examples/default.toml)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read the spec ({e}); check the path and that it is a UTF-8 text file") from None
    return parse_spec(text, str(p))


def parse_spec(text: str, path: str = "<spec>") -> Experiment:
    """Validate spec text; ``path`` is used in error messages."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: malformed TOML: {e}; fix the syntax at that line") from None
    return _Reader(path).experiment(doc, text)


class _Reader:
    """Typed access to TOML tables; each error names the file and the dotted key."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, problem: str, fix: str) -> SpecError:
        return SpecError(f"{self.path}: {key}: {problem}; {fix}")

    def check_keys(self, table: dict, where: str, allowed: set[str], required: set[str] = frozenset()) -> None:
        if not isinstance(table, dict):
            raise self.fail(where, f"expected a table, got {_TOML_NAMES.get(type(table), type(table).__name__)} {table!r}",
                            f"write it as [{where.split('[')[0]}] with key = value lines")
        for k in table:
            if k not in allowed:
                raise self.fail(f"{where}.{k}" if where else k, "unknown key",
                                f"remove it or use one of: {', '.join(sorted(allowed))}")
        for k in sorted(required - set(table)):
            raise self.fail(f"{where}.{k}" if where else k, "missing", "add it")

    def get(self, table: dict, where: str, key: str, types: type | tuple, default: Any = None) -> Any:
        if key not in table:
            return default
        value = table[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _tuple(types))
        if not ok:
            names = " or ".join(_TOML_NAMES.get(t, t.__name__) for t in _tuple(types))
            got = _TOML_NAMES.get(type(value), type(value).__name__)
            raise self.fail(f"{where}.{key}" if where else key, f"expected {names}, got {got} {value!r}",
                            f"write it as a TOML {names}")
        return value

    def strings(self, table: dict, where: str, key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", f"expected a list of strings, got {value!r}",
                            'write it as ["a", "b"]')
        return tuple(value)

    def str_map(self, table: dict, where: str, key: str) -> dict[str, str]:
        value = self.get(table, where, key, dict, {})
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise self.fail(f"{where}.{key}.{k}", f"expected a string, got {v!r}", "quote the value")
            out[k] = str(v)
        return out

    def positive(self, table: dict, where: str, key: str, default: float, types=(int, float), minimum=0) -> Any:
        value = self.get(table, where, key, types, default)
        if value is not None and not math.isfinite(value):
            raise self.fail(f"{where}.{key}", f"must be a finite number, got {value}", "write a plain number")
        if value is not None and value < minimum:
            raise self.fail(f"{where}.{key}", f"must be >= {minimum}, got {value}", f"use a value >= {minimum}")
        return value

    def choice(self, table: dict, where: str, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(table, where, key, str, default)
        if value not in choices:
            raise self.fail(f"{where}.{key}", f"unknown value {value!r}", f"use one of: {', '.join(choices)}")
        return value

    # -- tables -------------------------------------------------------------

    def experiment(self, doc: dict, text: str) -> Experiment:
        self.check_keys(doc, "", {"experiment", "variant", "workload", "measure"}, {"experiment", "variant", "workload"})
        e = self.get(doc, "", "experiment", dict)
        w = "experiment"
        self.check_keys(e, w, {"name", "runs", "warmup", "order", "seed", "pin", "max_failures", "stdout_cap",
                               "alpha", "confidence", "fdr", "margin", "method", "baseline"}, {"name"})
        variants = self.variants(doc)
        baseline = self.get(e, w, "baseline", str, variants[0].name)
        if baseline not in {v.name for v in variants}:
            raise self.fail("experiment.baseline", f"no variant named {baseline!r}",
                            f"use one of: {', '.join(v.name for v in variants)}")
        alpha = self.get(e, w, "alpha", float, 0.05)
        confidence = self.get(e, w, "confidence", float, 0.95)
        for key, value in (("alpha", alpha), ("confidence", confidence)):
            if not 0 < value < 1:
                raise self.fail(f"experiment.{key}", f"must lie strictly between 0 and 1, got {value}",
                                "e.g. alpha = 0.05, confidence = 0.95")
        pin = self.get(e, w, "pin", (str, int))
        return Experiment(
            name=self.name(e, w),
            runs=self.positive(e, w, "runs", 20, int, 1),
            warmup=self.positive(e, w, "warmup", 1, int, 0),
            order=self.choice(e, w, "order", ORDERS, "interleaved"),
            seed=self.get(e, w, "seed", int, 1),
            pin=None if pin is None else self.cpu_list(str(pin)),
            max_failures=self.positive(e, w, "max_failures", None, int, 0),
            stdout_cap_bytes=self.positive(e, w, "stdout_cap", 65536, int, 0),
            alpha=alpha,
            confidence=confidence,
            fdr=self.choice(e, w, "fdr", FDR_METHODS, "bh"),
            margin_pct=self.positive(e, w, "margin", 0.1),
            method=self.choice(e, w, "method", METHODS, "nonparametric"),
            baseline=baseline,
            variants=variants,
            workloads=self.workloads(doc),
            measure=self.measure(doc.get("measure", {})),
            source=text,
            path=self.path,
        )

    def name(self, table: dict, where: str) -> str:
        name = self.get(table, where, "name", str)
        if name is None or not re.fullmatch(r"[A-Za-z0-9_.+-][A-Za-z0-9_.+ -]*", name):
            raise self.fail(f"{where}.name", f"{name!r} is not a usable name",
                            "use letters, digits, '_', '-', '.', '+' and spaces")
        return name

    def cpu_list(self, value: str) -> str:
        if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
            raise self.fail("experiment.pin", f"{value!r} is not a CPU list", 'write it like "2" or "0-1,3"')
        return value

    def variants(self, doc: dict) -> tuple[Variant, ...]:
        tables = self.get(doc, "", "variant", list)
        if not tables or len(tables) < 2:
            raise self.fail("variant", "need at least two [[variant]] tables", "add a baseline and an experiment side")
        out = []
        for i, t in enumerate(tables):
            w = f"variant[{i}]"
            self.check_keys(t, w, {"name", "env", "wrap", "vars", "setup", "teardown", "external", "detect",
                                   "detect_pattern"}, {"name"})
            external = self.get(t, w, "external", bool, False)
            detect = self.get(t, w, "detect", str)
            pattern = self.get(t, w, "detect_pattern", str)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise self.fail(f"{w}.detect_pattern", f"bad regex ({e})", "fix the pattern") from None
            if detect and not pattern:
                raise self.fail(f"{w}.detect_pattern", "missing", "add the regex that detect's output must match")
            out.append(Variant(self.name(t, w), self.str_map(t, w, "env"), self.strings(t, w, "wrap"),
                               self.str_map(t, w, "vars"), self.strings(t, w, "setup"),
                               self.strings(t, w, "teardown"), external, detect, pattern))
        self.unique([v.name for v in out], "variant")
        if any(v.external for v in out) and not all(v.external for v in out):
            raise self.fail("variant.external", "some sides are external and some are not",
                            "mark every side external = true (e.g. two booted kernels) or none")
        return tuple(out)

    def unique(self, names: list[str], where: str) -> None:
        seen = set()
        for n in names:
            if n in seen:
                raise self.fail(f"{where}.name", f"{n!r} is used twice", "give each one a distinct name")
            seen.add(n)

    def workloads(self, doc: dict) -> tuple[Workload, ...]:
        tables = self.get(doc, "", "workload", list)
        if not tables:
            raise self.fail("workload", "need at least one [[workload]] table", "add the command to measure")
        out = [self.workload(t, f"workload[{i}]") for i, t in enumerate(tables)]
        self.unique([w.name for w in out], "workload")
        return tuple(out)

    def workload(self, t: dict, w: str) -> Workload:
        self.check_keys(t, w, {"name", "argv", "shell", "cwd", "timeout", "parser", "parser_options", "setup",
                               "teardown", "service", "metric"}, {"name", "argv"})
        shell = self.get(t, w, "shell", bool, False)
        argv = t["argv"]
        if isinstance(argv, str):
            if not shell:
                raise self.fail(f"{w}.argv", "a string command needs shell = true",
                                'write argv as a list ["prog", "arg"] or add shell = true')
            argv = (argv,)
        else:
            argv = self.strings(t, w, "argv")
            if not argv:
                raise self.fail(f"{w}.argv", "is empty", "name the program to run")
            if shell:
                raise self.fail(f"{w}.argv", "shell = true takes one command string", 'write argv = "cmd | cmd"')
        service = None
        if "service" in t:
            service = self.service(self.get(t, w, "service", dict), f"{w}.service")
        metrics = tuple(self.metric(m, f"{w}.metric[{j}]") for j, m in enumerate(self.get(t, w, "metric", list, [])))
        self.unique([m.name for m in metrics], f"{w}.metric")
        return Workload(self.name(t, w), tuple(argv), shell, self.get(t, w, "cwd", str),
                        self.positive(t, w, "timeout", 600.0, (int, float), 0.001), self.get(t, w, "parser", str),
                        self.get(t, w, "parser_options", dict, {}), self.strings(t, w, "setup"),
                        self.strings(t, w, "teardown"), service, metrics)

    def service(self, t: dict, w: str) -> Service:
        self.check_keys(t, w, {"argv", "port", "ready_timeout", "cwd"}, {"argv"})
        argv = self.strings(t, w, "argv")
        if not argv:
            raise self.fail(f"{w}.argv", "is empty", "name the server program")
        port = self.get(t, w, "port", int)
        if port is not None and not 0 < port < 65536:
            raise self.fail(f"{w}.port", f"{port} is not a TCP port", "use 1..65535")
        return Service(argv, port, float(self.positive(t, w, "ready_timeout", 10.0)), self.get(t, w, "cwd", str))

    def metric(self, t: dict, w: str) -> MetricSpec:
        if not isinstance(t, dict):
            raise self.fail(w, "expected a table", "write [[workload.metric]] tables")
        self.check_keys(t, w, {"name", "unit", "direction", "margin", "primary", "check", "method", "label"},
                        {"name"})
        direction = self.get(t, w, "direction", str)
        if direction not in (None, "higher", "lower", "none"):
            raise self.fail(f"{w}.direction", f"unknown value {direction!r}", 'use "higher", "lower" or "none"')
        method = self.get(t, w, "method", str)
        if method is not None and method not in METHODS:
            raise self.fail(f"{w}.method", f"unknown method {method!r}", f"use one of: {', '.join(METHODS)}")
        check = self.get(t, w, "check", (int, float))
        return MetricSpec(self.get(t, w, "name", str), self.get(t, w, "unit", str),
                          {"higher": True, "lower": False, "none": None, None: None}[direction],
                          self.positive(t, w, "margin", None), self.get(t, w, "primary", bool, False),
                          None if check is None else float(check), method, self.get(t, w, "label", str))

    def measure(self, t: dict) -> Measure:
        w = "measure"
        if not isinstance(t, dict):
            raise self.fail(w, "expected a table", "write [measure]")
        self.check_keys(t, w, {"backend", "counters", "max_events_per_run", "l1i", "l1d", "ll", "callgrind_toggle",
                               "profile", "profile_event", "profile_freq"})
        backend = self.choice(t, w, "backend", BACKENDS, "time")
        counters = self.strings(t, w, "counters")
        if backend == "perf" and not counters:
            raise self.fail("measure.counters", "the perf backend needs events to count",
                            'add counters = ["task-clock", "context-switches"] or use backend = "time"')
        if counters and backend != "perf":
            raise self.fail("measure.counters", f"counters are read by the perf backend, not {backend!r}",
                            'set backend = "perf" or remove counters')
        return Measure(backend, counters, self.positive(t, w, "max_events_per_run", None, int, 1),
                       self.get(t, w, "l1i", str), self.get(t, w, "l1d", str), self.get(t, w, "ll", str),
                       self.get(t, w, "callgrind_toggle", str), self.get(t, w, "profile", bool, False),
                       self.get(t, w, "profile_event", str), self.positive(t, w, "profile_freq", 999, int, 1))


_TOML_NAMES = {dict: "table", list: "array", str: "string", int: "integer", float: "float", bool: "boolean"}


def _tuple(types: type | tuple) -> tuple:
    return types if isinstance(types, tuple) else (types,)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(template: str, values: dict[str, str], where: str = "command") -> str:
    """Replace ``{name}`` placeholders; ``{{`` and ``}}`` stay literal braces."""
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key not in values:
            raise SpecError(f"{where}: unknown placeholder {{{key}}}; known: "
                            f"{', '.join('{' + k + '}' for k in sorted(values))}")
        return values[key]

    parts = template.split("{{")
    return "{".join(_PLACEHOLDER.sub(sub, p).replace("}}", "}") for p in parts)


def placeholders(exp: Experiment, variant: Variant, workload: Workload) -> dict[str, str]:
    """The values ``{variant}``, ``{workload}``, ``{experiment}`` and the side's own vars."""
    values = {"variant": variant.name, "workload": workload.name, "experiment": exp.name}
    values.update(variant.vars)
    return values

