"""Reading a spec: typed access to TOML tables, each error naming the file and the dotted key."""

from __future__ import annotations

import math
import os
import re
import tomllib
from typing import Any

from perfab.errors import SpecError, UsageError
from perfab.spec import Experiment, Kernel, Measure, MetricSpec, Sequential, Service, Variant, Workload
from perfab.spec.schema import (ACCELS, DIRECTIONS, FDR_METHODS, MAX_PLAN, MAX_RUNS, MAX_SWEEP_POINTS,
                                MAX_WARMUP, METHODS, ORDERS, TOP_LEVEL, allowed, required)

_TOML_NAMES = {dict: "table", list: "array", str: "string", int: "integer", float: "float", bool: "boolean"}
_NAME = re.compile(r"[A-Za-z0-9_.+-][A-Za-z0-9_.+ -]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RESERVED_PARAMS = {"variant", "workload", "experiment", "metric", "value", "run_id", "seq", "warmup", "src", "build"}
_KCONFIG = re.compile(r"[A-Z0-9_]+")
MAX_CPU = 8191  # sched_setaffinity masks perfab builds
MAX_PERCENT = 10_000  # "N%" sweep values: at most 100 times the online CPUs


def _backends():
    """The registry of measurement backends, which declare the ``[measure]`` keys they read.

    The backends live with the runner, a layer above the spec; the registry
    is loaded when a spec is read, so that the spec layer imports nothing above it.
    """
    from perfab.run import backends

    return backends


def read(text: str, path: str) -> Experiment:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: malformed TOML: {e}; fix the syntax at that line") from None
    except RecursionError:
        raise SpecError(f"{path}: arrays or tables nested too deeply to read; flatten them") from None
    reader = _Reader(path)
    reader.no_nul(doc, "")
    return reader.experiment(doc, text)


class _Reader:
    """Typed access to TOML tables; each error names the file and the dotted key."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, problem: str, fix: str) -> SpecError:
        return SpecError(f"{self.path}: {key}: {problem}; {fix}")

    def no_nul(self, value: Any, where: str) -> None:
        """Strings with NUL bytes cannot reach exec(2) or a shell: refused wherever they are."""
        if isinstance(value, str) and "\0" in value:
            raise self.fail(where or "spec", "contains a NUL byte (\\u0000)", "remove it: commands cannot carry NUL")
        if isinstance(value, dict):
            for k, v in value.items():
                if "\0" in k:
                    raise self.fail(f"{where}.{k!r}" if where else repr(k), "key contains a NUL byte", "rename it")
                self.no_nul(v, f"{where}.{k}" if where else k)
        if isinstance(value, list):
            for i, v in enumerate(value):
                self.no_nul(v, f"{where}[{i}]")

    def check_keys(self, table: dict, where: str, schema: str) -> None:
        if not isinstance(table, dict):
            head = where.split("[")[0]
            head = f"[[{head}]]" if "[" in where else f"[{head}]"  # an element of an array of tables
            raise self.fail(where, f"expected a table, got {_TOML_NAMES.get(type(table), type(table).__name__)} {table!r}",
                            f"write it as {head} with key = value lines")
        keys = allowed(schema)
        for k in table:
            if k not in keys:
                raise self.fail(f"{where}.{k}" if where else k, "unknown key",
                                f"remove it or use one of: {', '.join(sorted(keys))}")
        for k in sorted(required(schema) - set(table)):
            raise self.fail(f"{where}.{k}" if where else k, "missing", "add it")

    def get(self, table: dict, where: str, key: str, types: type | tuple, default: Any = None) -> Any:
        if key not in table:
            return default
        value = table[key]
        kinds = types if isinstance(types, tuple) else (types,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok:
            names = " or ".join(_TOML_NAMES.get(t, t.__name__) for t in kinds)
            got = _TOML_NAMES.get(type(value), type(value).__name__)
            raise self.fail(f"{where}.{key}" if where else key, f"expected {names}, got {got} {value!r}",
                            f"write it as a TOML {names}")
        return value

    def strings(self, table: dict, where: str, key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", f"expected a list of strings, got {value!r}", 'write it as ["a", "b"]')
        return tuple(value)

    def str_map(self, table: dict, where: str, key: str) -> dict[str, str]:
        value = self.get(table, where, key, dict, {})
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise self.fail(f"{where}.{key}.{k}", f"expected a string, got {v!r}", "quote the value")
            out[k] = str(v)
        return out

    def env(self, table: dict, where: str) -> dict[str, str]:
        env = self.str_map(table, where, "env")
        for name in env:
            if not name or "=" in name:
                raise self.fail(f"{where}.env", f"{name!r} is not an environment variable name",
                                "use a non-empty name without '='")
        return env

    def number(self, table: dict, where: str, key: str, default: Any, types=(int, float), minimum=0,
               maximum=None) -> Any:
        value = self.get(table, where, key, types, default)
        if value is not None and not math.isfinite(value):
            raise self.fail(f"{where}.{key}", f"must be a finite number, got {value}", "write a plain number")
        if value is not None and value < minimum:
            raise self.fail(f"{where}.{key}", f"must be >= {minimum}, got {value}", f"use a value >= {minimum}")
        if value is not None and maximum is not None and value > maximum:
            raise self.fail(f"{where}.{key}", f"must be <= {maximum:,}, got {value:,}", f"use a value <= {maximum:,}")
        return value

    def _build_timeout(self, e: dict, w: str) -> float:
        """``experiment.build_timeout``: seconds, more than 0 (a build given no time cannot run)."""
        value = float(self.number(e, w, "build_timeout", 3600.0, maximum=7 * 86400))
        if value == 0:
            raise self.fail(f"{w}.build_timeout", "must be > 0, got 0",
                            "give the seconds a build may take (default 3600)")
        return value

    def choice(self, table: dict, where: str, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(table, where, key, str, default)
        if value not in choices:
            raise self.fail(f"{where}.{key}", f"unknown value {value!r}", f"use one of: {', '.join(choices)}")
        return value

    def name(self, table: dict, where: str) -> str:
        name = self.get(table, where, "name", str)
        if name is None or not _NAME.fullmatch(name):
            raise self.fail(f"{where}.name", f"{name!r} is not a usable name",
                            "use letters, digits, '_', '-', '.', '+' and spaces")
        return name

    def unique(self, names: list[str], where: str) -> None:
        seen = set()
        for n in names:
            if n in seen:
                raise self.fail(f"{where}.name", f"{n!r} is used twice", "give each one a distinct name")
            seen.add(n)

    # -- tables -------------------------------------------------------------

    def experiment(self, doc: dict, text: str) -> Experiment:
        for k in doc:
            if k not in TOP_LEVEL:
                raise self.fail(k, "unknown key", f"remove it or use one of: {', '.join(sorted(TOP_LEVEL))}")
        for k in ("experiment", "variant", "workload"):
            if k not in doc:
                raise self.fail(k, "missing", "add it")
        e = self.get(doc, "", "experiment", dict)
        w = "experiment"
        self.check_keys(e, w, "experiment")
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
        sequential = self.sequential(e, w)
        exp = Experiment(
            name=self.name(e, w),
            runs=sequential.max_runs if sequential else self.number(e, w, "runs", 20, int, 1, MAX_RUNS),
            warmup=self.number(e, w, "warmup", 1, int, 0, MAX_WARMUP),
            order=self.choice(e, w, "order", ORDERS, "interleaved"),
            seed=self.number(e, w, "seed", 1, int, -(2 ** 63), 2 ** 63 - 1),
            pin=None if pin is None else self.cpu_list(str(pin)),
            max_failures=self.number(e, w, "max_failures", None, int, 0, MAX_PLAN),
            stdout_cap_bytes=self.number(e, w, "stdout_cap", 65536, int, 0, 1 << 30),
            alpha=alpha,
            confidence=confidence,
            fdr=self.choice(e, w, "fdr", FDR_METHODS, "bh"),
            margin_pct=self.number(e, w, "margin", 0.1, maximum=1000),
            method=self.choice(e, w, "method", METHODS, "nonparametric"),
            baseline=baseline,
            variants=variants,
            workloads=self.workloads(doc),
            measure=self.measure(doc.get("measure", {})),
            source=text,
            path=self.path,
            build=self.strings(e, w, "build"),
            repo=self.get(e, w, "repo", str),
            build_timeout_s=self._build_timeout(e, w),
            sequential=sequential,
        )
        self.plan_size(exp)
        self.kernel_sides(exp)
        self.no_shadowed_params(exp)
        self.service_counters(exp)
        return exp

    def service_counters(self, exp: Experiment) -> None:
        """``service.counters`` asks for a backend that counts a service."""
        if _backends().declared(exp.measure.backend).counts_service:
            return
        for i, wl in enumerate(exp.workloads):
            if wl.service is not None and wl.service.counters:
                counter = next(b for b in _backends().BACKENDS.values() if b.counts_service)
                raise self.fail(f"workload[{i}].service.counters", f"counts with {counter.counts_service}",
                                f'set [measure] backend = "{counter.name}" or remove service.counters')

    def kernel_sides(self, exp: Experiment) -> None:
        """Kernel sides go with the guest backend, every side boots one, and none is external."""
        kernels = [v.kernel is not None for v in exp.variants]
        guest = _backends().declared(exp.measure.backend).boots_kernels
        if any(kernels) and not guest:
            booter = next(b for b in _backends().BACKENDS.values() if b.boots_kernels)
            raise self.fail("measure.backend", "sides with a [variant.kernel] boot a guest for each run",
                            f'set [measure] backend = "{booter.name}"')
        if guest and not all(kernels):
            side = exp.variants[kernels.index(False)].name
            raise self.fail("measure.backend",
                            f'"{exp.measure.backend}" boots each side\'s kernel, and side {side!r} names none',
                            "add a [variant.kernel] table to every side (image = ... or a source to build)")
        if guest and exp.variants[0].external:
            raise self.fail("variant.external", "a kernel side is booted by perfab, not by the machine",
                            "remove external (and detect) from the kernel sides")

    def sequential(self, e: dict, w: str) -> Sequential | None:
        """``runs = "auto"`` and its keys (which mean nothing without it)."""
        keys = ("min_runs", "max_runs", "stop_on", "spending")
        if isinstance(e.get("runs"), str) and e["runs"] != "auto":
            raise self.fail(f"{w}.runs", f'expected integer or "auto", got string {e["runs"]!r}',
                            'write runs = 20 (runs per side) or runs = "auto" (lower case, a sequential experiment)')
        if e.get("runs") != "auto":
            for key in keys:
                if key in e:
                    raise self.fail(f"{w}.{key}", 'is read only with runs = "auto"',
                                    'set runs = "auto" (a sequential experiment) or remove it')
            return None
        from perfab.analyse.spending import SPENDING

        low = self.number(e, w, "min_runs", 6, int, 2, MAX_RUNS)
        high = self.number(e, w, "max_runs", 40, int, 2, MAX_RUNS)
        if high < low:
            raise self.fail(f"{w}.max_runs", f"{high} is below min_runs {low}", "raise max_runs or lower min_runs")
        if e.get("order", "interleaved") not in ("interleaved", "alternate"):
            raise self.fail(f"{w}.order", 'a sequential experiment (runs = "auto") looks after each block',
                            'use order = "interleaved" or "alternate"')
        return Sequential(low, high, self.choice(e, w, "stop_on", ("primary", "all"), "primary"),
                          self.choice(e, w, "spending", tuple(SPENDING), "pocock"))

    def no_shadowed_params(self, exp: Experiment) -> None:
        """A side's ``vars`` entry named like a sweep parameter would replace every sweep value, and a build
        (once per side) cannot use one: both refused."""
        swept = {name: (i, wl.name) for i, wl in enumerate(exp.workloads) for name, _ in wl.params}
        for name, (i, _) in swept.items():
            clash = [v.name for v in exp.variants if name in v.vars]
            if clash:
                raise self.fail(f"workload[{i}].params.{name}",
                                f"variant {clash[0]!r} also sets vars.{name}, which would replace every "
                                f"sweep value of {{{name}}}", "rename the variable or the sweep parameter")
        for v in exp.variants:
            for text in v.build or exp.build:
                for name in _PLACEHOLDER.findall(text):
                    if name in swept and name not in v.vars:
                        raise SpecError(f"{self.path}: variant {v.name!r} build: {{{name}}} is a sweep parameter "
                                        f"of workload {swept[name][1]!r}, but a side is built once, for all sweep "
                                        "points; use it in the workload's argv, or a variant's vars, instead")

    def plan_size(self, exp: Experiment) -> None:
        from perfab.plan import sweep_points

        total = sum(len(sweep_points(w)) * len(exp.variants) * (exp.runs + exp.warmup) for w in exp.workloads)
        if total > MAX_PLAN:
            raise self.fail("experiment.runs", f"the plan would hold {total:,} runs (more than {MAX_PLAN:,})",
                            "lower runs, warmup or the sweep's points")

    def cpu_list(self, value: str, key: str = "experiment.pin") -> str:
        if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
            raise self.fail(key, f"{value!r} is not a CPU list", 'write it like "2" or "0-1,3"')
        for part in value.split(","):
            lo, _, hi = part.partition("-")
            if int(lo) > MAX_CPU or int(hi or lo) > MAX_CPU:
                raise self.fail(key, f"CPU {max(int(lo), int(hi or lo))} in {value!r} is out of range",
                                f"use CPU numbers 0..{MAX_CPU}")
            if hi and int(hi) < int(lo):
                raise self.fail(key, f"range {part!r} runs backwards", f'write it as "{hi}-{lo}"')
        return value

    def variants(self, doc: dict) -> tuple[Variant, ...]:
        tables = self.get(doc, "", "variant", list)
        if not tables:
            raise self.fail("variant", "need at least one [[variant]] table (two to compare)",
                            "add a baseline and an experiment side")
        out = []
        for i, t in enumerate(tables):
            w = f"variant[{i}]"
            self.check_keys(t, w, "variant")
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
            variables = self.str_map(t, w, "vars")
            for name in variables:
                if not _IDENT.fullmatch(name) or name in _RESERVED_PARAMS:
                    raise self.fail(f"{w}.vars.{name}", "is not a usable placeholder name",
                                    "use letters, digits and '_', starting with a letter "
                                    f"(not {', '.join(sorted(_RESERVED_PARAMS))})")
            git = self.get(t, w, "git", str)
            if git is not None and (not git.strip() or git.startswith("-")):
                raise self.fail(f"{w}.git", f"{git!r} is not a git ref", 'name a branch, tag or commit, e.g. "v6.1"')
            out.append(Variant(self.name(t, w), self.env(t, w), self.strings(t, w, "wrap"), variables,
                               self.strings(t, w, "setup"), self.strings(t, w, "teardown"), external, detect, pattern,
                               git, self.strings(t, w, "build"), self.kernel(t, w)))
        self.unique([v.name for v in out], "variant")
        if any(v.external for v in out) and not all(v.external for v in out):
            raise self.fail("variant.external", "some sides are external and some are not",
                            "mark every side external = true (e.g. two booted kernels) or none")
        return tuple(out)

    def kernel(self, t: dict, w: str) -> Kernel | None:
        """A side's ``[variant.kernel]`` table: a prebuilt image, or what to build it from."""
        k = self.get(t, w, "kernel", dict)
        if k is None:
            return None
        w = f"{w}.kernel"
        self.check_keys(k, w, "variant.kernel")
        config = self.str_map(k, w, "config")
        for name, value in config.items():
            if not _KCONFIG.fullmatch(name.removeprefix("CONFIG_")):
                raise self.fail(f"{w}.config.{name}", "is not a kernel config option name",
                                'write it as in Kconfig, e.g. PARAVIRT_SPINLOCKS = "n"')
        image = self.get(k, w, "image", str)
        building = [key for key in ("source", "ref", "base", "config", "patches") if key in k]
        if image is not None and building:
            raise self.fail(f"{w}.image", f"a prebuilt image is not built: {', '.join(building)} would be ignored",
                            f"remove {building[0]} or the image")
        return Kernel(image, self.get(k, w, "symbols", str), self.get(k, w, "cmdline", str, ""),
                      self.get(k, w, "source", str), self.get(k, w, "ref", str),
                      self.get(k, w, "base", str, "tinyconfig"),
                      tuple((n.removeprefix("CONFIG_"), v) for n, v in config.items()),
                      self.strings(k, w, "patches"))

    def workloads(self, doc: dict) -> tuple[Workload, ...]:
        tables = self.get(doc, "", "workload", list)
        if not tables:
            raise self.fail("workload", "need at least one [[workload]] table", "add the command to measure")
        out = [self.workload(t, f"workload[{i}]") for i, t in enumerate(tables)]
        self.unique([w.name for w in out], "workload")
        return tuple(out)

    def workload(self, t: dict, w: str) -> Workload:
        self.check_keys(t, w, "workload")
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
            if not argv[0]:
                raise self.fail(f"{w}.argv[0]", "is an empty program name", "name the program to run")
        service = self.service(self.get(t, w, "service", dict), f"{w}.service") if "service" in t else None
        metrics = tuple(self.metric(m, f"{w}.metric[{j}]") for j, m in enumerate(self.get(t, w, "metric", list, [])))
        self.unique([m.name for m in metrics], f"{w}.metric")
        parser = self.get(t, w, "parser", str)
        options = self.get(t, w, "parser_options", dict, {})
        self.parser(parser, options, w)
        setup, teardown = self.strings(t, w, "setup"), self.strings(t, w, "teardown")
        for key, commands in (("setup", setup), ("teardown", teardown)):
            self.workload_level(commands, f"{w}.{key}")
        return Workload(self.name(t, w), tuple(argv), shell, self.get(t, w, "cwd", str),
                        self.number(t, w, "timeout", 600.0, (int, float), 0.001, 7 * 86400), parser, options,
                        setup, teardown, service, metrics, self.params(t, w))

    def workload_level(self, commands: tuple[str, ...], where: str) -> None:
        """A workload's setup/teardown runs once for all sides: side or sweep placeholders mean nothing there."""
        for command in commands:
            for name in _PLACEHOLDER.findall(command):
                if name not in ("workload", "experiment"):
                    raise self.fail(where, f"uses {{{name}}}, but it runs once for every side and sweep point",
                                    "use only {workload} and {experiment} here, or move the command to "
                                    "variant.setup (run on each switch to a side)")

    def parser(self, name: str | None, options: dict, w: str) -> None:
        if name is None:
            if options:
                raise self.fail(f"{w}.parser_options", "given without a parser", "add parser = \"...\" or remove them")
            return
        from perfab.parsers import get_parser

        try:
            get_parser(name, options)
        except UsageError as e:
            key = "parser" if "unknown parser" in str(e) else "parser_options"
            raise self.fail(f"{w}.{key}", str(e).rstrip("."), "see the Parsers section of the README") from None

    def params(self, t: dict, w: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        table = self.get(t, w, "params", dict, {})
        out = []
        for name, values in table.items():
            where = f"{w}.params.{name}"
            if not _IDENT.fullmatch(name) or name in _RESERVED_PARAMS:
                raise self.fail(where, "is not a usable parameter name",
                                f"use letters, digits and '_' (not {', '.join(sorted(_RESERVED_PARAMS))})")
            if not isinstance(values, list) or not values:
                raise self.fail(where, f"expected a non-empty array of values, got {values!r}", "e.g. [1, 2, 4]")
            resolved = tuple(self.param_value(v, where) for v in values)
            if len(set(resolved)) != len(resolved):
                raise self.fail(where, f"values {list(resolved)} repeat (after resolving percentages)",
                                "list each value once")
            out.append((name, resolved))
        points = math.prod(len(v) for _, v in out) if out else 1
        if points > MAX_SWEEP_POINTS:
            raise self.fail(f"{w}.params", f"the grid has {points:,} points (more than {MAX_SWEEP_POINTS:,})",
                            "sweep fewer values")
        return tuple(out)

    def param_value(self, value: Any, where: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise self.fail(where, f"value {value!r} is not a number or string", 'write e.g. 4 or "50%"')
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(where, f"value {value} is not finite", "write a plain number")
        if isinstance(value, str) and "%" in value:
            m = re.fullmatch(r"([0-9]{1,5}(?:\.[0-9]+)?)%", value.strip())
            if m is None or not 0 < float(m[1]) <= MAX_PERCENT:
                raise self.fail(where, f"value {value!r} is not a share of the online CPUs",
                                f'write "N%" with 0 < N <= {MAX_PERCENT:,} (e.g. "50%"), a number, or text without %')
            online = os.sysconf("SC_NPROCESSORS_ONLN")
            return str(max(1, round(float(m[1]) / 100 * online)))
        if isinstance(value, str):
            if not value or any(c in value for c in "{}\n"):
                raise self.fail(where, f"value {value!r} cannot be a placeholder value", "use plain text")
        return str(value)

    def service(self, t: dict, w: str) -> Service:
        self.check_keys(t, w, "workload.service")
        argv = self.strings(t, w, "argv")
        if not argv or not argv[0]:
            raise self.fail(f"{w}.argv", "is empty", "name the server program")
        port = self.get(t, w, "port", int)
        if port is not None and not 0 < port < 65536:
            raise self.fail(f"{w}.port", f"{port} is not a TCP port", "use 1..65535")
        counters = self.get(t, w, "counters", str)
        if counters not in (None, "pids", "cpus"):
            raise self.fail(f"{w}.counters", f"unknown value {counters!r}", 'use "pids" or "cpus"')
        cpus = self.get(t, w, "cpus", str)
        if (counters == "cpus") != (cpus is not None):
            raise self.fail(f"{w}.cpus", 'goes with counters = "cpus" (and only with it)',
                            'set both, e.g. counters = "cpus" and cpus = "1"')
        if cpus is not None:
            cpus = self.cpu_list(cpus, f"{w}.cpus")
        return Service(argv, port, float(self.number(t, w, "ready_timeout", 10.0, maximum=3600)),
                       self.get(t, w, "cwd", str), self.get(t, w, "log", str, ".perfab/logs"),
                       self.get(t, w, "requests", str), counters, cpus)

    def metric(self, t: dict, w: str) -> MetricSpec:
        if not isinstance(t, dict):
            raise self.fail(w, "expected a table", "write [[workload.metric]] tables")
        self.check_keys(t, w, "workload.metric")
        direction = self.get(t, w, "direction", str)
        if direction not in (None, *DIRECTIONS):
            raise self.fail(f"{w}.direction", f"unknown value {direction!r}", 'use "higher", "lower" or "none"')
        method = self.get(t, w, "method", str)
        if method is not None and method not in METHODS:
            raise self.fail(f"{w}.method", f"unknown method {method!r}", f"use one of: {', '.join(METHODS)}")
        check = self.get(t, w, "check", (int, float))
        if check is not None and not math.isfinite(check):
            raise self.fail(f"{w}.check", f"must be a finite number, got {check}", "write a plain number")
        return MetricSpec(self.get(t, w, "name", str), self.get(t, w, "unit", str),
                          {"higher": True, "lower": False, "none": None, None: None}[direction],
                          self.number(t, w, "margin", None, maximum=1000), self.get(t, w, "primary", bool, False),
                          None if check is None else float(check), method, self.get(t, w, "label", str),
                          direction == "none")

    def measure(self, t: dict) -> Measure:
        w = "measure"
        if not isinstance(t, dict):
            raise self.fail(w, "expected a table", "write [measure]")
        self.check_keys(t, w, "measure")
        backend = self.choice(t, w, "backend", tuple(_backends().BACKENDS), _backends().DEFAULT)
        counters = self.strings(t, w, "counters")
        self.backend_keys(t, backend)
        cache_sim = self.get(t, w, "cache_sim", bool, False)
        for key in ("l1i", "l1d", "ll"):
            geometry = self.get(t, w, key, str)
            if geometry is not None and (problem := _backends().option_problem(key, geometry)) is not None:
                raise SpecError(f"{self.path}: measure.{key}: {problem}")
        return Measure(backend, counters, self.number(t, w, "max_events_per_run", None, int, 1, 64),
                       self.get(t, w, "l1i", str), self.get(t, w, "l1d", str), self.get(t, w, "ll", str),
                       self.get(t, w, "callgrind_toggle", str), self.get(t, w, "profile", bool, False),
                       self.get(t, w, "profile_event", str), self.number(t, w, "profile_freq", 999, int, 1, 100_000),
                       self.get(t, w, "branch_sim", bool, False), self.interrupt_rows(t, w),
                       self.number(t, w, "vcpus", 1, int, 1, 64), self.number(t, w, "memory", 512, int, 64, 65536),
                       self.choice(t, w, "accel", ACCELS, "auto"), self.strings(t, w, "files"),
                       self.vmstat_rows(t, w), cache_sim)

    def backend_keys(self, t: dict, backend: str) -> None:
        """The keys ``backend`` needs are there, and no other backend's key is (each backend declares its own)."""
        chosen = _backends().declared(backend)
        for need in chosen.required:
            if not t.get(need.key):
                raise self.fail(f"measure.{need.key}", need.problem, need.fix)
        for owner in _backends().BACKENDS.values():
            for option in owner.options:
                if owner is chosen or option.key not in t or (option.empty_ok and not t[option.key]):
                    continue
                switch = chosen.options_when.get(option.key)
                if switch is not None and self.get(t, "measure", switch, bool, False):
                    continue
                also = "".join(f" (or {b.name} with {on} = true)" for b, on in _backends().readers(option.key) if on)
                how = " (with [variant.kernel] sides)" if owner.boots_kernels else ""
                raise self.fail(f"measure.{option.key}", f"{option.subject} read by the {owner.name} backend{also}, "
                                f"not {backend!r}", f'set backend = "{owner.name}"{how} or remove {option.key}')

    def vmstat_rows(self, t: dict, w: str) -> tuple[str, ...]:
        rows = self.strings(t, w, "vmstat")
        for row in rows:
            if not re.fullmatch(r"[a-z0-9_]+", row):
                raise self.fail(f"{w}.vmstat", f"{row!r} is not a /proc/vmstat row name",
                                'use the name as /proc/vmstat prints it, e.g. "pgfault" or "nr_tlb_remote_flush"')
        return rows

    def interrupt_rows(self, t: dict, w: str) -> tuple[str, ...]:
        rows = self.strings(t, w, "interrupts")
        for row in rows:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", row):
                raise self.fail(f"{w}.interrupts", f"{row!r} is not a /proc/interrupts row name",
                                'use the name before the colon, e.g. "TLB", "CAL", "RES" or an IRQ number')
        return rows
