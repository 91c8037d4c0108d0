"""A sequential session whose sides end with unequal usable runs: the stop line states the real counts.

Side b's workload fails every other run (a counter file, deterministic), so
when ``max_runs`` is reached a has 8 usable runs and b 4; the stop line
used to say "8 runs per side".
"""

from __future__ import annotations

from reliability_helpers import cli, write

SPEC = """[experiment]
name = "seq"
runs = "auto"
min_runs = 4
max_runs = 8
warmup = 0
max_failures = 100

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["sh", "-c", '''
n=$(cat {variant}.count 2>/dev/null || echo 0); echo $((n + 1)) > {variant}.count
if [ {variant} = b ] && [ $((n % 2)) = 1 ]; then exit 3; fi; echo ops: $((100 + n % 3))''']
parser = "keyvalue"

[[workload.metric]]
name = "ops"
direction = "higher"
primary = true
"""


def test_the_stop_line_states_the_usable_runs_of_each_side(tmp_path):
    write(tmp_path / "s.toml", SPEC)
    out = cli("run", "s.toml", "--db", "r.db", cwd=tmp_path)
    assert out.code == 0, out.err
    flat = " ".join(out.out.split())
    assert "8 runs per side planned; usable runs per side 4 to 8, as a side's runs failed or were excluded" in flat
    assert "stopped at max_runs (8 runs per side):" not in flat


def test_equal_sides_keep_the_short_line(tmp_path):
    write(tmp_path / "s.toml", SPEC.replace("[ {variant} = b ]", "false"))
    out = cli("run", "s.toml", "--db", "r.db", cwd=tmp_path)
    assert out.code == 0, out.err
    flat = " ".join(out.out.split())
    assert "usable runs per side" not in flat and "runs per side" in flat
