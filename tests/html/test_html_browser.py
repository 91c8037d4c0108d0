"""The HTML pages in a real browser: headless Chromium over the DevTools protocol (see ``html_browser``).

Each page is loaded from a file with the Runtime, Log, Page and Network
domains listening: the tests assert no console error, no exception, no
dialog and no request beyond the file itself, that the table is there, and
that every plot drew (a non-empty box, and pixels in the sides' colours in
a screenshot of it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from html_browser import colored_pixels, png_size
from html_helpers import LOCKBENCH, TWO, analysis_of, lockbench, rename_variant, run_fake
from html_size import size_cli
from test_html_report import COUNTERS, SWEEP, _outcome, _scaling

from perfab.profile import compare_profiles
from perfab.report.document import document
from perfab.report.html import render_html
from perfab.run.executor import FakeOutcome

SVG_BOXES = """Array.from(document.querySelectorAll('svg')).map(s => {
  const box = s.getBoundingClientRect(), drawn = s.getBBox();
  return [box.width, box.height, drawn.width, drawn.height, s.querySelectorAll('path,line,rect,polyline').length];
})"""


def _load(browser, page: str, path: Path):
    path.write_text(page)
    load = browser.open(path)
    assert load.errors() == [] and load.dialogs == [] and load.fetched() == []
    return load


def _every_plot_drew(browser) -> int:
    boxes = browser.evaluate(SVG_BOXES)
    assert boxes, "no plot on the page"
    for i, (w, h, dw, dh, marks) in enumerate(boxes):
        assert w > 100 and h > 40 and dw > 50 and dh > 20 and marks > 3, (i, w, h, dw, dh, marks)
    return len(boxes)


def test_report_renders_in_chromium(browser, improved, tmp_path):
    a = analysis_of(improved)
    _load(browser, render_html(document(a)), tmp_path / "report.html")
    assert browser.evaluate("document.querySelectorAll('table.verdicts tbody tr').length") == 8
    assert browser.evaluate("document.querySelector('table.verdicts td.sig').textContent") == "**"
    assert _every_plot_drew(browser) == 3 * 8  # runs, delta and run order of each metric
    for i in range(3):  # the first metric's plots, as drawn: the sides' colours are on screen
        assert colored_pixels(browser.shot_of(("section.metric svg", i))) > 100
    shot = browser.screenshot(tmp_path / "report.png")
    width, height = png_size(shot.read_bytes())
    assert width == 1200 and height == browser.evaluate("document.documentElement.scrollHeight")


def test_sweep_counters_and_profile_plots_draw(browser, tmp_path):
    sweep_db, counter_db = tmp_path / "sweep.db", tmp_path / "counters.db"
    run_fake(SWEEP, sweep_db, _scaling())
    run_fake(COUNTERS, counter_db,
             lambda argv, env: _outcome(f"cycles:u {7000 + len(argv[0])}\n"
                                        f"cycles:k {3000 if argv[0][-1] == 'a' else 4000}\n"))
    a = analysis_of(counter_db)
    runs = [{"self.cycles:k.lock": 40.0 + i, "self.cycles:u.main": 20.0} for i in range(3)]
    a = replace(a, profiles={("sys", "b"): compare_profiles(runs, [{**r, "self.cycles:u.main": 25.0} for r in runs])})
    pages = (("sweep", render_html(document(analysis_of(sweep_db)))), ("counters", render_html(document(a))))
    for name, page in pages:
        _load(browser, page, tmp_path / f"{name}.html")
        _every_plot_drew(browser)
        labels = browser.evaluate("Array.from(document.querySelectorAll('svg')).map(s => s.getAttribute('aria-label'))")
        wanted = {"sweep": "ops/s against threads", "counters": "user/kernel split of cycles:u"}[name]
        index = labels.index(wanted)
        assert colored_pixels(browser.shot_of(("svg", index))) > 100
    assert "profile of a and b" in labels
    assert colored_pixels(browser.shot_of(("svg", labels.index("profile of a and b")))) > 100


PAYLOADS = ('<script>window.__pwned = 1; alert(1)</script>',
            '"><img src=x onerror="window.__pwned = 2; alert(2)">')


def test_hostile_text_is_shown_literally_and_never_runs(browser, db, tmp_path):
    label = f"ops {PAYLOADS[0]} {PAYLOADS[1]}"
    spec = LOCKBENCH.format(runs=6, variants=TWO, label=label.replace('"', '\\"')).replace(
        '"3000000"]', f'"3000000", "{PAYLOADS[0]}"]').replace("seed = 1", "seed = 1\nmax_failures = 3")
    ok = lockbench({"outline": 1.0, "inline": 1.03})
    calls = iter(range(100))

    def behaviour(argv, env):
        if "inline" in argv[0] and next(calls) == 1:
            return FakeOutcome(exit_code=1, stderr=f"{PAYLOADS[0]}\n{PAYLOADS[1]}\n".encode())
        return ok(argv, env)

    run_fake(spec, db, behaviour)
    a = rename_variant(analysis_of(db), "inline", PAYLOADS[1])
    page = render_html(document(a))
    assert "<img" not in page and page.count("<script") == 0
    load = _load(browser, page, tmp_path / "hostile.html")
    assert load.dialogs == [] and browser.evaluate("window.__pwned === undefined")
    assert browser.evaluate("document.querySelectorAll('img, script').length") == 0
    body = browser.evaluate("document.body.textContent")
    assert body.count(PAYLOADS[0]) >= 3 and body.count(PAYLOADS[1]) >= 3  # label, argv, failure; side name, failure
    assert browser.evaluate("document.querySelector('table.verdicts a').textContent") == label
    headers = browser.evaluate("Array.from(document.querySelectorAll('table.verdicts th small'))"
                               ".map(e => e.textContent)")
    assert headers == ["outline", PAYLOADS[1]]


def test_the_browser_checks_can_fail(browser, tmp_path):
    """The harness sees what the other tests assert away: a console error, a dialog, a policy violation, a fetch."""
    loud = tmp_path / "loud.html"
    loud.write_text("<!DOCTYPE html><script>console.error('boom'); alert('hi')</script>"
                    "<img src='http://127.0.0.1:9/x.png'>")
    load = browser.open(loud)
    assert any("boom" in e for e in load.errors()) and [d["message"] for d in load.dialogs] == ["hi"]
    assert load.fetched() == ["http://127.0.0.1:9/x.png"]
    strict = tmp_path / "strict.html"
    strict.write_text("<!DOCTYPE html><meta http-equiv='Content-Security-Policy' content=\"script-src 'none'\">"
                      "<script>window.ran = 1</script>")
    load = browser.open(strict)
    assert browser.evaluate("window.ran === undefined")
    assert any("Content Security Policy" in e for e in load.errors()), load.errors()


def test_size_tables_sort_by_a_click_on_a_header(browser, size_pair, tmp_path):
    out = tmp_path / "size.html"
    assert size_cli("--format", "html", "--limit", "0", "-o", out, *size_pair)[0] == 0
    load = browser.open(out)
    assert load.errors() == [] and load.dialogs == [] and load.fetched() == []
    column = """(() => { const t = document.querySelector('table.families');
      const i = Array.from(t.tHead.rows[0].cells).findIndex(c => c.textContent === 'delta');
      return Array.from(t.tBodies[0].rows).map(r => Number(r.cells[i].dataset.v)); })()"""
    before = browser.evaluate(column)
    assert len(before) >= 4 and before != sorted(before)
    click = ("Array.from(document.querySelector('table.families').tHead.rows[0].cells)"
             ".find(c => c.textContent === 'delta').click()")
    browser.evaluate(click)
    assert browser.evaluate(column) == sorted(before)
    browser.evaluate(click)
    assert browser.evaluate(column) == sorted(before, reverse=True)
    browser.evaluate("document.querySelector('table.families th').click()")
    assert browser.evaluate("""(() => { const names = Array.from(document.querySelectorAll(
      'table.families tbody tr td:first-child')).map(c => c.textContent);
      return names.length > 3 && names.every((n, i) => i === 0 || names[i - 1].localeCompare(n) <= 0); })()""")
