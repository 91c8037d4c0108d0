"""RealExecutor on real processes: exit codes, signals, start failures, cwd, env, PATH, pinning, signal state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from perfab.run.executor import RealExecutor
from perfab.run.trampoline import cpu_mask, encode_request

ENV = dict(os.environ, LC_ALL="C")


@pytest.fixture(scope="module")
def executor():
    with RealExecutor() as ex:
        yield ex


def run(executor, argv, env=ENV, cwd=None, cpus=None, timeout_s=10.0):
    return executor.execute(list(argv), env, cwd, timeout_s, 65536, cpus)


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_exit_code_is_the_workload_s(executor, code):
    ex = run(executor, ["sh", "-c", f"exit {code}"])
    assert ex.error is None and ex.exit_code == code and ex.signal is None
    assert os.WIFEXITED(ex.status) and os.WEXITSTATUS(ex.status) == code


def test_sigsegv_is_signal_11(executor):
    ex = run(executor, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert ex.signal == 11 and ex.exit_code is None and not ex.timed_out
    assert os.WIFSIGNALED(ex.status) and os.WTERMSIG(ex.status) == signal.SIGSEGV


def test_missing_program_is_an_error_text(executor):
    ex = run(executor, ["./nope"])
    assert ex.status is None
    assert ex.error == "cannot execute './nope': No such file or directory"


def test_program_not_on_path_is_an_error_text(executor):
    ex = run(executor, ["perfab-no-such-program-here", "x"])
    assert ex.error == "cannot execute 'perfab-no-such-program-here': No such file or directory"


def test_missing_cwd_names_the_directory(executor, tmp_path):
    ex = run(executor, ["true"], cwd=str(tmp_path / "gone"))
    assert ex.error == f"cannot execute 'true': cannot enter '{tmp_path / 'gone'}': No such file or directory"


def test_a_failed_start_leaves_the_server_serving(executor):
    assert run(executor, ["./nope"]).error is not None
    assert run(executor, ["sh", "-c", "echo fine"]).stdout == b"fine\n"


def test_cwd_and_env_reach_the_workload(executor, tmp_path):
    env = dict(ENV, PERFAB_TEST_MARK="m42")
    ex = run(executor, ["sh", "-c", "pwd; echo $PERFAB_TEST_MARK; echo ${PERFAB_UNSET-unset}"], env, str(tmp_path))
    assert ex.stdout.decode().split() == [str(tmp_path), "m42", "unset"]


def test_without_cwd_the_workload_runs_where_perfab_is_now(executor, tmp_path, monkeypatch):
    run(executor, ["true"])  # the server starts in the old directory
    monkeypatch.chdir(tmp_path)
    assert run(executor, ["pwd"]).stdout.decode().strip() == str(tmp_path)


def test_program_is_looked_up_in_the_env_s_path(executor, tmp_path):
    prog = tmp_path / "perfab-hello"
    prog.write_text("#!/bin/sh\necho from-env-path\n")
    prog.chmod(0o755)
    env = dict(ENV, PATH=f"{tmp_path}:{ENV.get('PATH', os.defpath)}")
    assert run(executor, ["perfab-hello"], env).stdout == b"from-env-path\n"


def test_stdin_is_dev_null(executor):
    ex = run(executor, ["sh", "-c", "cat; readlink /proc/self/fd/0"])
    assert ex.exit_code == 0 and ex.stdout == b"/dev/null\n"


def test_pinning_is_seen_by_the_workload(executor):
    before = os.sched_getaffinity(0)
    for cpu in sorted(before):
        ex = run(executor, [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], cpus={cpu})
        assert ex.stdout == f"[{cpu}]\n".encode()
    ex = run(executor, [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"])
    assert ex.stdout == f"{sorted(before)}\n".encode()  # unpinned runs are not left pinned
    assert os.sched_getaffinity(0) == before  # nor is perfab


def test_pinning_to_a_cpu_that_does_not_exist_is_an_error_text(executor):
    ex = run(executor, ["true"], cpus={4095})
    assert ex.error == "cannot execute 'true': cannot pin it to the CPUs asked for: Invalid argument"


def test_signals_reach_the_workload_at_their_defaults(executor):
    """Python ignores SIGPIPE; a workload must not inherit that (``yes | head`` would complain)."""
    ex = run(executor, ["sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status; yes | head -c 1 >/dev/null"])
    assert ex.exit_code == 0 and ex.stderr == b""
    assert ex.stdout.split() == [b"SigBlk:", b"0" * 16, b"SigIgn:", b"0" * 16]


def test_direct_spawn_keeps_the_same_meanings(tmp_path):
    with RealExecutor(use_helper=False) as direct:
        assert run(direct, ["sh", "-c", "exit 7"]).exit_code == 7
        assert run(direct, ["./nope"]).error == "cannot execute './nope': No such file or directory"
        ex = run(direct, ["sh", "-c", "pwd; yes | head -c 1 >/dev/null"], cwd=str(tmp_path))
        assert ex.stdout == f"{tmp_path}\n".encode() and ex.stderr == b""
        assert direct.server_pid is None


def test_cpu_mask_sets_one_bit_per_cpu():
    words = cpu_mask({0, 63, 64, 130})
    assert len(words) == 3 * 8
    assert int.from_bytes(words[:8], sys.byteorder) == (1 << 63) | 1
    assert int.from_bytes(words[8:16], sys.byteorder) == 1
    assert int.from_bytes(words[16:], sys.byteorder) == 1 << 2
    assert cpu_mask(None) == b"" == cpu_mask(set())


@pytest.mark.parametrize("argv, env, cwd, message", [
    (["a\0b"], {}, "/", "argv[0] 'a\\x00b' contains a NUL byte"),
    (["true"], {"A=B": "1"}, "/", "environment variable name 'A=B' is empty or contains '='"),
    (["true"], {"": "1"}, "/", "environment variable name '' is empty or contains '='"),
    (["true"], {"X": "1\0"}, "/", "environment variable 'X' contains a NUL byte"),
    (["true"], {}, "/t\0", "working directory '/t\\x00' contains a NUL byte"),
    ([], {}, "/", "argv must not be empty"),
])
def test_strings_exec_cannot_take_are_refused_before_sending(argv, env, cwd, message):
    with pytest.raises(ValueError) as info:
        encode_request(argv, env, cwd, None)
    assert str(info.value) == message


BAD_STRINGS = [
    (["echo", "a\0b"], {}, None, "argv[1] 'a\\x00b' contains a NUL byte"),
    (["echo"], {"A=B": "1"}, None, "environment variable name 'A=B' is empty or contains '='"),
    (["echo"], {"": "1"}, None, "environment variable name '' is empty or contains '='"),
    (["echo"], {"X": "a\0b"}, None, "environment variable 'X' contains a NUL byte"),
    (["echo"], {}, "/tm\0p", "working directory '/tm\\x00p' contains a NUL byte"),
]


@pytest.mark.parametrize("use_helper", [True, False], ids=["server", "direct"])
@pytest.mark.parametrize("argv, extra_env, cwd, why", BAD_STRINGS)
def test_bad_strings_are_an_error_text_naming_them_not_a_traceback(use_helper, argv, extra_env, cwd, why):
    """Regression: a NUL byte or a bad environment name raised ValueError out of execute."""
    with RealExecutor(use_helper) as ex:
        r = ex.execute(argv, dict(ENV, **extra_env), cwd, 10, 4096, None)
        assert r.status is None and r.error == f"cannot execute 'echo': {why}"
        assert ex.execute(["echo", "ok"], ENV, None, 10, 4096, None).stdout == b"ok\n"


def test_a_refused_string_keeps_the_server(executor):
    run(executor, ["true"])
    server = executor.server_pid
    assert "contains a NUL byte" in run(executor, ["echo", "a\0b"]).error
    assert executor.server_pid == server and run(executor, ["echo", "ok"]).stdout == b"ok\n"


def test_signals_glibc_reserves_are_reset_too(tmp_path):
    """Regression: a server started while signal 32 was ignored passed that on to every workload."""
    script = tmp_path / "ignore32.py"
    script.write_text(
        "import ctypes, os, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "ignore = ctypes.create_string_buffer(struct.pack('QQQQ', 1, 0, 0, 0))  # SIG_IGN, no flags\n"
        "assert libc.syscall(13, 32, ignore, None, 8) == 0  # rt_sigaction(32) on x86-64\n"
        "from perfab.run.executor import RealExecutor\n"
        "with RealExecutor() as ex:\n"
        "    out = ex.execute(['grep', '^SigIgn', '/proc/self/status'], dict(os.environ), None, 10, 4096, None)\n"
        "print(out.stdout.decode().split()[1])\n")
    if os.uname().machine != "x86_64":
        pytest.skip("the raw rt_sigaction call above is x86-64's")
    own = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert own.stdout.strip() == "0" * 16
