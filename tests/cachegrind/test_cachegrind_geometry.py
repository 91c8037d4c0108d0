"""Cache geometry: parsing, valgrind's constraints, and the host's caches."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfab.errors import ToolError, UsageError
from perfab.machine.caches import (
    SYSFS_CACHE,
    CacheLevel,
    format_size,
    host_geometry,
    nearest_simulable,
    parse_level,
    parse_lscpu,
    read_sysfs,
    resolve_geometry,
    simulator_problem,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "cachegrind"
EPYC = (CacheLevel(32768, 8, 64), CacheLevel(49152, 12, 64), CacheLevel(33554432, 16, 64))
LSCPU_CMD = ["lscpu", "-C=NAME,ONE-SIZE,WAYS,TYPE,LEVEL,COHERENCY-SIZE", "-B"]


@pytest.mark.parametrize(
    "text, level",
    [
        ("32K,8,64", CacheLevel(32768, 8, 64)),
        ("32k, 8, 64", CacheLevel(32768, 8, 64)),
        ("48K,12,64", CacheLevel(49152, 12, 64)),
        ("1048576,16,64", CacheLevel(1048576, 16, 64)),
        ("32M,16,64", CacheLevel(33554432, 16, 64)),
        ("28M,14,64", CacheLevel(29360128, 14, 64)),
    ],
)
def test_parse_level(text, level):
    assert parse_level("l1i", text) == level


@pytest.mark.parametrize(
    "text, says",
    [
        ("32K,8", "is not a cache geometry"),
        ("big,8,64", "is not a cache geometry"),
        ("32.3K,8,64", "is not a cache geometry"),
        ("32K,0,64", "must all be positive"),
        ("32K,8,8", "power of two >= 16"),
        ("32K,8,48", "power of two >= 16"),
        ("4G,16,64", "32-bit"),
        ("1K,64,64", "exceeds size / line"),
        ("30K,8,64", 'use l1d="30K,15,64"'),
    ],
)
def test_bad_geometry_names_key_and_fix(text, says):
    with pytest.raises(UsageError, match="l1d=") as err:
        parse_level("l1d", text)
    assert says in str(err.value)


def test_27_5M_l3_is_refused_with_the_nearest_valgrind_accepts(tmp_path):
    with pytest.raises(UsageError) as err:
        parse_level("ll", "27.5M,11,64")
    assert "40960 sets" in str(err.value) and 'll="28M,14,64"' in str(err.value)
    # valgrind itself refuses the original (recorded) ...
    assert "Cache set count is not a power of two" in (DATA / "valgrind_ll_27.5M_11way.stderr").read_text()
    # ... and accepts the suggestion.
    out = tmp_path / "cachegrind.out"
    cmd = ["valgrind", "--tool=cachegrind", "--LL=29360128,14,64", f"--cachegrind-out-file={out}", "/bin/true"]
    ok = subprocess.run(cmd, capture_output=True, text=True)
    assert ok.returncode == 0 and "LL cache:         29360128 B, 64 B, 14-way" in out.read_text()


def test_nearest_simulable_keeps_size_close():
    level = CacheLevel(28835840, 11, 64)
    near = nearest_simulable(level)
    assert near == CacheLevel(29360128, 14, 64) and simulator_problem(near) is None
    assert abs(near.size_bytes - level.size_bytes) / level.size_bytes < 0.02
    assert nearest_simulable(CacheLevel(49152, 12, 64)) == CacheLevel(49152, 12, 64)


def test_format_size():
    assert [format_size(n) for n in (32768, 49152, 28835840, 33554432, 1000)] == ["32K", "48K", "27.5M", "32M", "1000"]


def test_recorded_sysfs_and_lscpu_agree():
    sysfs = read_sysfs(DATA / "sysfs_epyc")
    lscpu = parse_lscpu((DATA / "lscpu_C_B.txt").read_text())
    assert (sysfs.i1, sysfs.d1, sysfs.ll) == EPYC
    assert (lscpu.i1, lscpu.d1, lscpu.ll) == EPYC
    assert sysfs.describe() == "I1=32K,8,64 D1=48K,12,64 LL=32M,16,64"


def test_host_27_5M_l3_is_simulated_at_nearest_with_a_note():
    host = read_sysfs(DATA / "sysfs_27.5M_l3")
    assert host.ll == CacheLevel(28835840, 11, 64)
    geometry, notes = resolve_geometry({}, host)
    assert geometry.ll == CacheLevel(29360128, 14, 64)
    assert geometry.i1 == host.i1 and geometry.d1 == host.d1
    assert notes == ("host LL cache 27.5M,11,64 has 40960 sets (valgrind needs a power of two): "
                     "simulated as 28M,14,64",)


def test_given_levels_win_over_host():
    host = read_sysfs(DATA / "sysfs_27.5M_l3")
    geometry, notes = resolve_geometry({"ll": CacheLevel(8388608, 16, 64)}, host)
    assert geometry.ll == CacheLevel(8388608, 16, 64) and notes == ()
    assert geometry.source.endswith("ll given")


def test_no_unified_cache_is_a_tool_error(tmp_path):
    for name in ("index0", "index1"):
        (tmp_path / name).mkdir()
        src = DATA / "sysfs_epyc" / name
        for f in src.iterdir():
            (tmp_path / name / f.name).write_text(f.read_text())
    with pytest.raises(ToolError, match="give the geometry explicitly"):
        read_sysfs(tmp_path)


@pytest.mark.skipif(not SYSFS_CACHE.is_dir(), reason="no sysfs cache directory on this machine")
def test_live_host_geometry_matches_lscpu():
    live = host_geometry()
    lscpu = parse_lscpu(subprocess.run(LSCPU_CMD, capture_output=True, text=True, check=True).stdout)
    assert (live.i1, live.d1, live.ll) == (lscpu.i1, lscpu.d1, lscpu.ll)
    assert live.source.startswith("sysfs")


def test_falls_back_to_lscpu_then_fails_with_fix(tmp_path):
    via_lscpu = host_geometry(root=tmp_path / "absent")
    assert via_lscpu.source == "lscpu -C"
    with pytest.raises(ToolError, match='l1i="32K,8,64"'):
        host_geometry(root=tmp_path / "absent", lscpu=str(tmp_path / "no-lscpu"))
