"""The server's cost under a client-bound benchmark: nginx with access_log off vs on, driven by ab.

ab is the bottleneck, so its requests/s may well be `ns`; what the log
costs shows on the server: one more write(2) per request (a count,
deterministic) and more CPU time per request (scheduler accounting of the
server's threads).  Everything runs on 127.0.0.1 with a free port.

The count is asserted at any load, and the CPU row only so far as it
cannot go the wrong way: on this 2-core machine, quiet by perfab's own
/proc/stat reading, five runs of this experiment measured the CPU cost per
request between -1.8% and +7.9%, so at 12 or 20 runs per side a `**` is
not something a test can require.  Eight runs per side keep both (the
counts decide at any n; the CPU row only may not go the wrong way): at
twelve, the experiment was this suite's slowest fixture, 3 minutes on a busy
machine.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from perfab.cli import main
from perfab.machine.busy import Busy
from perfab.store import Store

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None or shutil.which("ab") is None,
                                reason="nginx (nginx-light) and ab (apache2-utils) are installed by make test")

RUNS = 8  # measured runs per side

CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx-{side}.pid;
error_log {dir}/error-{side}.log;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
    {log}
    server {{ listen 127.0.0.1:{port}; root {dir}/www; location / {{ }} }}
}}
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _experiment(tmp_path, runs: int) -> str:
    port = _port()
    (tmp_path / "www").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "www" / "index.html").write_text("x" * 1024)
    for side, log in (("off", "access_log off;"), ("on", f"access_log {tmp_path}/access.log;")):
        (tmp_path / f"nginx-{side}.conf").write_text(CONF.format(dir=tmp_path, side=side, log=log, port=port))
    spec = tmp_path / "nginx.toml"
    spec.write_text(f"""
[experiment]
name = "nginx-access-log"
runs = {runs}
warmup = 1
pin = "0"

[[variant]]
name = "log-off"
vars = {{conf = "{tmp_path}/nginx-off.conf"}}

[[variant]]
name = "log-on"
vars = {{conf = "{tmp_path}/nginx-on.conf"}}

[[workload]]
name = "ab"
argv = ["ab", "-q", "-n", "10000", "-c", "4", "http://127.0.0.1:{port}/index.html"]
parser = "ab"
timeout = 60

[workload.service]
argv = ["taskset", "-c", "1", "nginx", "-c", "{{conf}}"]
port = {port}
requests = "complete_requests"
log = "{tmp_path}/logs"

[[workload.metric]]
name = "failed_requests"
check = 0
""")
    return str(spec)


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict, Busy | None, Path]:
    """The experiment run once: its rows by metric, other work while it ran (from its session), its directory."""
    if os.cpu_count() < 2:
        pytest.skip("needs two CPUs: one for nginx, one for ab")
    tmp_path = tmp_path_factory.mktemp("nginx")
    spec = _experiment(tmp_path, runs=RUNS)
    db = tmp_path / "r.db"
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", spec, "--db", str(db), "--format", "json"], out, err)
    assert code == 0, err.getvalue()
    with Store(db, readonly=True) as store:
        (session,) = store.sessions("nginx-access-log")
    return {r["metric"]: r for r in json.loads(out.getvalue())["rows"]}, Busy.from_env(session.environment), tmp_path


def test_access_log_costs_the_server_one_write_per_request_at_any_load(measured):
    """Counts hold whatever else the machine does: one more write(2) per request, exactly."""
    rows, busy, tmp_path = measured
    assert rows["failed_requests"]["verdict"] == "valid"
    writes = rows["service_writes_per_req"]
    assert writes["median_exp"] - writes["median_base"] == 1.0 and writes["verdict"] == "**"  # one log write
    assert (tmp_path / "access.log").stat().st_size > 0  # the log-on side really logged
    cpu = rows["service_cpu_us_per_req"]
    assert cpu["higher_is_better"] is False and cpu["n_base"] == cpu["n_exp"] == RUNS
    assert not (cpu["verdict"] == "**" and cpu["delta"] < 0), cpu  # logging never makes the server cheaper
    assert busy is not None and busy.runs == 2 * (RUNS + 1)  # every run's window was read, warmups too
