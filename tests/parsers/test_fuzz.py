"""Property-based fuzzing of every workload-output parser and of the perf stat readers.

Property: a parser returns a dict of finite floats or raises ParseError with
a one-line message, nothing else; ``parse_json`` / ``parse_csv``
return rows whose counts are finite (``metric_value``
may be perf's own ``nan``) or raise PerfStatParseError.

Inputs: recorded runs (tests/data/<tool>/, tests/data/perf/) damaged by up to
four mutations -- a number replaced by ``nan``, ``inf``, ``1e400``, ``-0``, a
400-digit integer, an empty field and the like; a unit swapped; the text cut
short; a line dropped or repeated; NULs and control characters inserted --
and arbitrary text built from the recorded lines and such pieces.  Examples
are derandomized and bounded, so every run tests the same inputs.
"""

from __future__ import annotations

import math
import random
import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cases import CASES, DATA, recorded

from perfab.parsers import ParsedMetric, ParseError, get_parser
from perfab.run.backends.perfparse import PerfStatOutput, PerfStatParseError, parse_csv, parse_json
from perfab.run.backends.perfparse import topdown_rows

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
UNIT = re.compile(r"(?<=\d)(?:us|ms|s|m|h|[KMGT]?B|k|M|%)\b|\b(?:(?:micro|nano|milli)seconds|MB/sec|msec|lps)\b")
FIELD = re.compile(r"(?<=[,;|:])[^,;|:\n]*")
BAD_NUMBERS = ("nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e-400", "-0", "0", "9" * 400,
               "1" + "0" * 5000, "", " ", "0.5x", "1.00sec", "1,234", "0x1f", "1_000", "\u0661\u0662", "<not counted>",
               "<not supported>", '"', "-", ".", "1e", "--5")  # fmt: skip
UNITS = ("us", "ms", "s", "m", "h", "sec", "B", "KB", "MB", "TB", "k", "%", "microseconds", "MB/sec", "msec", "", "xx")
CONTROL = ("\x00", "\x00" * 8, "\x1b[0m", "\r", "\t", "\x0b", "\x0c", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffd",
           "\n", '"', ",", ";", "|", ":", "{", "}", "[", "\\")  # fmt: skip


def _replace(rng: random.Random, text: str, pattern: re.Pattern[str], choices: list[str]) -> str:
    found = list(pattern.finditer(text))
    if not found:
        return text
    hit = rng.choice(found)
    return text[: hit.start()] + rng.choice(choices) + text[hit.end() :]


def _bad_number(rng: random.Random) -> str:
    """Half the time a number that reads as infinite, else any of the other troublemakers."""
    if rng.random() < 0.5:
        return rng.choice(("1e400", "-1e400", "1.5E+999", "9" * 400, "1" + "0" * 5000, "0." + "9" * 400 + "e400"))
    return rng.choice((rng.choice(BAD_NUMBERS), str(rng.randint(-(10**30), 10**30)), repr(rng.uniform(-1e9, 1e9))))


def _mutate(rng: random.Random, text: str) -> str:
    """One mutation of ``text``, chosen by ``rng``."""
    kind = rng.choice(("number", "number", "number", "unit", "field", "cut", "drop", "repeat", "insert"))
    if kind == "number":
        return _replace(rng, text, NUMBER, [_bad_number(rng)])
    if kind == "unit":
        return _replace(rng, text, UNIT, list(UNITS))
    if kind == "field":
        return _replace(rng, text, FIELD, ["", " ", "nan", "1e400", "-0"])
    if kind == "cut":
        return text[: rng.randint(0, len(text))]
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    if kind in ("drop", "repeat"):
        lines[i : i + 1] = [] if kind == "drop" else [lines[i]] * 2
        return "\n".join(lines)
    at = rng.randint(0, len(text))
    return text[:at] + rng.choice(CONTROL) + text[at:]


@st.composite
def mutated(draw, text: str) -> str:
    """``text`` after one to five mutations.

    Positions and replacements come from a seeded ``random.Random``: hypothesis's own draws
    favour the first choice and small indices, which left most numbers of a fixture untouched.
    """
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    for _ in range(rng.randint(1, 5)):
        text = _mutate(rng, text)
    return text


@cache
def all_lines() -> tuple[str, ...]:
    """Every line of every recorded run the parsers read: the vocabulary of arbitrary text."""
    lines = {line for case in CASES for _, out, err in recorded(case.directory) for line in (out + err).splitlines()}
    return tuple(sorted(lines))


def arbitrary_text(vocabulary: tuple[str, ...]) -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(vocabulary), st.sampled_from(BAD_NUMBERS), st.sampled_from(CONTROL),
                      st.sampled_from(UNITS), st.text(max_size=20))  # fmt: skip
    return st.one_of(st.text(max_size=200), st.lists(piece, max_size=12).map("".join),
                     st.lists(piece, max_size=12).map("\n".join))  # fmt: skip


def assert_finite_or_parse_error(parse, stdout: str, stderr: str) -> None:
    try:
        out = parse(stdout, stderr)
    except ParseError as err:
        assert str(err) and "\n" not in str(err)
        return
    assert isinstance(out, dict)
    for name, metric in out.items():
        assert isinstance(name, str) and name
        assert isinstance(metric, ParsedMetric) and type(metric.value) is float and math.isfinite(metric.value), (
            name, metric)


@cache
def _runs(directory: str) -> tuple[tuple[str, str, str], ...]:
    return tuple(recorded(directory))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_parser_on_damaged_recordings(case, data):
    runs = _runs(case.directory)
    _, stdout, stderr = runs[data.draw(st.integers(0, 2**32 - 1)) % len(runs)]
    stdout, stderr = (data.draw(mutated(stdout)), stderr) if stdout.strip() else (stdout, data.draw(mutated(stderr)))
    assert_finite_or_parse_error(get_parser(case.parser, case.options), stdout, stderr)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_parser_on_arbitrary_text(case, data):
    text = arbitrary_text(all_lines())
    assert_finite_or_parse_error(get_parser(case.parser, case.options), data.draw(text), data.draw(text))


@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_stress_ng_yaml_damaged(tmp_path_factory, data):
    doc = data.draw(mutated((DATA / "stress-ng" / "cpu_matrix.yaml").read_text()))
    path = tmp_path_factory.mktemp("yaml") / "metrics.yaml"
    path.write_text(doc, errors="surrogatepass")
    assert_finite_or_parse_error(get_parser("stress-ng", {"yaml_path": str(path)}), "", "")


# --- perf stat readers ---

PERF_FILES = sorted(p for p in (DATA / "perf").iterdir() if p.suffix in (".txt", ".json"))
READERS = {"parse_json": parse_json, "parse_csv": parse_csv, "parse_csv_semicolon": lambda t: parse_csv(t, ";")}


@cache
def _perf_text(path: Path) -> str:
    return path.read_text(errors="replace")


def _optional_finite(value: object) -> bool:
    return value is None or (type(value) is float and math.isfinite(value))


def assert_rows_finite_or_error(read, text: str) -> None:
    try:
        out = read(text)
    except PerfStatParseError as err:
        assert str(err) and "\n" not in str(err)
        return
    assert isinstance(out, PerfStatOutput) and all(isinstance(m, str) for m in out.messages)
    for row in out.rows:
        assert row.status in ("ok", "not counted", "not supported"), row
        assert all(_optional_finite(v) for v in (row.value, row.pct_running, row.variance_pct, row.interval_s)), row
        assert row.run_time_ns is None or type(row.run_time_ns) is int, row
        assert row.metric_value is None or type(row.metric_value) is float and not math.isinf(row.metric_value), row
        assert row.status == "ok" or row.value is None, row
    tma = topdown_rows(out)
    assert tma is None or all(type(v) is float for v in tma.values())


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_perf_stat_reader_on_damaged_recordings(reader, data):
    text = data.draw(mutated(_perf_text(PERF_FILES[data.draw(st.integers(0, 2**32 - 1)) % len(PERF_FILES)])))
    assert_rows_finite_or_error(READERS[reader], text)


@cache
def _perf_lines() -> tuple[str, ...]:
    return tuple(sorted({line for path in PERF_FILES for line in _perf_text(path).splitlines()}))


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_perf_stat_reader_on_arbitrary_text(reader, data):
    assert_rows_finite_or_error(READERS[reader], data.draw(arbitrary_text(_perf_lines())))
