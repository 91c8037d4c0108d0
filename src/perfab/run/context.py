"""What surrounds a side's runs of a workload: setup, the service, teardown.

A ``SideContext`` belongs to one (workload, side, sweep point).  Entering it
runs the side's ``setup`` commands and starts the workload's service with
that side's placeholders (a server build or config of that side, never the
first side's); leaving it stops the service and runs ``teardown``, always.
The runner enters a new context whenever the plan switches cell, so with
an interleaved plan the service restarts on every switch and each run
talks to its own side's server.  A backend that runs the service itself
(in a guest, beside the workload) gets it expanded from ``service_spec``
and nothing starts here.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from perfab.errors import PerfabError
from perfab.run.services import Service, run_shell
from perfab.specfile import Experiment, Variant, Workload, expand, placeholders
from perfab.store import Params


class SideContext:
    """Setup, service and teardown around one cell's consecutive runs; use as a context manager."""

    def __init__(self, exp: Experiment, workload: Workload, variant: Variant, params: Params,
                 env: dict[str, str], cwd: str | None, say: Callable[[str], None],
                 source: dict[str, str] | None = None, starts_service: bool = True):
        self.exp, self.workload, self.variant, self.params = exp, workload, variant, params
        self.starts_service = starts_service  # False: the backend starts the service (in a guest)
        self.env, self.cwd, self.say = env, cwd, say
        self.values = placeholders(exp, variant, workload, params, source)
        self.service: Service | None = None
        self.log: Path | None = None
        self._stack = ExitStack()

    @property
    def quiet(self) -> bool:
        """Entering and leaving do nothing: the side has no setup or teardown and no service starts here."""
        return not (self.variant.setup or self.variant.teardown or (self.workload.service and self.starts_service))

    @property
    def key(self) -> tuple[str, str, Params]:
        return (self.workload.name, self.variant.name, self.params)

    def __enter__(self) -> "SideContext":
        try:
            self._stack.callback(self._teardown)
            for command in self.variant.setup:
                run_shell(expand(command, self.values), self.env, self.cwd, f"setup of variant {self.variant.name!r}")
            if self.workload.service and self.starts_service:
                self.service = self._stack.enter_context(self._start_service())
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _start_service(self) -> Service:
        svc = self.workload.service
        argv = [expand(a, self.values, f"workload {self.workload.name!r} service argv") for a in svc.argv]
        cwd = svc.cwd and expand(svc.cwd, self.values, f"workload {self.workload.name!r} service cwd")
        service = Service(argv, svc.port, svc.ready_timeout_s, self.env, cwd,
                          service_log_dir(self.exp, self.workload, self.variant, self.params))
        self.log = service.log
        return service

    def service_spec(self) -> dict | None:
        """The workload's service for this side and point, expanded, for a backend that starts it itself."""
        svc = self.workload.service
        if svc is None:
            return None
        where = f"workload {self.workload.name!r} service"
        return {"argv": [expand(a, self.values, f"{where} argv") for a in svc.argv],
                "cwd": expand(svc.cwd, self.values, f"{where} cwd") if svc.cwd else (self.cwd or os.getcwd()),
                "port": svc.port, "ready_s": svc.ready_timeout_s, "cpus": svc.cpus}

    def service_problem(self) -> str | None:
        """Why the service cannot serve this run (it exited), or None."""
        if self.service is None:
            return None
        if not self.service.alive():
            return f"the service exited before or during the run (log: {self.log})"
        return None

    def service_usage(self) -> dict[str, float] | None:
        """What the whole service tree used so far, None without a service.

        User and system time come in clock ticks (/proc/PID/stat); the time on
        a CPU is the scheduler's, exact to the nanosecond (schedstat); read and
        write system calls from /proc/PID/io."""
        if self.service is None:
            return None
        times = self.service.cpu_times()
        return {"user_s": times.user_s, "sys_s": times.sys_s, "run_ns": float(self.service.run_ns()),
                **{k: float(v) for k, v in self.service.io_counts().items()}}

    def _teardown(self) -> None:
        for command in self.variant.teardown:
            try:
                run_shell(expand(command, self.values), self.env, self.cwd, "teardown")
            except PerfabError as e:
                self.say(f"warning: {e}")


def service_log_dir(exp: Experiment, workload: Workload, variant: Variant, params: Params) -> Path:
    """A directory per service start that outlives the session: ``<log>/<experiment>/<workload>-<side>-<time>``."""
    point = "".join(f"-{k}{v}" for k, v in params)
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.monotonic_ns() % 1_000_000:06d}"
    return Path(workload.service.log_dir) / _safe(exp.name) / _safe(f"{workload.name}-{variant.name}{point}-{stamp}")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text)
