"""Markdown and JSON reports of seed 000's experiment: raw samples in JSON, one markdown row per metric."""

from __future__ import annotations

from scheme_helpers import L1I_K, L1I_U, report

WARMUPS = 2


def _written(perf, side: str, event: str) -> list[float]:
    """The counts the fake perf wrote for ``event`` on ``side``, measured runs in plan order."""
    return [w.counts[event] for w in perf.written[WARMUPS:] if w.side == side and event in w.events]


def test_json_rows_carry_the_raw_samples_in_run_order(seed000, rows):
    _, _, perf = seed000
    for event in ("cycles", "instructions", L1I_U, L1I_K):
        assert rows[event]["base_values"] == _written(perf, "outline", event)
        assert rows[event]["exp_values"] == _written(perf, "inline", event)
    ipc = [i / c for i, c in zip(_written(perf, "inline", "instructions"), _written(perf, "inline", "cycles"))]
    assert rows["IPC"]["exp_values"] == ipc
    assert rows["wall_s"]["base_values"] == [w.wall_s for w in perf.written[WARMUPS:] if w.side == "outline"]
    assert all(len(r["base_values"]) == r["n_base"] and len(r["exp_values"]) == r["n_exp"] for r in rows.values())


def test_json_row_fields(rows):
    k = rows[L1I_K]
    assert (k["label"], k["variant"], k["unit"], k["higher_is_better"], k["method"]) == (
        "L1i-miss :k (kernel)", "inline", "count", False, "nonparametric")
    assert k["ci_lo"] <= k["delta"] <= k["ci_hi"] and k["q"] <= 0.05 and k["ci_lo"] > k["margin"]
    assert rows["IPC"]["higher_is_better"] is True and rows["ops/s"]["unit"] == "ops/s"


def test_markdown_has_one_table_row_per_metric(seed000, rows):
    md = report(seed000[0], "markdown")
    lines = md.splitlines()
    header = lines.index("| Metric | Variant | Baseline | Experiment | Delta | Sig |")
    assert lines[header + 1] == "|---|---|---:|---:|---:|---|"
    table = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    assert len(table) == len(rows) and all(len(cells) == 6 for cells in table)
    by_label = {cells[0]: cells for cells in table}
    assert sorted(by_label) == sorted(r["label"] for r in rows.values())  # each metric exactly once
    k = rows[L1I_K]
    assert by_label["L1i-miss :k (kernel)"][1:] == [
        "inline", f"{k['median_base']:,.0f}", f"{k['median_exp']:,.0f}", f"{100 * k['delta']:+.2f}%", r"\*\*"]
    assert by_label["Instructions (total)"][5] == "flat" and by_label["Cycles (total)"][5] == "ns"
    assert "### rocksdb" in md and "`./build/{variant}/db_bench -benchmarks=deleteseq`" in md
