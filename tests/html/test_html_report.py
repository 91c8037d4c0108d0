"""``perfab report --format html``: the page's table, plots, prose and options, without a browser."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from html_helpers import LOCKBENCH, THREE, TWO, analysis_of, cells, cli, lockbench, parse, run_fake, text_table

from perfab.analyse.diagnostics import Diagnostic, Kind
from perfab.profile import compare_profiles
from perfab.report import render
from perfab.report.document import document
from perfab.report.html import render_html


def _verdict_rows(page) -> list[list[str]]:
    table = parse(page).all("table", "verdicts")[0]
    return [cells(tr) for tr in table.all("tbody")[0].all("tr")]


def test_table_shows_the_text_reports_numbers_and_verdicts(improved):
    a = analysis_of(improved)
    text = render(a, "text")
    html_rows = _verdict_rows(render_html(document(a)))
    text_rows = text_table(text, "lock+unlock ops/s")
    assert len(html_rows) == len(text_rows) == 8
    for h, t in zip(html_rows, text_rows):
        label, base, exp, delta, _interval, sig = h
        assert [label, base, exp, delta, sig] == t
    assert html_rows[0][5] == "**" and html_rows[1][5] == "flat"


def test_three_sides_show_the_normalized_table_of_the_text_report(db):
    run_fake(LOCKBENCH.format(runs=12, variants=THREE, label="lock+unlock ops/s"), db,
             lockbench({"outline": 1.0, "inline": 1.03, "inline-O3": 0.97}))
    a = analysis_of(db)
    text_rows = text_table(render(a, "text"), "lock+unlock ops/s")
    html_rows = _verdict_rows(render_html(document(a)))
    assert len(html_rows) == len(text_rows)
    for h, t in zip(html_rows, text_rows):
        assert " ".join(h).split() == " ".join(t).split()
    assert html_rows[0][2].startswith("10") and html_rows[0][2].endswith("**")
    assert html_rows[0][3].startswith("9") and html_rows[0][3].endswith("**")


def test_every_row_links_to_a_section_with_its_plots(improved):
    doc = parse(render_html(document(analysis_of(improved))))
    links = [a.attrs["href"] for a in doc.all("table", "verdicts")[0].all("a")]
    assert len(links) == 8 and len(set(links)) == 8
    for href in links:
        section = doc.by_id(href.removeprefix("#"))
        assert section is not None and "metric" in section.attrs["class"], href
        svgs = section.all("svg")
        assert len(svgs) == 3, href  # runs, delta, run order
        assert all(svg.all("path", "dots") for svg in (svgs[0], svgs[2]))


def test_runs_plot_draws_every_run_of_every_side(improved):
    a = analysis_of(improved)
    doc = parse(render_html(document(a)))
    ops = next(r for r in a.rows if r.metric == "ops/s")
    runs = doc.by_id("w0-p0-m0").all("svg")[0]
    per_side = [p.attrs["d"].count("h0") for p in runs.all("path", "dots")]
    assert per_side == [len(ops.base_values), len(ops.exp_values)] == [12, 12]


def test_delta_plot_shows_the_interval_against_the_margin_band(improved):
    a = analysis_of(improved)
    doc = parse(render_html(document(a)))
    ops = next(r for r in a.rows if r.metric == "ops/s")
    delta = doc.by_id("w0-p0-m0").all("svg")[1]
    band = delta.all("rect", "margin")[0]
    ci = [ln for ln in delta.all("line", "ci") if ln.attrs["y1"] == ln.attrs["y2"]][0]
    left, right = float(band.attrs["x"]), float(band.attrs["x"]) + float(band.attrs["width"])
    # ** : the whole interval lies right of the +margin edge of the band
    assert ops.verdict == "**" and ops.estimate.lo > ops.margin
    assert float(ci.attrs["x1"]) > right > left
    checksum = doc.by_id("w0-p0-m1").all("svg")[1]
    assert "+0.00% flat" in checksum.text()


def test_drift_is_marked_in_the_run_order_plot(db):
    run_fake(LOCKBENCH.format(runs=16, variants=TWO, label="ops"), db,
             lockbench({"outline": 1.0, "inline": 1.0}, drift={"inline": 0.01}))
    a = analysis_of(db)
    ops = next(r for r in a.rows if r.metric == "ops/s")
    assert any(w.text.startswith("drift across run order on inline") for w in ops.warnings)
    order = parse(render_html(document(a))).by_id("w0-p0-m0").all("svg")[2]
    assert len(order.all("line", "trend")) == 1 and "s1" in order.all("line", "trend")[0].attrs["class"]
    assert [t.shown() for t in order.all("text", "warn")] == ["inline \u26a0 drift"]


SWEEP = """\
[experiment]
name = "sweep"
runs = 6
warmup = 0
seed = 1

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "scale"
argv = ["bench-{variant}", "{threads}"]
parser = "keyvalue"
params = { threads = [1, 2, 4] }

[[workload.metric]]
name = "ops/s"
direction = "higher"
"""


def _scaling():
    """ops/s = threads * 1e6 (b 2% faster) times the same six wobbles at every point: constant per thread."""
    wobbles = [1.0, 1.002, 0.998, 1.001, 0.999, 1.003]
    seen: dict[tuple, int] = {}

    def behaviour(argv, env):
        i = seen[tuple(argv)] = seen.get(tuple(argv), -1) + 1
        speed = 1.02 if argv[0].endswith("b") else 1.0
        return _outcome(f"ops/s: {round(int(argv[1]) * 1_000_000 * speed * wobbles[i % 6])}\n")

    return behaviour


def _outcome(stdout: str):
    from perfab.run.executor import FakeOutcome

    return FakeOutcome(wall_s=0.01, stdout=stdout.encode())


def test_sweep_plots_rates_per_thread(db):
    run_fake(SWEEP, db, _scaling())
    a = analysis_of(db)
    doc = parse(render_html(document(a)))
    sweep = next(s for s in doc.all("svg") if s.attrs["aria-label"] == "ops/s against threads")
    assert "per thread" in sweep.text()
    base = sweep.all("polyline", "join")[0]
    ys = {pt.split(",")[1] for pt in base.attrs["points"].split()}
    assert len(base.attrs["points"].split()) == 3 and len(ys) == 1  # total ops/s triples; per thread it is flat
    wall = next(s for s in doc.all("svg") if s.attrs["aria-label"] == "Time elapsed (s) against threads")
    assert "per thread" not in wall.text()
    table = doc.all("table", "verdicts")[0]
    points = [cells(tr)[1] for tr in table.all("tbody")[0].all("tr")]
    # ops/s and six rusage rows per point
    assert sorted(set(points)) == ["threads=1", "threads=2", "threads=4"] and len(points) == 3 * 7
    ticks = [t.shown() for t in sweep.all("text", "tick")]
    assert ticks[-4:] == ["1", "2", "4", "threads"]  # sweep points in numeric order, whatever the plan's order
    delta = next(s for s in doc.all("svg") if s.attrs["aria-label"] == "delta of ops/s against threads")
    assert delta.all("rect", "margin") and len(delta.all("line", "ci")) == 3


COUNTERS = """\
[experiment]
name = "counters"
runs = 8
warmup = 0
seed = 1

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "sys"
argv = ["bench-{variant}"]
parser = "regex"
parser_options = { patterns = { "cycles:u" = 'cycles:u (\\d+)', "cycles:k" = 'cycles:k (\\d+)' } }

[[workload.metric]]
name = "cycles:u"
direction = "lower"

[[workload.metric]]
name = "cycles:k"
direction = "lower"
"""


def test_user_and_kernel_counts_side_by_side(db):
    k_of = {"a": [3000, 3010, 2990, 3005, 2995, 3001, 2999, 3003],
            "b": [6000, 6010, 5990, 6005, 5995, 6001, 5999, 6003]}
    calls: dict[str, int] = {}

    def behaviour(argv, env):
        side = argv[0][-1]
        i = calls.setdefault(side, 0)
        calls[side] += 1
        return _outcome(f"cycles:u {7000 + i}\ncycles:k {k_of[side][i % 8]}\n")

    run_fake(COUNTERS, db, behaviour)
    page = render_html(document(analysis_of(db)))
    doc = parse(page)
    split = doc.all("table", "split")[0]
    rows = [cells(tr) for tr in split.all("tbody")[0].all("tr")]
    # medians of 8 runs: u 7003.5 on both sides, k 3000.5 and 6000.5 (shown rounded, as the text report does)
    assert rows[0] == ["a", "7,004", "3,000"]
    assert rows[1][0] == "b" and rows[1][1].startswith("7,004 (+0.00%") and rows[1][2].startswith("6,000 (+")
    assert rows[1][2].endswith("**)")
    plot = next(s for s in doc.all("svg") if s.attrs["aria-label"] == "user/kernel split of cycles:u")
    assert len(plot.all("rect", "user")) == len(plot.all("rect", "kernel")) == 2
    assert [t.shown() for t in plot.all("text", "value")] == ["30.0% :k", "46.1% :k"]


def test_profiles_list_the_top_symbols_per_side(improved):
    a = analysis_of(improved)
    base = [{"self.cycles:k.lock": 40.0 + i, "self.cycles:u.main": 20.0, "self.cycles:u.<b>bold</b>": 5.0}
            for i in range(4)]
    exp = [{"self.cycles:k.lock": 30.0 + i, "self.cycles:u.main": 30.0, "self.cycles:u.<b>bold</b>": 5.0}
           for i in range(4)]
    a = replace(a, profiles={("lockbench", "inline"): compare_profiles(base, exp, alpha=0.05)})
    page = render_html(document(a))
    doc = parse(page)
    table = doc.all("table", "profile")[0]
    rows = [cells(tr) for tr in table.all("tbody")[0].all("tr")]
    assert rows[0][:5] == ["self.cycles:k.lock", "41.50", "2", "-10.0", "31.50"] and rows[0][6] == "*"
    assert "self.cycles:u.<b>bold</b>" in [r[0] for r in rows] and "<b>bold" not in page
    plot = next(s for s in doc.all("svg") if s.attrs["aria-label"] == "profile of outline and inline")
    assert len(plot.all("rect")) == 6


def test_warnings_environment_notes_and_setup_are_shown(improved):
    a = analysis_of(improved)
    a = replace(a, env_differences=(("inline", "kernel.release", "6.1.0-test", "6.2.0-test"),),
                warnings=a.warnings + (Diagnostic(Kind.WORKLOADS_CHANGED, "the workloads changed between sessions"),),
                notes=("cachegrind: user space only",))
    doc = parse(render_html(document(a)))
    setup = doc.all("pre", "setup")[0].text()
    assert "Hardware: 1x Test CPU 3000" in setup and "runs     : outline 12, inline 12 measured" in setup
    env = doc.by_id("environment")
    assert env is not None and "6.2.0-test" in doc.text()
    assert doc.by_id("warnings") is not None and "the workloads changed between sessions" in doc.text()
    assert doc.by_id("notes") is not None and "cachegrind: user space only" in doc.text()
    legend = doc.all("div", "legend")[0].text()
    assert "** = beyond per-run noise" in legend and "Minimum detectable effect" in legend


def test_failed_runs_and_row_warnings_are_listed(db):
    n = iter(range(1000))

    def behaviour(argv, env):
        side = argv[0].split("/")[2]
        if side == "inline" and next(n) == 2:
            return _fail(b"lock table full\n")
        return lockbench({"outline": 1.0, "inline": 1.03})(argv, env)

    run_fake(LOCKBENCH.format(runs=6, variants=TWO, label="ops").replace("seed = 1", "seed = 1\nmax_failures = 3"),
             db, behaviour)
    doc = parse(render_html(document(analysis_of(db))))
    problems = [li.text() for li in doc.all("ul", "problems")[0].all("li")]
    assert problems[0] == "Failed runs on inline: 1 (exit status 1: lock table full)"


def _fail(stderr: bytes):
    from perfab.run.executor import FakeOutcome

    return FakeOutcome(exit_code=1, stderr=stderr)


def test_page_fetches_nothing_and_runs_no_script(improved):
    page = render_html(document(analysis_of(improved)))
    assert page.startswith("<!DOCTYPE html>")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    assert "default-src 'none'" in policy and "script-src 'none'" in policy
    assert "<script" not in page
    urls = re.findall(r'(?:src|href)="([^"#][^"]*)"', page)
    assert urls == ["data:,"]  # the empty icon, so the browser asks for no favicon
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg"}


def test_report_option_writes_the_file(improved, tmp_path):
    out = tmp_path / "report.html"
    code, stdout, stderr = cli("report", "--db", improved, "--format", "html", "-o", out)
    assert (code, stdout, stderr) == (0, "", "")
    assert out.read_text() == render_html(document(analysis_of(improved)))
    code, stdout, _ = cli("report", "--db", improved, "--output", tmp_path / "r.txt")
    assert code == 0 and stdout == "" and (tmp_path / "r.txt").read_text() == cli("report", "--db", improved)[1]


def test_unwritable_output_is_one_line_exit_2(improved, tmp_path):
    code, stdout, stderr = cli("report", "--db", improved, "--format", "html", "-o", tmp_path / "no" / "r.html")
    assert code == 2 and stdout == "" and stderr.count("\n") == 1
    assert stderr.startswith("perfab: cannot write the report to ") and "No such file or directory" in stderr


def test_text_stays_the_default_format(improved):
    code, out, _ = cli("report", "--db", improved)
    assert code == 0 and out.startswith("perfab: lockbench-html\n") and "<" not in out


@pytest.mark.parametrize("no_report", [False, True])
def test_run_writes_the_html_report_after_the_run(tmp_path, no_report):
    spec = tmp_path / "spec.toml"
    spec.write_text('[experiment]\nname = "real"\nruns = 2\nwarmup = 0\n[[variant]]\nname = "a"\n'
                    '[[variant]]\nname = "b"\n[[workload]]\nname = "true"\nargv = ["true"]\n')
    out = tmp_path / "run.html"
    args = ["run", spec, "--db", tmp_path / "r.db", "--html", out] + (["--no-report"] if no_report else [])
    code, stdout, _ = cli(*args)
    assert code == 0 and out.exists()
    doc = parse(out.read_text())
    assert doc.all("table", "verdicts") and "Time elapsed (s)" in doc.text()
    assert (stdout == "") == no_report
    if not no_report:
        assert stdout == cli("report", "--db", tmp_path / "r.db")[1]


def test_readme_html_commands_parse():
    from html_helpers import REPO

    from perfab.cli import build_parser

    section = (REPO / "README.md").read_text().split("## HTML report", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("#")[0].split()[1:] for line in section.splitlines() if line.startswith("    perfab ")]
    assert len(commands) == 3
    for argv in commands:
        args = build_parser().parse_args(argv)
        assert args.format == "html" or getattr(args, "html", None) == "report.html", argv
