"""Kernel sides in the spec: ``[variant.kernel]`` and the guest backend's keys, each mistake one line."""

from __future__ import annotations

import pytest

from perfab.errors import SpecError, UsageError
from perfab.kernel.sides import choose_accel, launch_request, resolve_kernel
from perfab.specfile import parse_spec

IMAGE = "/boot/vmlinuz-6.1.0-99-test"


def _spec(kernel_a: str = f'image = "{IMAGE}"', kernel_b: str = f'image = "{IMAGE}"\ncmdline = "pti=off"',
          measure: str = 'backend = "guest"') -> str:
    return f"""
[experiment]
name = "k"
[[variant]]
name = "a"
{"[variant.kernel]" if kernel_a is not None else ""}
{kernel_a or ""}
[[variant]]
name = "b"
[variant.kernel]
{kernel_b}
[[workload]]
name = "w"
argv = ["/bin/true"]
[measure]
{measure}
"""


def test_a_kernel_side_reads_its_table():
    exp = parse_spec(_spec(kernel_b='source = "/src/linux"\nbase = "defconfig"\n'
                                    'config = { CONFIG_PARAVIRT_SPINLOCKS = "n", NR_CPUS = 4 }\n'
                                    'patches = ["a.patch", "b.patch"]\ncmdline = "nosmp"',
                           measure='backend = "guest"\nvcpus = 2\nmemory = 256\nvmstat = ["pgfault"]'))
    a, b = exp.variants
    assert a.kernel.image == IMAGE and a.kernel.cmdline == ""
    assert b.kernel.image is None and b.kernel.source == "/src/linux" and b.kernel.base == "defconfig"
    assert b.kernel.config == (("PARAVIRT_SPINLOCKS", "n"), ("NR_CPUS", "4"))
    assert b.kernel.patches == ("a.patch", "b.patch") and b.kernel.cmdline == "nosmp"
    assert (exp.measure.vcpus, exp.measure.memory_mb, exp.measure.vmstat) == (2, 256, ("pgfault",))


@pytest.mark.parametrize("text, words", [
    (_spec(measure='backend = "time"'), 'set [measure] backend = "guest"'),
    (_spec(kernel_a=None), "side 'a' names none"),
    (_spec(kernel_b=f'image = "{IMAGE}"\nconfig = {{ SMP = "y" }}'), "a prebuilt image is not built"),
    (_spec(kernel_b='config = { "smp-on" = "y" }'), "is not a kernel config option name"),
    (_spec(kernel_b='kconfig = "tiny"'), "kconfig"),
    (_spec(measure='backend = "perf"\ncounters = ["task-clock"]\nvcpus = 2'), "is read by the guest backend"),
    (_spec(measure='backend = "guest"\nl1i = "32K,8,64"'), "(or guest with cache_sim = true)"),
    (_spec(measure='backend = "guest"\naccel = "hvf"'), "accel"),
    (_spec(measure='backend = "guest"\nvcpus = 0'), "vcpus"),
    (_spec(measure='backend = "guest"\nvmstat = ["pg fault"]'), "is not a /proc/vmstat row name"),
])
def test_kernel_mistakes_are_one_line_naming_the_fix(text, words):
    with pytest.raises(SpecError) as e:
        parse_spec(text, "k.toml")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_cache_geometry_goes_with_cache_sim():
    exp = parse_spec(_spec(measure='backend = "guest"\ncache_sim = true\nl1i = "16K,4,64"'))
    assert exp.measure.cache_sim and exp.measure.l1i == "16K,4,64"


def test_a_missing_image_is_named_before_anything_runs(tmp_path):
    exp = parse_spec(_spec(kernel_a=f'image = "{tmp_path}/vmlinuz-none"'))
    with pytest.raises(UsageError, match="kernel image .*vmlinuz-none not found; install linux-image-amd64"):
        resolve_kernel(exp.variants[0], tmp_path, print)


def test_a_prebuilt_image_finds_its_system_map(tmp_path):
    (tmp_path / "vmlinuz-6.1.0-x").write_bytes(b"MZ")
    (tmp_path / "System.map-6.1.0-x").write_text("ffffffff81000000 T _text\n")
    exp = parse_spec(_spec(kernel_a=f'image = "{tmp_path}/vmlinuz-6.1.0-x"\ncmdline = "quiet"'))
    kernel = resolve_kernel(exp.variants[0], tmp_path, print)
    assert kernel.symbols == tmp_path / "System.map-6.1.0-x"
    request = launch_request(kernel, exp.variants[0], exp.measure, "tcg", {"cache": False}, ["/bin/true"],
                             tmp_path / "r.json", 540.0)
    assert request["cmdline"] == "quiet" and request["argv"] == ["/bin/true"]

    from perfab.run.backends.guest import GuestBackend

    backend = GuestBackend(exp.measure, tmp_path)
    backend.kernels, backend.accel = {"a": kernel}, "tcg"
    workload = exp.workloads[0]  # timeout 600 s: a hung guest must fail inside it, with its console's tail
    request = backend.for_side(exp.variants[0], workload).request(["/bin/true"], tmp_path / "r.json")
    assert 0 < request["timeout_s"] < workload.timeout_s


def test_no_qemu_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="no qemu-system-x86_64 on this machine; install qemu-system-x86"):
        choose_accel("auto", print)
