"""Bad input for a kexec session: each is one line naming the cause and the fix, before anything is stored.

The machine's side is read from a directory tree standing for ``/`` (what
a machine without kexec, with kexec disabled, under lockdown, without a PMU
shows there); the images are Debian's signed 6.1 kernel and copies of it
with the signature table cut or a config beside it that lacks an option.
The last tests ask this machine itself, which has no kexec.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perfab.cli import main
from perfab.errors import SpecError, UsageError
from perfab.kexec import driver
from perfab.kexec.identity import image_facts, signed
from perfab.specfile import load_spec, parse_spec
from perfab.store import open_store

from kexec_helpers import IMAGE, Bench, FakeMachine, copy_image, host_tree, kexec_spec

pytestmark = pytest.mark.skipif(IMAGE is None, reason="Debian's 6.1 kernel image is not in /boot")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kcache")


def _begin(tmp: Path, cache: Path, spec: Path, **host) -> str:
    """The one line ``begin`` refuses with; nothing stored."""
    bench = Bench(tmp, FakeMachine(host_tree(tmp / "root", **host)), cache)
    db = tmp / "r.db"
    try:
        with open_store(db) as store, pytest.raises(UsageError) as info:
            driver.begin(load_spec(spec), store, bench.ctx, str(db))
        with open_store(db) as store:
            assert store.experiments() == [] and bench.machine.calls == []
    finally:
        bench.close()
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("host, words", [
    (dict(kexec=False), "cannot kexec (no /sys/kernel/kexec_loaded: CONFIG_KEXEC is off); boot a kernel built with"),
    (dict(disabled=True), "kexec is disabled until the next reboot (kernel.kexec_load_disabled = 1"),
    (dict(init="systemd"), "perfab-kexec.service is not enabled, so nothing would continue the session after the "
                           "first reboot: run `perfab kexec unit --install`"),
])
def test_a_machine_that_cannot_switch_is_refused(tmp_path, cache, host, words):
    assert words in _begin(tmp_path, cache, kexec_spec(tmp_path, IMAGE), **host)


def test_an_unprivileged_user_is_refused(tmp_path, cache):
    bench = Bench(tmp_path, FakeMachine(host_tree(tmp_path / "root")), cache)
    bench.machine.host = type(bench.machine.host)(bench.machine.host.root, euid=1000)
    with open_store(tmp_path / "r.db") as store, pytest.raises(UsageError, match=r"needs root \(CAP_SYS_BOOT\)"):
        driver.begin(load_spec(kexec_spec(tmp_path, IMAGE)), store, bench.ctx, "r.db")
    bench.close()


def test_lockdown_refuses_an_unsigned_kernel_and_takes_a_signed_one(tmp_path, cache):
    unsigned = copy_image(tmp_path, IMAGE, unsign=True)
    assert signed(IMAGE.read_bytes()) and not signed(unsigned.read_bytes())
    line = _begin(tmp_path, cache, kexec_spec(tmp_path, unsigned), lockdown="integrity")
    assert re.search(r"secure boot: the running kernel is locked down \(integrity\) and refuses the unsigned "
                     r"kernel of side 'on' \(.*\); sign it \(sbsign", line)
    bench = Bench(tmp_path / "b", FakeMachine(host_tree(tmp_path / "b" / "root", lockdown="integrity")), cache)
    with open_store(tmp_path / "s.db") as store:
        driver.begin(load_spec(kexec_spec(tmp_path, IMAGE)), store, bench.ctx, "s.db")
    assert bench.machine.loaded[2] is True  # kexec_file_load (kexec -s): the only load lockdown allows
    bench.close()


def test_a_kernel_without_kexec_is_refused_naming_its_config(tmp_path, cache):
    image = copy_image(tmp_path, IMAGE, config_edit=lambda t: re.sub(r"^CONFIG_KEXEC(_FILE)?=y$",
                                                                       r"# CONFIG_KEXEC\1 is not set", t, flags=re.M))
    line = _begin(tmp_path, cache, kexec_spec(tmp_path, image))
    assert "lacks CONFIG_KEXEC or CONFIG_KEXEC_FILE (to kexec from it into the next side; its config: " in line
    assert line.endswith("build it with that option")


def test_the_perf_backend_needs_perf_events_in_the_side_kernel(tmp_path, cache):
    image = copy_image(tmp_path, IMAGE, config_edit=lambda t: t.replace("CONFIG_PERF_EVENTS=y",
                                                                          "# CONFIG_PERF_EVENTS is not set"))
    spec = kexec_spec(tmp_path, image, backend='backend = "perf"\ncounters = ["cycles", "task-clock"]')
    assert "lacks CONFIG_PERF_EVENTS (for the perf backend's counters" in _begin(tmp_path, cache, spec)


def test_hardware_counters_without_a_pmu_are_refused_and_software_ones_are_not(tmp_path, cache):
    spec = kexec_spec(tmp_path, IMAGE, backend='backend = "perf"\ncounters = ["cycles:u", "task-clock"]')
    line = _begin(tmp_path, cache, spec, pmu=False)
    assert line.startswith("this machine has no PMU (no /sys/bus/event_source/devices/cpu) for cycles:u")
    soft = kexec_spec(tmp_path, IMAGE, backend='backend = "perf"\ncounters = ["task-clock", "page-faults"]')
    bench = Bench(tmp_path / "b", FakeMachine(host_tree(tmp_path / "b" / "root", pmu=False)), cache)
    with open_store(tmp_path / "s.db") as store:
        assert driver.begin(load_spec(soft), store, bench.ctx, "s.db").kind == "switching"
    bench.close()


def test_a_side_kernel_without_a_pmu_fails_before_its_runs(tmp_path, cache):
    spec = kexec_spec(tmp_path, IMAGE, backend='backend = "perf"\ncounters = ["cycles", "task-clock"]')
    bench = Bench(tmp_path, FakeMachine(host_tree(tmp_path / "root")), cache)
    exp = load_spec(spec)
    with open_store(tmp_path / "r.db") as store:
        driver.begin(exp, store, bench.ctx, "r.db")
        shutil.rmtree(tmp_path / "root/sys/bus/event_source/devices/cpu")  # the side's kernel has no PMU driver
        step = driver.proceed(bench.states.read(), exp, store, bench.ctx)
        rows = store.run_rows("kx")
    bench.close()
    assert step.kind == "failed" and "the kernel of side" in step.text and "has no PMU" in step.text
    assert rows and all(r["status"] == "failed" for r in rows)


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace('backend = "time"', 'backend = "guest"'), '"guest" boots guests, and boot = "kexec" runs'),
    (lambda s: s.replace('boot = "kexec"\nimage', 'image', 1), "side 'on' does not kexec while another side does"),
    (lambda s: s.replace("runs = 2", 'runs = "auto"'), "a kexec session plans its boots before the first one"),
    (lambda s: s.replace("warmup = 0", "warmup = 0\nlayout_check = true"), 'is not run with boot = "kexec"'),
    (lambda s: s.replace('name = "on"', 'name = "on"\nexternal = true\ndetect = "uname -r"\ndetect_pattern = "x"')
     .replace('name = "off"', 'name = "off"\nexternal = true\ndetect = "uname -r"\ndetect_pattern = "y"'),
     "perfab switches kexec sides itself"),
    (lambda s: s.replace('boot = "kexec"\n', "").replace('cmdline = "pti=on"', 'cmdline = "pti=on"\ninitrd = "/x"')
     .replace('backend = "time"', 'backend = "guest"'), 'is read only with boot = "kexec"'),
])
def test_spec_mistakes_of_kexec_sides_are_one_line(tmp_path, edit, words):
    text = edit(kexec_spec(tmp_path, IMAGE).read_text())
    with pytest.raises(SpecError) as info:
        parse_spec(text, "kx.toml")
    assert words in str(info.value) and "\n" not in str(info.value)


def test_this_machine_cannot_kexec_and_says_so_before_storing_anything(tmp_path):
    """The machine these tests run on has no kexec in its kernel: `perfab run` and `perfab kexec check` say so."""
    if Path("/sys/kernel/kexec_loaded").exists():
        pytest.skip("this machine can kexec")
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    for argv in (["run", str(spec), "--db", str(db)], ["kexec", "check", str(spec)]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out, err) == 2
        assert re.fullmatch(r"perfab: the running kernel \S+ cannot kexec \(no /sys/kernel/kexec_loaded: "
                            r"CONFIG_KEXEC is off\); boot a kernel built with CONFIG_KEXEC=y first\n", err.getvalue())
    if db.exists():
        with open_store(db) as store:
            assert store.experiments() == []


def test_the_image_facts_are_the_ones_binutils_reads(tmp_path):
    from perfab.kernel.image import vmlinux_of

    facts = image_facts(IMAGE, tmp_path)
    release = IMAGE.name.removeprefix("vmlinuz-")
    assert facts.release == release and facts.signed and facts.config == f"/boot/config-{release}"
    vmlinux = tmp_path / "vmlinux"
    vmlinux.write_bytes(vmlinux_of(IMAGE.read_bytes()))
    notes = subprocess.run(["readelf", "-n", str(vmlinux)], capture_output=True, text=True).stdout
    assert f"Build ID: {facts.build_id}" in notes
    strings = subprocess.run(["file", "-b", str(IMAGE)], capture_output=True, text=True).stdout
    assert f"version {release} " in strings  # file(1) reads the same header field


def test_the_unit_verifies_with_systemd(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze")
    out = io.StringIO()
    assert main(["kexec", "unit", "--state-dir", str(tmp_path)], out, io.StringIO()) == 0
    unit = tmp_path / "perfab-kexec.service"
    unit.write_text(out.getvalue())
    assert f"ConditionPathExists={tmp_path}/session.json" in out.getvalue()
    assert re.search(r"^ExecStart=\S+ kexec resume$", out.getvalue(), re.M)
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout + done.stderr == ""


def test_a_session_does_not_start_from_a_kernel_a_session_kexecd_into(tmp_path, cache):
    from dataclasses import replace

    from kexec_helpers import HOME

    bench = Bench(tmp_path, FakeMachine(host_tree(tmp_path / "root")), cache)
    bench.machine.current = replace(HOME, cmdline=HOME.cmdline + " pti=off perfab.boot=s4.b2")
    with open_store(tmp_path / "r.db") as store, pytest.raises(UsageError) as info:
        driver.begin(load_spec(kexec_spec(tmp_path, IMAGE)), store, bench.ctx, "r.db")
    bench.close()
    assert "booted by a kexec session of perfab (s4.b2 on its command line)" in str(info.value)
    assert str(info.value).endswith("reboot into the default boot entry first")


def test_the_plain_runner_refuses_kexec_sides(tmp_path):
    """Run by the runner alone, both sides would run on the kernel this machine runs now."""
    from perfab.run.backends import TimeBackend
    from perfab.run.executor import FakeExecutor
    from perfab.run.runner import Runner

    exp = load_spec(kexec_spec(tmp_path, IMAGE))
    with open_store(tmp_path / "r.db") as store, pytest.raises(UsageError, match="kernels this machine kexecs into"):
        Runner(exp, store, TimeBackend(), FakeExecutor(), {}).run()
