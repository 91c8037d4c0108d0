"""Values at the ends of the float range, and escapes in history: every format renders, briefly and safely.

Real sessions whose workload prints a metric near 1e308 (a plot whose
span overflows a float) or near 1e-300 (ticks that round to one value),
through every report format; the text shows such values as a power of
ten, never a 300-digit number.  ``perfab history`` shows an ESC byte in a
label as ``\\x1b``, as ``run`` and ``report`` do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reliability_helpers import cli, write

EXTREMES = {
    "huge-both-signs": ("1e308", "-1.7e308"),
    "huge-same-sign": ("1e308", "1.7e308"),
    "max-float": ("1.7976931348623157e308", "1e308"),
    "tiny": ("1e-300", "2e-300"),
    "subnormal": ("5e-324", "1e-320"),
    "tiny-and-huge": ("1e-300", "1e300"),
    "zero-and-huge": ("0", "1e308"),
    "equal-huge": ("1e308", "1e308"),
}
FORMATS = ["text", "markdown", "csv", "json", "html", "lkp"]


def extreme_spec(a: str, b: str, label: str = "ops") -> str:
    return f"""[experiment]
name = "extreme"
runs = 3
warmup = 0

[[variant]]
name = "a"
vars = {{v = "{a}"}}

[[variant]]
name = "b"
vars = {{v = "{b}"}}

[[workload]]
name = "w"
argv = ["sh", "-c", "echo ops: {{v}}"]
parser = "keyvalue"

[[workload.metric]]
name = "ops"
label = {json.dumps(label)}
direction = "higher"
"""


@pytest.fixture(scope="module", params=list(EXTREMES))
def stored(request, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp(request.param)
    spec = write(tmp / "s.toml", extreme_spec(*EXTREMES[request.param]))
    out = cli("run", spec, "--db", tmp / "r.db", "--no-report")
    assert out.code == 0, out.err
    return tmp / "r.db"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_extreme_values(stored, fmt, tmp_path):
    """No traceback, exit 0, and no number longer than 30 characters in the output."""
    target = tmp_path / f"r.{fmt}"
    out = cli("report", "--db", stored, "--format", fmt, "-o", target)
    assert out.code == 0 and "Traceback" not in out.err, out.err
    text = target.read_text()
    numbers = re.findall(r"[-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?", text)
    longest = max((len(n.replace(",", "")) for n in numbers), default=0)
    assert longest < 30, f"a {longest}-character number in the {fmt} report"
    if fmt == "html":
        assert not re.search(r'="[^"]*(?:nan|inf)[^"]*"', text.replace('="-inf"', "").replace('="inf"', ""))
        assert "<svg" in text


def test_a_huge_value_is_a_power_of_ten_in_text(tmp_path):
    spec = write(tmp_path / "s.toml", extreme_spec("1e308", "-1.7e308"))
    out = cli("run", spec, "--db", tmp_path / "r.db")
    assert out.code == 0, out.err
    row = next(line for line in out.out.splitlines() if line.startswith("ops "))
    assert row.split()[1:3] == ["1e+308", "-1.7e+308"], row


def test_a_tiny_value_is_a_power_of_ten_in_text(tmp_path):
    spec = write(tmp_path / "s.toml", extreme_spec("1e-300", "2e-300"))
    out = cli("run", spec, "--db", tmp_path / "r.db")
    assert out.code == 0, out.err
    row = next(line for line in out.out.splitlines() if line.startswith("ops "))
    assert row.split()[1:3] == ["1e-300", "2e-300"], row


@pytest.mark.parametrize("label", ["\x1b[31mred\x1b[0m", "bell\x07", "cr\rover", "del\x7f", "csi\x9b2J"])
def test_history_shows_control_characters_as_escapes(tmp_path, label):
    """A label carrying ESC, BEL, CR, DEL or a C1 CSI: history prints \\xNN, never the byte."""
    spec = write(tmp_path / "s.toml", extreme_spec("5", "6", label))
    for _ in range(2):
        out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report", "--new-session")
        assert out.code == 0, out.err
    out = cli("history", "--db", tmp_path / "r.db", "--metric", "ops")
    assert out.code == 0, out.err
    assert not any(c in out.out for c in "\x1b\x07\r\x7f\x9b"), repr(out.out)
    shown = {"\x1b": "\\x1b", "\x07": "\\x07", "\r": "\\x0d", "\x7f": "\\x7f", "\x9b": "\\x9b"}
    assert any(v in out.out for k, v in shown.items() if k in label)
