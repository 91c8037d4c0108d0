"""Kernel studies (examples/kernel-00N-*/): what can be checked without booting a kernel.

Each spec is a guest experiment on kernels built from source; the five share one baseline kernel build, so the whole set
builds seven distinct kernels; every patch applies to Debian's 6.1 source;
every workload builds with its study's Makefile and does its fixed work on
the host, read by the spec's own parser.  The studies themselves run under
``make kernel-studies`` (kernels are built and booted there).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfab.parsers import get_parser
from perfab.specfile import load_spec
from studies_helpers import EXAMPLES

STUDIES = ("kernel-000-spin-unlock", "kernel-001-asm-inline", "kernel-002-osq-padding",
           "kernel-003-paravirt-spinlocks", "kernel-004-tlb-shootdown")
TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
TOP = "linux-source-6.1"


def _spec(study: str):
    return load_spec(EXAMPLES / study / "spec.toml")


def _kernel(variant) -> tuple:
    """What decides a side's kernel build: base, options and patch files."""
    k = variant.kernel
    return k.base, tuple(sorted(dict(k.config).items())), tuple(k.patches)


@pytest.mark.parametrize("study", STUDIES)
def test_kernel_study_runs_on_the_guest_backend_with_kernels_built_from_source(study):
    exp = _spec(study)
    assert exp.measure.backend == "guest" and exp.measure.accel == "tcg"
    for v in exp.variants:
        assert v.kernel is not None and v.kernel.image is None and v.kernel.base == "tinyconfig", v.name
        for patch in v.kernel.patches:  # relative to the checkout's top, where make runs perfab
            assert (EXAMPLES.parent / patch).is_file() and patch.startswith(f"examples/{study}/"), patch
    for w in exp.workloads:  # one row per table is the one the study is about
        primary = [m.name for m in w.metrics if m.primary]
        assert len(primary) == 1, (w.name, primary)


def test_the_studies_share_one_baseline_and_build_seven_kernels():
    sides = [(s, v) for s in STUDIES for v in _spec(s).variants]
    baseline = _kernel(_spec(STUDIES[0]).variants[0])
    assert baseline[2] == ()  # the baseline is 6.1 unpatched
    # the first side of every study is that one build, but 002's: its false sharing exists only with paravirt
    # spinlocks, so its baseline is 003's pv_spin kernel
    shared = [f"{s}/{v.name}" for s, v in sides if _kernel(v) == baseline]
    assert shared == ["kernel-000-spin-unlock/outline", "kernel-001-asm-inline/asm",
                      "kernel-003-paravirt-spinlocks/nopv", "kernel-004-tlb-shootdown/v6.1"]
    by_name = {f"{s}/{v.name}": _kernel(v) for s, v in sides}
    assert by_name["kernel-002-osq-padding/packed"] == by_name["kernel-003-paravirt-spinlocks/pv_spin"]
    assert len({_kernel(v) for _, v in sides}) == 7
    assert "DEBUG_INFO_DWARF5" in dict(baseline[1])  # perfab size names inline causes from DWARF
    # every other side is the baseline plus its own patch or options
    for s, v in sides:
        base, options, patches = _kernel(v)
        assert set(baseline[1]) <= set(options), f"{s}/{v.name} drops a common option"


def _patches() -> list[Path]:
    return sorted(p for s in STUDIES for p in (EXAMPLES / s).glob("*.patch"))


def _touched(patch: Path) -> list[str]:
    """The files a unified diff changes, as paths under the tree."""
    return [line.split()[1].split("/", 1)[1] for line in patch.read_text().splitlines() if line.startswith("+++ ")]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The files the patches touch, extracted from Debian's 6.1 tarball (one pass over it)."""
    if not TARBALL.is_file():
        pytest.skip(f"{TARBALL} is absent: install linux-source-6.1")
    wanted = sorted({f"{TOP}/{f}" for p in _patches() for f in _touched(p)})
    where = tmp_path_factory.mktemp("ksrc")
    # GNU tar stops reading once each member has been found (--occurrence)
    subprocess.run(["tar", "-xJf", str(TARBALL), "-C", str(where), "--occurrence=1", *wanted], check=True)
    assert all((where / name).is_file() for name in wanted)
    return where / TOP


@pytest.mark.parametrize("patch", _patches(), ids=lambda p: p.name)
def test_patch_applies_to_debian_6_1_and_changes_what_it_says(patch, pristine, tmp_path):
    tree = tmp_path / "tree"
    for f in _touched(patch):
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        (tree / f).write_bytes((pristine / f).read_bytes())
    done = subprocess.run(["patch", "-p1", "--batch", "--forward", "-i", str(patch)], cwd=tree,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
    added = "".join((tree / f).read_text() for f in _touched(patch))
    removed = "".join((pristine / f).read_text() for f in _touched(patch))
    if patch.name == "inline-spin-unlock.patch":
        assert added.count("select ARCH_INLINE_SPIN_UNLOCK") == 4 and "ARCH_INLINE_SPIN_UNLOCK" not in removed
    elif patch.name == "asm-inline-atomics.patch":
        assert removed.count("asm_inline volatile") == 0 and added.count("asm_inline volatile") == 37
    elif patch.name == "osq-node-cpu-padding.patch":
        assert "int cpu ____cacheline_aligned;" in added
    elif patch.name == "early-lazy-check.patch":  # 6035152d8eeb: the laziness check before the IPIs are queued
        assert "on_each_cpu_cond_mask(should_flush_tlb" in removed
        assert "on_each_cpu_cond_mask(should_flush_tlb" not in added
        assert "if (should_flush_tlb(cpu, (void *)info))" in added
    else:
        pytest.fail(f"no check for {patch.name}")


# study -> (the program's argv after the binary, a reduced count; what its output must say)
WORKLOADS = {
    "kernel-000-spin-unlock": (["locksys", "50"], {"rounds": 50}),
    "kernel-001-asm-inline": (["forkexec", "5"], {"rounds": 5}),
    "kernel-002-osq-padding": (["mprotect", "4", "300"], {"ops": 1200}),
    "kernel-003-paravirt-spinlocks": (["locksys", "50"], {"rounds": 50}),
    "kernel-004-tlb-shootdown": (["tlbflush", "-t", "2", "20"], {"ops": 40}),
}


@pytest.mark.parametrize("study", STUDIES)
def test_workload_builds_static_and_does_its_fixed_work(study, tmp_path):
    argv, expected = WORKLOADS[study]
    built = subprocess.run(["make", "-s", "-C", str(EXAMPLES / study), f"OUT={tmp_path}"], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    binary = tmp_path / argv[0]
    assert b"INTERP" not in subprocess.run(["readelf", "-l", str(binary)], capture_output=True).stdout  # static
    done = subprocess.run([str(binary), *argv[1:]], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    workload = _spec(study).workloads[0]
    parsed = get_parser(workload.parser, workload.parser_options)(done.stdout, done.stderr)
    for name, value in expected.items():
        assert parsed[name].value == value, (name, done.stdout)


@pytest.mark.parametrize("study", ["kernel-000-spin-unlock", "kernel-002-osq-padding", "kernel-004-tlb-shootdown"])
def test_workload_refuses_bad_arguments_with_usage(study, tmp_path):
    subprocess.run(["make", "-s", "-C", str(EXAMPLES / study), f"OUT={tmp_path}"], check=True)
    binary = next(p for p in tmp_path.iterdir() if p.is_file())
    for args in ([], ["-x", "1", "1"], ["0"]):
        done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.strip(), (args, done.stderr)  # a message, no work
