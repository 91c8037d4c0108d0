"""The ``perfab screen`` table: which workloads can show a kernel code-size cost."""

from __future__ import annotations

from perfab.run.backends.perfscreen import ScreenResult


def format_screen(results: list[ScreenResult]) -> str:
    """One row per command, most promising first (see ``perfscreen.rank``)."""
    lines = [f"{'Frontend':>9} {'Kernel':>7} {'Ctx-sw/s':>10}  Command", "-" * 72]
    notes = []
    for r in results:
        frontend = (r.topdown or {}).get("tma_frontend_bound")
        fe = "-" if frontend is None or frontend != frontend else f"{100 * frontend:.1f}%"
        ks = "-" if r.kernel_share is None else f"{100 * r.kernel_share:.1f}%"
        cs = "-" if r.ctx_switches_per_s is None else f"{r.ctx_switches_per_s:,.0f}"
        command = " ".join(r.argv[2:] if r.argv[:2] == ("/bin/sh", "-c") else r.argv)
        lines.append(f"{fe:>9} {ks:>7} {cs:>10}  {command[:48]}")
        if r.note and r.note not in notes:
            notes.append(r.note)
    lines.append("-" * 72)
    lines.append("Frontend = tma_frontend_bound (perf stat -M TopdownL1); Kernel = system / (user + system) time.")
    lines.append("Good i-cache screens: high frontend-bound together with non-trivial kernel time.")
    lines += [f"Note: {n}" for n in notes]
    return "\n".join(lines) + "\n"
