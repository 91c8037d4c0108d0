"""The bundled demo (examples/default.toml, the real lockbench builds) as an HTML page: small, and drawn."""

from __future__ import annotations

import re

import pytest
from html_helpers import REPO, cli

MAX_BYTES = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    """`perfab run examples/default.toml --html` with 4 runs per side, on the real builds."""
    if not all((REPO / "build" / v / "lockbench").exists() for v in ("inline", "outline")):
        pytest.skip("the bundled workload is not built: run `make workloads`")
    tmp = tmp_path_factory.mktemp("demo")
    spec = (REPO / "examples" / "default.toml").read_text()
    spec = re.sub(r"(?m)^runs = \d+", "runs = 4", spec).replace('"./build/', f'"{REPO}/build/')
    (tmp / "demo.toml").write_text(spec)
    out = tmp / "demo.html"
    code, stdout, stderr = cli("run", tmp / "demo.toml", "--db", tmp / "demo.db", "--html", out)
    assert code == 0, stderr
    assert stdout.startswith("perfab: unlock-inline")
    return out


def test_demo_report_stays_under_2_mb(demo_page):
    size = demo_page.stat().st_size
    assert 10_000 < size < MAX_BYTES


def test_demo_report_opens_offline_and_draws(browser, demo_page, tmp_path):
    load = browser.open(demo_page)
    assert load.errors() == [] and load.dialogs == [] and load.fetched() == []
    rows = browser.evaluate("Array.from(document.querySelectorAll('table.verdicts tbody tr td:first-child'))"
                            ".map(td => td.textContent)")
    assert rows[:2] == ["lock+unlock ops/s", "checksum (same work)"] and "Max RSS (KiB)" in rows
    sizes = browser.evaluate("Array.from(document.querySelectorAll('svg')).map(s => s.getBBox().width * "
                             "s.getBBox().height)")
    assert len(sizes) == 3 * len(rows) and min(sizes) > 1000
    browser.screenshot(tmp_path / "demo.png")
    assert (tmp_path / "demo.png").stat().st_size > 10_000
