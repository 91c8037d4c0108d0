"""End to end: what kernel engineers run, inside the guest of each side (Debian's prebuilt 6.1 kernel).

- a server and its load generator in the guest: nginx and ab over the
  guest's own loopback, the server pinned to vCPU 1 and ab to vCPU 0, the
  server's usage and what vCPU 1 ran, per request, as rows;
- an installed, dynamically linked benchmark run from this machine's root
  filesystem (``root = "host"``) without listing a file: Debian's
  ``perf bench``, with its shared libraries;
- equal user code on two sides whose build directories differ in length
  counts equal user instructions, because each side's directory is shown
  at one guest path; at the two host paths it does not.

No kernel is built; each test boots the image ``make test`` installs
(linux-image-amd64) under TCG, one boot per run.
"""

from __future__ import annotations

import glob
import io
import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from perfab.cli import main
from perfab.kernel import qemu

IMAGES = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not IMAGES or shutil.which("qemu-system-x86_64") is None,
                                reason="make test installs qemu-system-x86 and linux-image-amd64")
NGINX, AB = shutil.which("nginx") or "/usr/sbin/nginx", shutil.which("ab") or "/usr/bin/ab"
PORT = 18080
LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	for (long i = 0; i < n; i++)
		s += syscall(SYS_getppid);
	printf("calls: %ld\n", n + 0 * s);
	return 0;
}
"""


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, out, err)
    return code, out.getvalue(), err.getvalue()


def _rows(db: Path, name: str) -> dict[str, dict]:
    code, out, err = _run(["report", name, "--db", str(db), "--format", "json", "--all"])
    assert code == 0, err
    return {r["metric"]: r for r in json.loads(out)["rows"]}


def _sides(image: str, extra: str = "") -> str:
    return "".join(f"""
[[variant]]
name = "{name}"
{extra.replace("NAME", name)}
[variant.kernel]
image = "{image}"
cmdline = "{cmdline}"
""" for name, cmdline in (("nopti", "pti=off"), ("pti", "pti=on")))


def _dynamic(path: Path) -> bool:
    """An ELF with a program interpreter (PT_INTERP): it runs only with its loader and libraries."""
    import struct

    data = path.read_bytes()[:65536]
    if data[:4] != b"\x7fELF":
        return False
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3 for i in range(phnum))


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not Path(NGINX).exists() or not Path(AB).exists(), reason="make sysdeps installs nginx and ab")
def test_a_server_and_its_client_run_in_the_guest_over_its_loopback(tmp_path):
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""daemon off; worker_processes 1; error_log stderr; pid {tmp_path}/nginx.pid;
events {{ worker_connections 64; }}
http {{ access_log off; server {{ listen 127.0.0.1:{PORT}; location / {{ return 200 "hello\\n"; }} }} }}
""")
    spec = tmp_path / "nginx.toml"
    spec.write_text(f"""
[experiment]
name = "guest-nginx"
runs = 1
warmup = 0
[measure]
backend = "guest"
accel = "tcg"
root = "host"
memory = 384
vcpus = 2
{_sides(IMAGES[-1])}
[[workload]]
name = "ab"
argv = ["{AB}", "-q", "-n", "300", "-c", "2", "http://127.0.0.1:{PORT}/"]
parser = "ab"
timeout = 300
[workload.service]
argv = ["{NGINX}", "-c", "{conf}", "-p", "{tmp_path}"]
port = {PORT}
ready_timeout = 60
requests = "complete_requests"
counters = "cpus"
cpus = "1"
""")
    code, plan, err = _run(["plan", str(spec)])
    assert code == 0, err
    assert "in each run's guest" in plan and "inside the guest" in plan and "start service" not in plan, plan
    assert "pinned to vCPUs 1" in plan, plan
    db = tmp_path / "r.db"
    code, out, err = _run(["run", str(spec), "--db", str(db), "--no-report"])
    assert code == 0, err
    assert not _listening(PORT), "nothing of the guest's server listens on this machine"
    rows = _rows(db, "guest-nginx")
    assert rows["complete_requests"]["median_base"] == 300 == rows["complete_requests"]["median_exp"]
    assert rows["failed_requests"]["median_base"] == 0
    for side in ("median_base", "median_exp"):
        assert rows["service_writes_per_req"][side] >= 1, rows["service_writes_per_req"]  # a response each
        assert 0 < rows["service_cpu_s"][side] < 5, rows["service_cpu_s"]
        assert rows["service_cpu_us_per_req"][side] > 0
        assert rows["instructions:k"][side] > rows["instructions:u"][side] > 0  # loopback TCP is kernel work
        server, whole = rows["service.instructions:k"][side], rows["instructions:k"][side]
        assert 0 < server < whole, (server, whole)  # vCPU 1 ran the server: a share of the guest's kernel work
        assert rows["service_insns_k_per_req"][side] == pytest.approx(server / 300)


def test_an_installed_benchmark_runs_from_the_hosts_root_without_listing_its_files(tmp_path):
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("make sysdeps installs linux-perf")
    assert _dynamic(Path(perf).resolve()), "perf is linked dynamically: the guest needs its libraries"
    spec = tmp_path / "bench.toml"
    spec.write_text(f"""
[experiment]
name = "guest-perf-bench"
runs = 1
warmup = 0
[measure]
backend = "guest"
accel = "tcg"
root = "host"
{_sides(IMAGES[-1])}
[[workload]]
name = "pipe"
argv = ["perf", "bench", "sched", "pipe", "-l", "2000"]
parser = "perf-bench"
timeout = 300
""")
    db = tmp_path / "r.db"
    code, out, err = _run(["run", str(spec), "--db", str(db), "--no-report"])
    assert code == 0, err
    rows = _rows(db, "guest-perf-bench")
    assert rows["sched_pipe_total_s"]["median_base"] > 0, rows.keys()
    user, kernel = rows["instructions:u"], rows["instructions:k"]
    assert kernel["median_exp"] > 0 and kernel["median_base"] > 0
    assert abs(user["median_exp"] - user["median_base"]) <= 1e-3 * user["median_base"], user  # the same program


@pytest.fixture(scope="module")
def loops(tmp_path_factory) -> tuple[Path, Path]:
    """One static getppid loop, copied into two build directories whose paths differ in length."""
    root = tmp_path_factory.mktemp("paths")
    (root / "loop.c").write_text(LOOP)
    short, long_ = root / "a", root / "a-much-longer-build-directory"
    for d in (short, long_):
        d.mkdir()
        subprocess.run(["gcc", "-O2", "-static", "-o", str(d / "loop"), str(root / "loop.c")], check=True)
    assert (short / "loop").read_bytes() == (long_ / "loop").read_bytes()
    return short / "loop", long_ / "loop"


def test_equal_user_code_counts_equal_user_instructions_whatever_the_build_path(loops, tmp_path):
    short, long_ = loops
    spec = tmp_path / "paths.toml"
    spec.write_text(f"""
[experiment]
name = "guest-paths"
runs = 1
warmup = 0
[measure]
backend = "guest"
accel = "tcg"
[[variant]]
name = "short"
vars = {{ dir = "{short.parent}" }}
[variant.kernel]
image = "{IMAGES[-1]}"
[[variant]]
name = "long"
vars = {{ dir = "{long_.parent}" }}
[variant.kernel]
image = "{IMAGES[-1]}"
[[workload]]
name = "loop"
argv = ["{{dir}}/loop", "5000"]
timeout = 200
""")
    db = tmp_path / "r.db"
    code, out, err = _run(["run", str(spec), "--db", str(db), "--no-report"])
    assert code == 0, err
    user = _rows(db, "guest-paths")["instructions:u"]
    assert user["median_base"] == user["median_exp"] > 0, user
    at_host_paths = [qemu.boot(qemu.BootRequest(kernel=IMAGES[-1], argv=(str(p), "5000"), accel="tcg",
                                                plugin=qemu.PluginOptions(), timeout_s=200,
                                                cache_dir=str(tmp_path / "kc"))) for p in (short, long_)]
    counts = [r.records[0].insns_user for r in at_host_paths]
    assert counts[0] != counts[1], "the control: at their own paths the two sides' stacks differ"
