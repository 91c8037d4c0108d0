"""Fixtures of the counting-scheme tests; helpers live in ``scheme_helpers`` and ``scheme_perf``."""

from __future__ import annotations

import json

import pytest

from scheme_helpers import SPEC_000, levels_000, report, run_experiment
from scheme_perf import FakePerf


@pytest.fixture
def db(tmp_path):
    """A results database path in a fresh directory."""
    return tmp_path / "results.db"


@pytest.fixture(scope="session")
def seed000(tmp_path_factory):
    """(db, executor, fake perf) of one seed-000 experiment (generator seed 1), shared read-only."""
    db = tmp_path_factory.mktemp("seed000") / "results.db"
    perf = FakePerf(levels_000(), seed=1)
    executor = run_experiment(SPEC_000, db, perf)
    return db, executor, perf


@pytest.fixture(scope="session")
def rows(seed000):
    """The seed-000 JSON report's rows by metric name."""
    return {r["metric"]: r for r in json.loads(report(seed000[0], "json"))["rows"]}
