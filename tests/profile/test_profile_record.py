"""ProfileRecorder: the argv it builds, its errors, and live perf runs on this machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from perfab.errors import ToolError, UsageError
from perfab.profile import ProfileRecorder, compare_profiles, default_event, format_profile_rows

HOT = """
static volatile unsigned long sink;
__attribute__((noipa)) void {name}(long n)
{{
	unsigned long x = 1;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1;
	sink = x;
}}
int main(void) {{ {name}(120000000L); return 0; }}
"""

needs_perf = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def test_wrap_builds_the_perf_record_argv(tmp_path):
    recorder = ProfileRecorder(event="cpu-clock", freq=499)
    assert recorder.wrap(["./bench", "-n", "3"], tmp_path) == [
        "perf", "record", "--no-buildid-cache", "-e", "cpu-clock", "-F", "499",
        "-o", str(tmp_path / "perf.data"), "--", "./bench", "-n", "3",
    ]  # fmt: skip
    with_chains = ProfileRecorder(event="cycles", callgraph=True).wrap(["true"], tmp_path)
    assert with_chains[:8] == ["perf", "record", "--no-buildid-cache", "-e", "cycles", "-F", "999", "-g"]


def test_default_event_follows_the_cpu_pmu(tmp_path):
    (tmp_path / "software").mkdir()
    (tmp_path / "tracepoint").mkdir()
    assert default_event(tmp_path) == "cpu-clock"
    (tmp_path / "cpu").mkdir()
    assert default_event(tmp_path) == "cycles"
    assert default_event(tmp_path / "missing") == "cpu-clock"


def test_default_event_on_this_machine_matches_perf_stat():
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    stat = ["perf", "stat", "-x", ",", "-e", "cycles", "true"]
    out = subprocess.run(stat, capture_output=True, text=True, check=False).stderr
    has_pmu = "<not supported>" not in out
    assert default_event() == ("cycles" if has_pmu else "cpu-clock")
    assert ProfileRecorder().event == default_event()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"freq": 0}, "freq must be a positive number"),
        ({"freq": True}, "freq must be a positive number"),
        ({"freq": 99.5}, "freq must be a positive number"),
        ({"event": "cycles,instructions"}, "lists several events"),
        ({"event": "{cycles,instructions}"}, "is not a perf event name"),
        ({"event": "cycles; rm -rf /"}, "is not a perf event name"),
    ],
)
def test_bad_settings_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        ProfileRecorder(**kwargs)


def test_raw_pmu_events_with_commas_inside_slashes_are_one_event():
    assert ProfileRecorder(event="cpu/event=0x3c,umask=0x0/").event == "cpu/event=0x3c,umask=0x0/"


def test_empty_argv_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="argv is empty"):
        ProfileRecorder(event="cpu-clock").wrap([], tmp_path)


@needs_perf
def test_collect_without_perf_data_names_the_cause(tmp_path):
    with pytest.raises(ToolError, match="perf.data does not exist: perf record did not run"):
        ProfileRecorder(event="cpu-clock").collect(tmp_path)


@needs_perf
def test_collect_on_a_corrupt_file_is_a_tool_error(tmp_path):
    (tmp_path / "perf.data").write_text("not a perf.data file\n")
    with pytest.raises(ToolError, match="perf report failed on .*perf.data: "):
        ProfileRecorder(event="cpu-clock").collect(tmp_path)


@needs_perf
def test_collect_after_a_run_too_short_to_sample(tmp_path):
    recorder = ProfileRecorder(event="cpu-clock", freq=1)  # one sample a second: `true` is never caught
    subprocess.run(recorder.wrap(["true"], tmp_path), capture_output=True, check=True)
    with pytest.raises(ToolError, match="no samples; run the workload longer"):
        recorder.collect(tmp_path)


def profile_runs(binary: Path, scratch: Path, recorder: ProfileRecorder, runs: int) -> list[dict[str, float]]:
    shares = []
    for i in range(runs):
        run_dir = scratch / f"{binary.name}-{i}"
        run_dir.mkdir()
        subprocess.run(recorder.wrap([str(binary)], run_dir), capture_output=True, check=True)
        shares.append(recorder.collect(run_dir))
    return shares


@needs_perf
@needs_gcc
@pytest.mark.timeout(60)
def test_live_hot_a_against_hot_b(tmp_path):
    # The two programs differ only in the function's name, so their build-ids
    # are equal: through perf's build-id cache both would report "hot_a".
    binaries = {}
    for name in ("hot_a", "hot_b"):
        source = tmp_path / f"{name}.c"
        source.write_text(HOT.format(name=name))
        binaries[name] = tmp_path / name
        subprocess.run(["gcc", "-O1", "-o", str(binaries[name]), str(source)], check=True)
    recorder = ProfileRecorder(event="cpu-clock", freq=999)
    base = profile_runs(binaries["hot_a"], tmp_path, recorder, 3)
    exp = profile_runs(binaries["hot_b"], tmp_path, recorder, 3)

    rows = compare_profiles(base, exp)
    by_symbol = {r.symbol: r for r in rows}
    hot_a, hot_b = by_symbol["self.cpu-clock:u.hot_a"], by_symbol["self.cpu-clock:u.hot_b"]
    assert hot_a.base_mean > 80 and hot_a.exp_mean == 0.0
    assert hot_a.delta_pp < -80 and hot_a.significant
    assert hot_b.delta_pp > 80 and hot_b.significant
    assert rows[0].symbol in {hot_a.symbol, hot_b.symbol}
    first_two = format_profile_rows(rows).splitlines()[2:4]
    assert {line.split()[-1] for line in first_two} == {hot_a.symbol, hot_b.symbol}
    assert all(line.startswith("*") for line in first_two)
