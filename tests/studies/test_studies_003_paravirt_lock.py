"""Study 003: direct, paravirt-style indirect and inlined lock paths under cachegrind's branch simulation."""

from __future__ import annotations

import pytest

from studies_helpers import rows_by, run_study, spec

SPEC = spec("003-paravirt-lock", "cachegrind.toml")
PAIRS = 200_000  # lock+unlock pairs the spec runs
SLACK = 0.001 * PAIRS  # counts outside the loop (ld.so, printf of a clock-derived rate) vary by a few


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict:
    doc = run_study(SPEC, tmp_path_factory.mktemp("s003"))
    assert doc["baseline"] == "direct"
    return rows_by(doc, "variant", "metric")


def counts(rows: dict, variant: str, metric: str) -> tuple[float, float]:
    """(baseline count, this variant's count): the mean of each side's two runs, which agree within a few counts
    (ld.so's work depends on the environment)."""
    r = rows[(variant, metric)]
    base, exp = r["base_values"], r["exp_values"]
    assert len(base) == len(exp) == 2 and max(base) - min(base) < SLACK and max(exp) - min(exp) < SLACK, (base, exp)
    return sum(base) / 2, sum(exp) / 2


def test_every_side_does_the_same_work(rows):
    assert rows[("indirect", "checksum")]["verdict"] == "flat"
    assert rows[("inline", "checksum")]["verdict"] == "flat"


def test_the_indirect_path_adds_two_predicted_indirect_calls_per_pair(rows):
    base, exp = counts(rows, "indirect", "indirect branches")
    assert abs(exp - base - 2 * PAIRS) < SLACK  # pv_lock_ops.spin_lock and .spin_unlock
    assert rows[("indirect", "branches")]["verdict"] == "**" and rows[("indirect", "branches")]["delta"] > 0.5
    assert rows[("indirect", "instructions")]["verdict"] == "**" and rows[("indirect", "instructions")]["delta"] > 0.2
    # One target per call site: cachegrind's address-indexed target table predicts
    # every call after the first, so mispredicts stay where the direct build has them.
    base, exp = counts(rows, "indirect", "indirect mispredicts")
    assert abs(exp - base) < SLACK
    # mispredicts move by a few with the layout from run to run: not exact, so ranked, and never a change
    assert rows[("indirect", "branch mispredicts")]["verdict"] in ("flat", "ns")


def test_inlining_removes_the_calls_and_no_branch(rows):
    assert rows[("inline", "instructions")]["verdict"] == "**" and rows[("inline", "instructions")]["delta"] < -0.1
    base, exp = counts(rows, "inline", "branches")
    assert abs(exp - base) < SLACK  # cachegrind counts conditional and indirect branches; direct calls are neither
    assert rows[("inline", "branch mispredicts")]["verdict"] in ("flat", "ns")
    assert rows[("inline", "D1 refs")]["verdict"] == "**" and rows[("inline", "D1 refs")]["delta"] < 0
