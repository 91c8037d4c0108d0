"""The JSON report's format, as a JSON Schema (draft 2020-12), and its documentation.

``perfab report --format json`` writes one object whose ``format_version``
names the version of this schema (``perfab.report.document.FORMAT_VERSION``).
``python -m perfab.report.schema`` prints ``docs/report-json.md`` (the
version history and a table of every field), and with ``--json``
``docs/report-json.schema.json`` (the schema itself); a test checks both
files are current and that real reports validate against the schema.
``HISTORY`` says what each version changed.  A diagnostic's ``data`` is
documented per kind from ``perfab.analyse.diagnostics.DATA``, and the
schema requires exactly those keys of a diagnostic of that kind.
"""

from __future__ import annotations

import json
from types import UnionType

from perfab.analyse.diagnostics import DATA, Key, Kind
from perfab.analyse.methods import method_names
from perfab.analyse.verdicts import Verdict
from perfab.report.document import FORMAT_VERSION

HISTORY = (
    (1, "the first versioned format: the fields of the reports before it, and `format_version`"),
    (2, "every diagnostic, in `warnings` and `rows[].warnings`, is an object `{kind, text, data}` instead of "
        "its sentence alone: `kind` names what it is about and `data` holds the numbers behind it (both listed "
        "under \"Diagnostics\" below), `text` is the sentence as before, so a reader loses nothing. "
        "`rows[].verdict` is the verdict's value alone (`INVALID`, not `INVALID (2 runs)`), with the failed "
        "runs of a check row in the new `rows[].invalid_runs`. Why: a reader that gates on a report (a CI job, "
        "a dashboard) can select a diagnostic by its kind and read its numbers, instead of matching a "
        "sentence that may be reworded, and compare verdicts without parsing them"),
    (3, "`kernels`: side -> the kernel its guests booted (image path, its SHA-256, release, the side's command "
        "line, the built `.config`'s SHA-256 and a label), {} when the sides ran on this machine; `environment`'s "
        "`kernel.*` settings are the host's, which ran QEMU. Why: a report of kernel sides named only the host's "
        "kernel, so which kernels were compared was nowhere in it"),
    (4, "the diagnostic kind `runs_used`: a side's runs whose reading of the metric was unusable (not a finite "
        "number, missing from the workload's output) are left out of the row, which says how many it used; "
        "`rows[].resolution` is the larger of the data's grid step and the metric's declared clock tick (rusage "
        "user and system times), relative to the baseline; a side whose runs all read one value takes the "
        "margin's resolution, not its printed digits. Why: runs were dropped from a row with no trace while the "
        "header counted them, and a clock tick the values did not show let a row read `flat` it could not show"),
    (5, "two kinds of diagnostic: `layout_sensitive` on a `**` row whose verdict vanishes or changes sign in the "
        "experiment's aligned pair (`layout_check = true`), `layout_check` in `warnings` with what the check "
        "found. Why: a verdict that depends on where functions and the stack happen to fall is not the change's, "
        "and a reader gating on `**` must be able to tell. Also `sources[side].size` (`[measure] size = true`): "
        "the side's vmlinux against the baseline's, as `perfab size` printed it (`text`, `old`, `new`, "
        "`against`) and its size(1)-like `totals`; the text, markdown and HTML reports print it as SIZE"),
    (6, "`replication`: the newest session's unit of replication (`boot` or `run`), boots per side, seed and the "
        "perturbations applied; `rows[].levels`: for a row judged on one mean per boot, the boots of each side, "
        "the runs per boot, the between-boot and within-boot standard deviations relative to the baseline's mean "
        "and the level to add to (null where every run is its own unit; the row's `median_*`, `mean_*`, `p` and "
        "interval are then the boots'); the diagnostic kind `one_draw` on a session whose runs of a side all went "
        "on from one saved guest, unperturbed. Why: runs restored from one boot repeat that boot, so a report "
        "that counted them as replicates was pseudo-replicated, and a reader must see the unit a verdict was "
        "judged at"),
)

_NUM = {"anyOf": [{"type": ["number", "null"]}, {"enum": ["inf", "-inf"]}]}  # _num: null for nan, strings for inf
_STRINGS = {"type": "array", "items": {"type": "string"}}
_PARAMS = {"type": "object", "additionalProperties": {"type": "string"}}


def _num(text: str) -> dict:
    return {**_NUM, "description": text}


def _obj(properties: dict, description: str, extra=False) -> dict:
    """An object with exactly these properties, all present."""
    return {"type": "object", "description": description, "properties": properties,
            "required": list(properties), "additionalProperties": extra}


def _typed(kind, text: str, **more) -> dict:
    return {"type": kind, "description": text, **more}


_JSON_TYPES = {int: {"type": "integer"}, float: _NUM, str: {"type": "string"}, bool: {"type": "boolean"},
               list: _STRINGS}


def _key(key: Key) -> dict:
    """A diagnostic data key as a schema: its type (null allowed where the type says ``| None``) and meaning."""
    if isinstance(key.type_, UnionType):
        (inner,) = [t for t in key.type_.__args__ if t is not type(None)]
        if inner is float:  # a number is null already where it is not one
            return {**_NUM, "description": key.meaning}
        return {"type": [_JSON_TYPES[inner]["type"], "null"], "description": key.meaning}
    return {**_JSON_TYPES[key.type_], "description": key.meaning}


def _diagnostic(kind: Kind) -> dict:
    """A diagnostic of one kind: its kind, its sentence, and exactly the data keys ``DATA`` gives the kind."""
    shape = DATA[kind]
    return _obj({"kind": {"const": kind.value, "description": "what it is about"},
                 "text": _typed("string", "the sentence the text, markdown and HTML reports print"),
                 "data": _obj({k.name: _key(k) for k in shape.keys}, f"the data of `{kind.value}`")},
                shape.about)


DIAGNOSTIC = {"anyOf": [_diagnostic(k) for k in Kind],
              "description": "what the analysis noticed: `{kind, text, data}`, data by kind (see Diagnostics)"}
_DIAGNOSTICS = {"type": "array", "items": {"$ref": "#/$defs/diagnostic"}}  # one definition, used twice

LEVELS = _obj({
    "unit": _typed("string", "what a unit of replication is: `boot`"),
    "units_base": _typed("integer", "the baseline's units (boots)"),
    "units_exp": _typed("integer", "the side's units"),
    "runs_per_unit": _typed("number", "mean runs per unit, both sides"),
    "between": _num("between-unit standard deviation over the baseline's mean, a fraction (null: unknown)"),
    "within": _num("within-unit standard deviation over the baseline's mean, a fraction (null: unknown)"),
    "add": _typed("string", "the level that narrows the interval most: the unit (`boot`) or `runs` per unit"),
}, "a row judged on one mean per unit of replication, with the variance of each level")

REPLICATION = _obj({
    "unit": {"enum": ["boot", "run"], "description": "the unit of replication: `boot` (runs restored from a few "
                                                      "boots per side) or `run` (every run its own draw)"},
    "units": _typed("integer", "boots per side and workload with unit `boot`, else 1"),
    "seed": _typed("integer", "the session's perturbation seed"),
    "perturbations": {**_STRINGS, "description": "what was perturbed, in words ([] when nothing was)"},
}, "how the newest session's runs relate to independent draws (perfab.replication)")

ROW = _obj({
    "workload": _typed("string", "workload name"),
    "params": {**_PARAMS, "description": "the sweep point: parameter -> value ({} outside sweeps)"},
    "metric": _typed("string", "metric name as stored"),
    "label": _typed("string", "the row's label"),
    "variant": _typed("string", "the side compared with the baseline"),
    "source": _typed("string", "where the metric came from: rusage, backend, parser, service or machine"),
    "unit": _typed(["string", "null"], "unit of the values"),
    "higher_is_better": _typed(["boolean", "null"], "direction; null: no good side"),
    "primary": _typed("boolean", "the row gates --fail-on-regression"),
    "margin": _typed("number", "equivalence margin, a fraction (0.005 = 0.5%)"),
    "verdict": {"enum": [v.value for v in Verdict if v != Verdict.PENDING],
                "description": "`**` change beyond noise, `flat` no change, `ns` inconclusive, `valid` or `INVALID` "
                               "for check metrics, `-` not compared"},
    "invalid_runs": _typed(["integer", "null"], "an `INVALID` check row's runs that missed the expected value, "
                           "else null"),
    "regressed": _typed("boolean", "`**` in the bad direction"),
    "method": {"enum": [*method_names(), None],
               "description": "the statistical method that judged the row; null for check rows and rows "
                              "not compared"},
    "basis": {"enum": ["ratio", "shift/median", "absolute", None],
              "description": "what the verdict used: the ratio (delta), the shift over the baseline median, "
                             "or the shift in the metric's unit"},
    "median_base": _num("the baseline's median"),
    "median_exp": _num("the side's median"),
    "mean_base": _num("the baseline's mean"),
    "mean_exp": _num("the side's mean"),
    "delta": _num("the change, a fraction (0.01 = +1%); null where no ratio exists"),
    "ci_lo": _num("lower end of the change's interval, a fraction"),
    "ci_hi": _num("upper end of the change's interval, a fraction"),
    "shift": _num("the change in the metric's unit"),
    "shift_lo": _num("lower end of the shift's interval, in the metric's unit"),
    "shift_hi": _num("upper end of the shift's interval, in the metric's unit"),
    "resolution": _num("the data's grid step relative to the baseline (0: continuous)"),
    "p": _num("the method's p-value"),
    "q": _num("the p-value adjusted across the report's rows"),
    "n_base": _typed("integer", "baseline runs used"),
    "n_exp": _typed("integer", "side runs used"),
    "cv_base": _num("robust per-run noise of the baseline, a fraction"),
    "cv_exp": _num("robust per-run noise of the side, a fraction"),
    "mde": _num("minimum detectable effect at this n and noise (80% power), a fraction"),
    "warnings": {**_DIAGNOSTICS,
                 "description": "what the analysis noticed about this row's data (diagnostics)"},
    "base_values": {"type": "array", "items": _NUM, "description": "the baseline's samples, in run order"},
    "exp_values": {"type": "array", "items": _NUM, "description": "the side's samples, in run order"},
    "base_order": {"type": "array", "items": {"type": "integer"},
                   "description": "each baseline sample's position in time (session * 10^7 + plan position)"},
    "exp_order": {"type": "array", "items": {"type": "integer"}, "description": "the same for the side"},
    "levels": {"anyOf": [LEVELS, {"type": "null"}],
               "description": "the units the row was judged on and each level's variance; null: per run"},
}, "one metric of one workload (at one sweep point), one side against the baseline")

WORKLOAD = _obj({
    "name": _typed("string", "workload name"),
    "command": _typed("string", "the command line as the spec wrote it"),
    "failed": {"type": "object", "additionalProperties": _STRINGS,
               "description": "side -> the reasons of its failed measured runs"},
    "excluded": {"type": "object", "additionalProperties": {"type": "integer"},
                 "description": "\"metric: reason\" -> runs whose value of the metric was unusable"},
    "hidden": {**_STRINGS, "description": "parser metrics without a direction, left out of the rows"},
    "params": {**_STRINGS, "description": "names of the sweep parameters ([] outside sweeps)"},
}, "what ran")

SUMMARY = _obj({
    "workload": _typed("string", "workload name"),
    "params": {**_PARAMS, "description": "the sweep point"},
    "variant": _typed("string", "side name"),
    "metric": _typed("string", "metric name"),
    "n": _typed("integer", "runs used"),
    "median": _num("median of the runs"),
    "lo": _num("lower end of the median's distribution-free interval (\"-inf\" when too few runs)"),
    "hi": _num("upper end (\"inf\" when too few runs)"),
    "per_thread": _num("median / thread count for rates in a thread sweep, else null"),
}, "one side's median and interval at one point (sweeps and single-side experiments)")

KERNEL = _obj({
    "image": _typed("string", "the image file the side's guests booted"),
    "sha256": _typed("string", "its SHA-256: the bytes booted"),
    "release": _typed(["string", "null"], "the kernel's release, read from the image (null when unreadable)"),
    "cmdline": _typed("string", "the side's own command line (perfab's console and init options come before it)"),
    "config_sha256": _typed(["string", "null"], "SHA-256 of the .config it was built from; null for a prebuilt image"),
    "label": _typed("string", "how the report names it: the image's file name, or `built` and the build's key"),
}, "the kernel a side's guests booted (guest backend), as stored with the newest session")

ENV_DIFFERENCE = _obj({
    "variant": _typed("string", "the side whose environment differs"),
    "key": _typed("string", "the setting"),
    "baseline": _typed("string", "its value for the baseline"),
    "other": _typed("string", "its value for the side"),
}, "a setting that differs between the baseline's session and a side's")

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "perfab report",
    "$defs": {"diagnostic": DIAGNOSTIC},
    **_obj({
        "format_version": {"const": FORMAT_VERSION, "description": "version of this format (see the history)"},
        "experiment": _typed("string", "experiment name"),
        "baseline": _typed("string", "the baseline side"),
        "variants": {**_STRINGS, "description": "the other sides, in spec order"},
        "alpha": _typed("number", "significance level the adjusted p-values are held to"),
        "confidence": _typed("number", "level of the intervals"),
        "fdr": {"enum": ["bh", "holm"], "description": "adjustment across rows: Benjamini-Hochberg or Holm"},
        "backend": _typed("string", "how the runs were measured"),
        "groups": {"type": "array", "items": _STRINGS, "description": "counter groups, each carried by some runs"},
        "runs_per_side": {"type": "object", "additionalProperties": {"type": "integer"},
                          "description": "side -> measured runs (all workloads)"},
        "order": _typed("string", "how runs were ordered"),
        "sessions": _typed("integer", "sessions stored"),
        "environment": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "the baseline's environment snapshot: setting -> value (this machine's: "
                                       "with kernel sides, `kernel.*` is the host that ran QEMU)"},
        "sources": {"type": "object", "additionalProperties": {"type": "object"},
                    "description": "side -> its source (ref, commit, subject) and build command when built, its "
                                   "programs' SHA-256, the kernel it booted, its code size against the baseline "
                                   "(`size`)"},
        "kernels": {"type": "object", "additionalProperties": KERNEL,
                    "description": "side -> the kernel its guests booted ({} when the sides ran on this machine)"},
        "replication": {"anyOf": [REPLICATION, {"type": "null"}],
                        "description": "the newest session's replication (null: each run its own draw, "
                                       "nothing perturbed, as on this machine)"},
        "env_differences": {"type": "array", "items": ENV_DIFFERENCE,
                            "description": "settings that differ between sides' sessions"},
        "warnings": {**_DIAGNOSTICS,
                     "description": "what the analysis noticed about the sessions and sides (diagnostics)"},
        "notes": {**_STRINGS, "description": "backend notes (what a simulated cache cannot tell)"},
        "workloads": {"type": "array", "items": WORKLOAD, "description": "per workload facts"},
        "rows": {"type": "array", "items": ROW, "description": "every comparison"},
        "summaries": {"type": "array", "items": SUMMARY, "description": "each side's median per point"},
    }, "a report of one experiment"),
}


def markdown() -> str:
    """``docs/report-json.md``: the version history and one table per object."""
    out = ["# The JSON report", "",
           "<!-- generated by python -m perfab.report.schema, do not edit -->", "",
           "`perfab report --format json` writes one object. Its `format_version` says which version of the",
           "format below it follows; the number goes up whenever a field is added, changes meaning or goes",
           "away, and the history below says what changed. With several `--db`, the output is",
           "`{\"databases\": [{\"database\": PATH, \"report\": REPORT}]}`, each report in this format.",
           "Numbers are plain JSON numbers, null where not a number, and the strings `\"inf\"` and",
           "`\"-inf\"` for unbounded interval ends.", "", "## Versions", ""]
    out += [f"- {v}: {text}" for v, text in HISTORY]
    for title, obj in (("The report", SCHEMA), ("`rows[]`", ROW), ("`workloads[]`", WORKLOAD),
                       ("`summaries[]`", SUMMARY), ("`env_differences[]`", ENV_DIFFERENCE),
                       ("`kernels.<side>`", KERNEL), ("`replication`", REPLICATION), ("`rows[].levels`", LEVELS)):
        out += ["", f"## {title}", "", obj["description"][0].upper() + obj["description"][1:] + ".", "",
                "| field | type | meaning |", "|---|---|---|"]
        out += [f"| `{name}` | {_type_name(field)} | {field.get('description', '')} |"
                for name, field in obj["properties"].items()]
    out += _diagnostics_section()
    out += ["", "The same as a JSON Schema (draft 2020-12): [report-json.schema.json](report-json.schema.json)."]
    return "\n".join(out) + "\n"


def _diagnostics_section() -> list[str]:
    """The Diagnostics section: the object's three fields, then every kind with the keys of its data."""
    out = ["", "## Diagnostics", "",
           "`warnings` and `rows[].warnings` hold diagnostics: what the analysis noticed, as",
           "`{\"kind\": KIND, \"text\": SENTENCE, \"data\": {...}}`. `text` is the sentence the other formats",
           "print; `kind` says what it is about, and `data` always has exactly the keys listed for its kind.",
           "", "| kind | given when | `data` |", "|---|---|---|"]
    for kind in Kind:
        keys = "; ".join(f"`{k.name}` ({_type_name(_key(k))}): {k.meaning}" for k in DATA[kind].keys)
        out.append(f"| `{kind.value}` | {DATA[kind].about} | {keys} |")
    return out


def schema_json() -> str:
    """``docs/report-json.schema.json``."""
    return json.dumps(SCHEMA, indent=2) + "\n"


def _type_name(field: dict) -> str:
    """A field's type as the tables write it."""
    if "const" in field:
        value = field["const"]
        return f"`{value}`" if isinstance(value, str) else f"integer ({value})"
    if "enum" in field:
        return " \\| ".join("null" if v is None else f"`{v}`" for v in field["enum"])
    if field.get("anyOf") == _NUM["anyOf"]:
        return "number, null, `\"inf\"` or `\"-inf\"`"
    if "$ref" in field:
        return field["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in field:  # an object or null
        return " or ".join("null" if f.get("type") == "null" else "object" for f in field["anyOf"])
    kind = field["type"]
    kinds = kind if isinstance(kind, list) else [kind]
    if kind == "array":
        return f"array of {_type_name(field['items'])}"
    return " or ".join(kinds)


if __name__ == "__main__":
    import sys

    print(schema_json() if sys.argv[1:] == ["--json"] else markdown(), end="")
