"""Fixtures of the reliability corpus; the harness lives in ``reliability_helpers``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A results database path in a fresh directory."""
    return tmp_path / "results.db"
