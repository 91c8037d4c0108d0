"""Fixtures of the HTML report tests; helpers live in ``html_helpers`` and ``html_browser``."""

from __future__ import annotations

from pathlib import Path

import pytest
from html_browser import Chromium, unavailable
from html_helpers import LOCKBENCH, TWO, lockbench, run_fake


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture
def improved(db: Path) -> Path:
    """Two sides, inline 3% faster: the golden test's experiment."""
    run_fake(LOCKBENCH.format(runs=12, variants=TWO, label="lock+unlock ops/s"), db,
             lockbench({"outline": 1.0, "inline": 1.03}))
    return db


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """One headless Chromium for the session (skipped, with the reason, where it cannot run)."""
    why = unavailable()
    if why:
        pytest.skip(why)
    chromium = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chromium
    chromium.close()


@pytest.fixture(scope="session")
def size_pair(tmp_path_factory):
    """(old, new) builds of tests/size/src."""
    from html_size import build_pair

    return build_pair(tmp_path_factory.mktemp("size-pair"))
