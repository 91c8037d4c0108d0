"""write() of the tunable checks, into a tree of real-shaped files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from machine_trees import CPU, put
from perfab.errors import PerfabError, UsageError
from perfab.machine import checks
from perfab.machine.checks import Aslr, Boost, Governor, NmiWatchdog, Smt, TransparentHugepages


def test_exactly_the_five_settings_are_tunable():
    tunable = {c.name for c in checks() if c.tunable}
    assert tunable == {"cpufreq.governor", "cpufreq.boost", "kernel.aslr", "kernel.nmi_watchdog", "mm.thp"}


def test_aslr_write_then_show(tmp_path):
    put(tmp_path, {"proc/sys/kernel/randomize_va_space": "2\n"})
    Aslr(tmp_path).write("0")
    assert (tmp_path / "proc/sys/kernel/randomize_va_space").read_text() == "0\n"
    assert Aslr(tmp_path).show() == "off (0)"


def test_governor_written_on_every_online_cpu(tmp_path):
    files = {f"{CPU}/online": "0-2\n"}
    files.update({f"{CPU}/cpu{n}/cpufreq/scaling_governor": "powersave\n" for n in range(3)})
    put(tmp_path, files)
    Governor(tmp_path).write("performance")
    assert Governor(tmp_path).show() == "performance"
    assert Governor(tmp_path).advice() is None


def test_boost_off_through_no_turbo_writes_one(tmp_path):
    put(tmp_path, {f"{CPU}/intel_pstate/no_turbo": "0\n"})
    Boost(tmp_path).write("off")
    assert (tmp_path / CPU / "intel_pstate/no_turbo").read_text() == "1\n"
    assert Boost(tmp_path).show() == "off"


def test_boost_prefers_cpufreq_boost(tmp_path):
    put(tmp_path, {f"{CPU}/cpufreq/boost": "1\n", f"{CPU}/intel_pstate/no_turbo": "0\n"})
    Boost(tmp_path).write("off")
    assert (tmp_path / CPU / "cpufreq/boost").read_text() == "0\n"
    assert (tmp_path / CPU / "intel_pstate/no_turbo").read_text() == "0\n"


def test_nmi_watchdog_and_thp(tmp_path):
    put(tmp_path, {
        "proc/sys/kernel/nmi_watchdog": "1\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
    })
    NmiWatchdog(tmp_path).write("off")
    TransparentHugepages(tmp_path).write("madvise")
    assert (tmp_path / "proc/sys/kernel/nmi_watchdog").read_text() == "0\n"
    assert (tmp_path / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "madvise\n"


def test_bad_value_and_untunable_setting_are_usage_errors(tmp_path):
    put(tmp_path, {"proc/sys/kernel/randomize_va_space": "2\n"})
    with pytest.raises(UsageError, match="use one of 0, 1, 2"):
        Aslr(tmp_path).write("full")
    with pytest.raises(UsageError, match="not a setting perfab can change"):
        Smt(tmp_path).write("off")
    assert (tmp_path / "proc/sys/kernel/randomize_va_space").read_text() == "2\n"


def test_missing_file_is_not_created(tmp_path):
    with pytest.raises(PerfabError, match="does not exist on this machine") as err:
        Boost(tmp_path).write("off")
    assert "\n" not in str(err.value)
    assert not (tmp_path / CPU / "cpufreq/boost").exists()


def test_write_refused_without_root_names_the_fix(tmp_path):
    """A child process drops to uid 65534 and tries the write; root ignores file modes."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    put(tmp_path, {"proc/sys/kernel/randomize_va_space": "2\n"})
    message = _in_unprivileged_child(lambda: Aslr(tmp_path).write("0"))
    assert "run as root" in message and "randomize_va_space" in message
    assert (tmp_path / "proc/sys/kernel/randomize_va_space").read_text() == "2\n"


def test_reading_refused_without_root_is_unknown(tmp_path):
    """The same unprivileged child gets EACCES (pytest's tmp dirs are 0700): unknown, no raise."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    put(tmp_path, {"proc/sys/kernel/randomize_va_space": "2\n"})
    (tmp_path / "proc/sys/kernel/randomize_va_space").chmod(0o600)
    shown = _in_unprivileged_child(lambda: Aslr(tmp_path).show())
    assert shown == "unknown"


def _in_unprivileged_child(action) -> str:
    """Run ``action`` as uid 65534 in a fork; the str of its result or PerfabError."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        os.close(read_fd)
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                text = str(action())
            except PerfabError as err:
                text = str(err)
            os.write(write_fd, text.encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text


def test_tmp_tree_is_not_the_live_system(tmp_path):
    inside = Aslr(tmp_path).path("/proc/sys/kernel/randomize_va_space")
    assert inside == Path(tmp_path, "proc/sys/kernel/randomize_va_space")
