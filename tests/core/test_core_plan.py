"""The run plan: palindromic blocks, exact run counts, warm-ups first, seeded, groups spread per block."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from core_helpers import cli, two_sides
from perfab.plan import make_plan
from perfab.specfile import parse_spec

THREE = '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n[[variant]]\nname = "c"\n'


def _exp(runs=20, warmup=2, seed=1, order="interleaved", variants=""):
    return parse_spec(two_sides(f'order = "{order}"\nseed = {seed}', runs=runs, warmup=warmup, variants=variants))


def _blocks(plan):
    out = defaultdict(list)
    for p in plan:
        if not p.warmup:
            out[p.block].append(p)
    return [out[b] for b in sorted(out)]


def test_interleaved_blocks_are_palindromes():
    plan = make_plan(_exp())
    blocks = _blocks(plan)
    assert len(blocks) == 10
    shapes = Counter()
    for block in blocks:
        sides = "".join(p.variant for p in block)
        assert sides == sides[::-1] and sorted(sides) == sorted("aabb"), sides
        shapes[sides] += 1
    assert set(shapes) == {"abba", "baab"}  # the seeded permutation uses both orders


def test_each_side_gets_exactly_runs_and_warmups_come_first():
    plan = make_plan(_exp(runs=20, warmup=2))
    assert [p.seq for p in plan] == list(range(len(plan)))
    assert len(plan) == 2 * (20 + 2)
    warm = [p for p in plan if p.warmup]
    assert plan[: len(warm)] == warm and len(warm) == 4
    assert all(p.block == -1 for p in warm)
    assert Counter(p.variant for p in warm) == {"a": 2, "b": 2}
    assert Counter(p.variant for p in plan if not p.warmup) == {"a": 20, "b": 20}


def test_same_seed_same_plan_other_seed_differs():
    assert make_plan(_exp(seed=7)) == make_plan(_exp(seed=7))
    assert make_plan(_exp(seed=7)) != make_plan(_exp(seed=8))


def test_two_counter_groups_split_evenly_and_shared_within_block():
    plan = make_plan(_exp(runs=20), n_groups=2)
    measured = [p for p in plan if not p.warmup]
    assert Counter((p.variant, p.group) for p in measured) == {("a", 0): 10, ("a", 1): 10,
                                                               ("b", 0): 10, ("b", 1): 10}
    for block in _blocks(plan):
        assert len({p.group for p in block}) == 1


def test_odd_runs():
    plan = make_plan(_exp(runs=5))
    assert Counter(p.variant for p in plan if not p.warmup) == {"a": 5, "b": 5}
    blocks = _blocks(plan)
    assert [len(b) for b in blocks] == [4, 4, 2]
    assert sorted(p.variant for p in blocks[-1]) == ["a", "b"]


def test_three_variants_palindromes():
    plan = make_plan(_exp(runs=6, variants=THREE))
    assert Counter(p.variant for p in plan if not p.warmup) == {"a": 6, "b": 6, "c": 6}
    for block in _blocks(plan):
        sides = "".join(p.variant for p in block)
        assert len(sides) == 6 and sides == sides[::-1] and set(sides) == set("abc")


def test_sequential_order():
    plan = [p for p in make_plan(_exp(runs=4, order="sequential")) if not p.warmup]
    assert "".join(p.variant for p in plan) == "aaaabbbb"


def test_alternate_order():
    plan = [p for p in make_plan(_exp(runs=3, order="alternate")) if not p.warmup]
    assert "".join(p.variant for p in plan) == "ababab"
    assert [p.block for p in plan] == [0, 0, 1, 1, 2, 2]


def test_random_order_is_seeded_and_complete():
    a = [p.variant for p in make_plan(_exp(runs=20, order="random", seed=3)) if not p.warmup]
    b = [p.variant for p in make_plan(_exp(runs=20, order="random", seed=4)) if not p.warmup]
    assert Counter(a) == {"a": 20, "b": 20} and a != b
    assert a != sorted(a)


def test_external_side_plans_only_that_side():
    exp = parse_spec(two_sides(variants='[[variant]]\nname = "a"\nexternal = true\n\n'
                                        '[[variant]]\nname = "b"\nexternal = true\n', runs=5))
    plan = make_plan(exp, ["b"])
    assert {p.variant for p in plan} == {"b"} and sum(not p.warmup for p in plan) == 5


@pytest.mark.parametrize("order", ["interleaved", "alternate", "sequential", "random"])
def test_plan_command_prints_every_run(tmp_path, order):
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(f'order = "{order}"', runs=3, warmup=1))
    code, out, err = cli("plan", str(spec))
    assert code == 0 and err.startswith("perfab: warning: with 3 run(s) per side the rank test can never reach alpha")
    assert "plan at least 4 runs per side" in err  # the rows whose runs vary: said before any run
    lines = out.splitlines()
    assert len(lines) == 2 * 4
    assert sum("warm-up" in line for line in lines) == 2
