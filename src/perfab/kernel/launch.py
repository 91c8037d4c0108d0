"""One run of a workload in a guest kernel: ``python -m perfab.kernel.launch REQUEST.json``.

This is the process perfab's runner executes for a run on a kernel side.
It reads a JSON request, boots (``perfab.kernel.qemu.boot``), copies the
workload's stdout and stderr to its own, writes a result JSON and exits with
the workload's exit status, or 125 when the guest failed (panic, hang,
never reaching the workload), or 2 on a bad request.

Request keys (``kernel`` and ``argv`` required):
  kernel       bzImage or vmlinux path
  argv         the workload's command in the guest (list of strings)
  result       where to write the result JSON (default: REQUEST.json's stem + ".result.json")
  cmdline      extra kernel command line ("")
  vcpus        1;  memory_mb  1024;  accel  "auto" | "tcg" | "kvm"
  plugin       null, or {"cache": bool, "l1i": "32768:8:64", "l1d": ..., "ll": ...,
                         "branch": bool, "coherence": bool}
  deterministic  true: under TCG, fixed RTC, no address/stack randomisation, icount (SMP: CPUs onlined by init)
  cwd          "/";  env  {"NAME": "value"};  files  [host paths copied in]
  root         "initramfs" (the workload's files copied in) or "host" (this machine's root over 9p)
  maps         [[host directory, guest directory], ...]: shown at the guest path (the same on every side)
  service      null, or {"argv": [...], "cwd": "/", "port": N, "ready_s": 10, "cpus": "1"}: a server
               started in the guest before the workload (pinned to cpus, the workload to the others)
  timeout_s    300
  symbols      null; "guest" (the guest's /proc/kallsyms, fetched once per kernel and cached);
               or a System.map / vmlinux path: the top kernel symbols
  top          20 (symbols listed per ranking)
  cache_dir    null (~/.cache/perfab/kernel)
  snapshot     false; true: start from the saved guest of this machine, kernel and files (TCG with icount;
               perfab.kernel.snapshot), the first such boot saving it
  keep         8: saved guests kept in the cache (at least 8; a session's boots need one each)
  randomized   false; true: the guest's own randomisation stays on (ASLR, kernel stack offsets), seeded by its
               command line and ``entropy`` (perfab.replication)
  entropy      "": hex of the bytes credited to the guest's random pool before the workload ("": fixed bytes)
  spin         0: iterations the launcher spins before the workload's start marker

Result keys:
  status, failure, console_tail, accel, vcpus_seen, guest_wall_s, host_wall_s,
  start ("booted", "saved": booted and saved at the snapshot point, "restored": from the saved guest),
  snapshot (the saved guest's key, or null), snapshot_note (why a boot to the point did not save it, or null),
  service {"before": {user_s, sys_s, run_ns, syscr, syscw, procs}, "after": {...}} (with a service),
  deltas {"irq.TLB": n, "vmstat.pgfault": n, ...},
  windows [{"index", "vcpus", "insns_user", "insns_kernel",
            "cache": {"l1i"|"l1d"|"ll": {size, assoc, line, refs_user, refs_kernel,
                                          misses_user, misses_kernel}},
            "per_vcpu": [{"insns_user", "insns_kernel"}, ...],
            "branches": {bc_user, bcm_user, bi_user, bim_user, bc_kernel, ..., unresolved} (branch model),
            "coherence": {hitm_user, hitm_kernel, invalidations_user, invalidations_kernel} (coherence model)}],
  counts {"insns_user", "insns_kernel", and with the cache model
          "l1i_refs_user", "l1i_misses_kernel", ..., with the branch model "bc_user", "bcm_kernel", ...,
          with the coherence model "hitm_user", "invalidations_kernel", ... summed over windows},
  per_vcpu [{"insns_user", "insns_kernel"}, ...] per vCPU index, summed over windows,
  symbols null or {"by_insns": [[name, insns, l1i_misses], ...], "by_l1i_misses": [...],
                   "by_branch_misses": [[name, bc, bcm, bi, bim], ...] (branch model),
                   "by_hitm": [[name, hitm, invalidations], ...] (coherence model)}
  (summed over windows),
  hitm_lines [{"line": "symbol+0xOFF", "symbol+0xOFF [cpuN]" or "0xADDR", "vaddr", "paddr", "hitm",
               "invalidations", "vcpus"}, ...]
  (coherence model: the data lines with the most HITM, kernel data named by symbol, per-CPU data by symbol
  and CPU, summed over windows),
  percpu_bases ["0xADDR", ...] (coherence model with known symbols: each CPU's __per_cpu_offset, read from
  the running guest over QMP (perfab.kernel.qmp) when the workload starts; [] when not read).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict, replace
from pathlib import Path

from perfab.errors import PerfabError, UsageError
from perfab.kernel import image, initramfs, qemu, tcg
from perfab.kernel.tcg import KernelSymbols

GUEST_FAILURE_EXIT = 125
KEYS = {"kernel", "argv", "result", "cmdline", "vcpus", "memory_mb", "accel", "plugin", "deterministic",
        "cwd", "env", "files", "timeout_s", "symbols", "top", "cache_dir", "root", "maps", "service", "snapshot",
        "keep", "randomized", "entropy", "spin"}


def request_from_json(doc: dict) -> qemu.BootRequest:
    """The boot request a JSON request describes; a bad key or type is a UsageError."""
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise UsageError(f"unknown key(s) {', '.join(unknown)} in the launch request: use {', '.join(sorted(KEYS))}")
    for key in ("kernel", "argv"):
        if key not in doc:
            raise UsageError(f"the launch request has no {key!r}: add it")
    argv = doc["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise UsageError("argv in the launch request must be a non-empty list of strings")
    plugin = doc.get("plugin")
    try:
        opts = None if plugin is None else qemu.PluginOptions(**plugin)
    except TypeError as e:
        raise UsageError(f"plugin in the launch request: {e}; use cache, l1i, l1d, ll") from e
    env = doc.get("env") or {}
    return qemu.BootRequest(
        kernel=str(doc["kernel"]), argv=tuple(argv), cmdline=str(doc.get("cmdline", "")),
        vcpus=int(doc.get("vcpus", 1)), memory_mb=int(doc.get("memory_mb", 1024)),
        accel=str(doc.get("accel", "auto")), plugin=opts,
        deterministic=bool(doc.get("deterministic", True)),
        cwd=str(doc.get("cwd", "/")), env=tuple((str(k), str(v)) for k, v in env.items()),
        files=tuple(str(f) for f in doc.get("files", ())), timeout_s=float(doc.get("timeout_s", 300)),
        kallsyms=doc.get("symbols") == "guest", cache_dir=doc.get("cache_dir"),
        root=str(doc.get("root", "initramfs")), maps=tuple((str(a), str(b)) for a, b in doc.get("maps", ())),
        service=_service(doc.get("service")), snapshot=bool(doc.get("snapshot", False)),
        keep=int(doc.get("keep") or qemu.SAVED_KEPT), randomized=bool(doc.get("randomized", False)),
        entropy=_hex(doc.get("entropy") or ""), spin=int(doc.get("spin") or 0))


def _hex(text: str) -> bytes:
    """The request's ``entropy`` as bytes; text that is not hex is a UsageError."""
    try:
        return bytes.fromhex(str(text))
    except ValueError:
        raise UsageError(f"entropy in the launch request is not hex ({str(text)[:40]!r}); give the bytes as hex") \
            from None


def _service(doc: dict | None) -> initramfs.Service | None:
    """The request's server, or None."""
    if doc is None:
        return None
    try:
        return initramfs.Service(argv=tuple(str(a) for a in doc["argv"]), cwd=str(doc.get("cwd") or "/"),
                                 port=None if doc.get("port") is None else int(doc["port"]),
                                 ready_s=float(doc.get("ready_s", 10.0)), cpus=doc.get("cpus"))
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"service in the launch request is not usable ({e}); give argv, and port, ready_s, "
                         "cpus as numbers and a CPU list") from e


def result_to_json(res: qemu.BootResult, symbols: KernelSymbols | None, top: int) -> dict:
    """The result document written beside the run."""
    return {
        "status": res.status, "failure": res.failure, "console_tail": res.console_tail,
        "accel": res.accel, "vcpus_seen": res.vcpus_seen, "guest_wall_s": res.guest_wall_s,
        "host_wall_s": res.host_wall_s, "deltas": res.deltas, "service": res.service or None,
        "start": res.start, "snapshot": res.snapshot or None, "snapshot_note": res.snapshot_note or None,
        "windows": [_window_json(w) for w in res.records],
        "counts": summed_counts(res.records),
        "per_vcpu": summed_per_vcpu(res.records),
        "symbols": _symbols_json(symbols.text, res.records, top) if symbols and res.records else None,
        "hitm_lines": _lines_json(symbols, res, top),
        "percpu_bases": [f"{b:#x}" for b in res.percpu_bases],
    }


def _window_json(w: tcg.Window) -> dict:
    body = {"index": w.index, "vcpus": w.vcpus, "insns_user": w.insns_user,
            "insns_kernel": w.insns_kernel, "cache": {k: asdict(v) for k, v in w.cache.items()},
            "per_vcpu": [{"insns_user": u, "insns_kernel": k} for u, k in w.per_vcpu]}
    for model in ("branches", "coherence"):
        if getattr(w, model) is not None:
            body[model] = asdict(getattr(w, model))
    return body


def summed_counts(windows: tuple[tcg.Window, ...]) -> dict[str, int]:
    """Counts over every window: insns_user/kernel, LEVEL_refs|misses_user|kernel and the models' counts
    (bc|bcm|bi|bim_user|kernel, hitm|invalidations_user|kernel)."""
    out: dict[str, int] = {}
    for w in windows:
        out["insns_user"] = out.get("insns_user", 0) + w.insns_user
        out["insns_kernel"] = out.get("insns_kernel", 0) + w.insns_kernel
        for level, c in w.cache.items():
            for kind in ("refs_user", "refs_kernel", "misses_user", "misses_kernel"):
                key = f"{level}_{kind}"
                out[key] = out.get(key, 0) + getattr(c, kind)
        for model in (w.branches, w.coherence):
            for key, value in (asdict(model) if model is not None else {}).items():
                if key != "unresolved":
                    out[key] = out.get(key, 0) + value
    return out


def summed_per_vcpu(windows: tuple[tcg.Window, ...]) -> list[dict[str, int]]:
    """User and kernel instructions of each vCPU index over every window."""
    sums: list[list[int]] = []
    for w in windows:
        for i, (user, kernel) in enumerate(w.per_vcpu):
            if i == len(sums):
                sums.append([0, 0])
            sums[i][0] += user
            sums[i][1] += kernel
    return [{"insns_user": u, "insns_kernel": k} for u, k in sums]


def _symbols_json(source: list, windows: tuple[tcg.Window, ...], top: int) -> dict:
    first = windows[0]
    merged = tcg.Window(index=0, vcpus=first.vcpus, insns_user=0, insns_kernel=0,
                        kernel_tbs=tuple(tb for w in windows for tb in w.kernel_tbs),
                        branches=first.branches, coherence=first.coherence,
                        kernel_tb_branches=tuple(tb for w in windows for tb in w.kernel_tb_branches),
                        kernel_tb_coherence=tuple(tb for w in windows for tb in w.kernel_tb_coherence))
    by_insns, by_misses = tcg.symbolize(source, merged, top=top)
    body = {"by_insns": [[s.name, s.insns, s.l1i_misses] for s in by_insns],
            "by_l1i_misses": [[s.name, s.insns, s.l1i_misses] for s in by_misses]}
    for key, rows in tcg.symbolize_events(source, merged, top=top).items():
        body[key] = [[s.name, *s.counts] for s in rows]
    return body


def _lines_json(symbols: KernelSymbols | None, res: qemu.BootResult, top: int) -> list[dict]:
    """The data lines with the most HITM over every window (summed by physical line), named (per-CPU data by
    CPU when the boot read the per-CPU bases)."""
    merged: dict[int, tcg.DataLine] = {}
    for line in (line for w in res.records for line in w.hitm_lines):
        seen = merged.get(line.paddr)
        merged[line.paddr] = line if seen is None else tcg.DataLine(
            seen.vaddr, seen.paddr, seen.hitm + line.hitm, seen.invalidations + line.invalidations,
            tuple(sorted(set(seen.vcpus) | set(line.vcpus))))
    ranked = sorted(merged.values(), key=lambda d: (-d.hitm, -d.invalidations, d.paddr))[:top]
    named = tcg.name_lines(symbols.data if symbols else [], tuple(ranked), symbols.percpu if symbols else [],
                           res.percpu_bases)
    return [{"line": name, **asdict(line)} for name, line in named]


def _guest_symbols(source: str | None, res: qemu.BootResult) -> KernelSymbols | None:
    """The guest's kallsyms, when the request asked for them ("guest")."""
    if source != "guest":
        return None
    text = res.kallsyms.decode("utf-8", "replace")
    found = KernelSymbols(tcg.parse_symbols(text), tcg.data_symbols(text))
    return found if found.text else None


def _known_symbols(source: str | None, req: qemu.BootRequest) -> KernelSymbols | None:
    """The symbols known before the boot: a System.map or vmlinux, or the kallsyms an earlier guest of the same
    kernel sent (cached); None when the guest has yet to send them."""
    if source == "guest":
        cached = image.cached_kallsyms(req.kernel, Path(req.cache_dir) if req.cache_dir else qemu.default_cache())
        text = (cached or b"").decode("utf-8", "replace")
        found = KernelSymbols(tcg.parse_symbols(text), tcg.data_symbols(text), tcg.percpu_symbols(text))
        return found if found.text else None
    return tcg.read_kernel_symbols(source) if source else None


def _with_percpu(req: qemu.BootRequest, symbols: KernelSymbols | None) -> qemu.BootRequest:
    """Under the coherence model, ask the boot for the per-CPU bases, to name per-CPU lines by CPU."""
    if symbols is None or req.plugin is None or not req.plugin.coherence or not symbols.percpu:
        return req
    return replace(req, percpu_at=tcg.percpu_table(symbols.data))


def run(request_path: str, stdout=None, stderr=None) -> int:
    """Boot for one request file; returns the exit code (workload status, 125 or 2)."""
    out = stdout or sys.stdout.buffer
    err = stderr or sys.stderr.buffer
    try:
        doc = json.loads(Path(request_path).read_text())
        if not isinstance(doc, dict):
            raise UsageError(f"{request_path} is not a JSON object: write the launch request as one")
        req = request_from_json(doc)
        result_path = Path(doc.get("result") or Path(request_path).with_suffix(".result.json"))
        source = doc.get("symbols")
        symbols = _known_symbols(source, req)
        res = qemu.boot(_with_percpu(req, symbols))
        symbols = (symbols or _guest_symbols(source, res)) if res.records else None
        body = result_to_json(res, symbols, int(doc.get("top", 20)))
    except (OSError, ValueError) as e:
        err.write(f"perfab.kernel.launch: cannot use {request_path}: {e}\n".encode())
        return 2
    except PerfabError as e:
        err.write(f"perfab.kernel.launch: {e}\n".encode())
        return e.exit_code
    out.write(res.stdout)
    err.write(res.stderr)
    if res.failure:
        err.write(f"perfab.kernel.launch: {res.failure}\n".encode())
    if res.service_log and (res.failure or res.status):
        err.write(b"perfab.kernel.launch: the end of the service's log:\n" + res.service_log[-2000:] + b"\n")
    _write_json(result_path, body)
    return GUEST_FAILURE_EXIT if res.failure else int(res.status or 0) & 0xFF


def _write_json(path: Path, body: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(body, indent=1))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    # a runner stopping this run with SIGTERM must not leave the guest running:
    # SystemExit unwinds through boot(), which kills QEMU's process group
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m perfab.kernel.launch REQUEST.json\n")
        return 2
    return run(args[0])


if __name__ == "__main__":
    sys.exit(main())
