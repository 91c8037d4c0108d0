"""Fixtures of the pipeline-spine tests; helpers live in ``core_helpers``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A results database path in a fresh directory."""
    return tmp_path / "results.db"
