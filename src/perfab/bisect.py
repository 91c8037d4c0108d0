"""``perfab bisect``: find the commit that made a metric regress, by the same verdicts as an A/B.

Given a spec (its workloads, measurement and its first variant as the
template of a side built from git: ``build`` with ``{src}``/``{build}``)
and two commits, bisect first measures good against bad: the metric must
differ (``**``) in the worse direction, else there is nothing to find.
It then walks the first-parent path from good to bad by halving, as
``git bisect --first-parent`` does, without touching the repository's
checkout (every commit is built in perfab's cache, once).  When the first
bad commit there is a merge, it walks into the branch the merge brought in
(its second parent's first parents) and bisects that, as ``git bisect``
does, and says so; the merge itself is named only when every commit of
the branch is good.  A candidate that cannot be built is skipped, as
``git bisect skip`` does, and the range left is named when only skipped
commits remain.  Each candidate is measured in one session beside both ends (three sides, interleaved) and classified
as ``git bisect`` classifies a commit, by its difference from good:

- ``bad``: different from good (``**`` in the regression's direction),
  whether or not it also differs from bad: a range with two regression
  steps leads to the first one, as ``git bisect`` finds the first bad
  commit;
- ``good``: not different from good, and different from bad;
- otherwise undecided: the same three sides run again (runs pool across
  sessions of the step's experiment) up to ``max_retries`` times, then the
  bisection stops and says so.  Rows of deterministic counts (the exact
  method) are never run again: more runs cannot change them.  Every step
  runs at least ``MIN_RUNS`` per side, so a spec of one run per side is
  checked by a second (``methods.AssumeExact``: one run is unchecked).

The culprit is the first bad commit on the path.  When bad still differs
from the culprit in the same direction, the result names that further
change and the command that bisects it.  A final session measures the
culprit against its parent, and the report prints the kernel test robot's
summary line (``commit: <hash> ("subject")``, the metric and the change),
the path taken and that A/B's table.  Every run of every step is stored,
one experiment per step (``<name>-bisect-<short hash>``).

A sweep spec is bisected at one point: the one named with ``params``
(``--param NAME=VALUE``, every step's spec then keeps only that point),
else the point that regressed most from good to bad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from perfab.analyse.compare import Analysis, Row, compare
from perfab.analyse.verdicts import Verdict
from perfab.errors import PerfabError, UsageError
from perfab.git import git_output, run_git
from perfab.run.build import BuildError, repository
from perfab.specfile import Experiment, load_spec
from perfab.store import Store

SHORT = 12


@dataclass(frozen=True)
class Step:
    """One candidate measured beside both ends."""

    commit: str  # the candidate's hash
    subject: str  # its subject line
    vs_good: str  # e.g. "-8.31% **": the candidate against good
    vs_bad: str  # the candidate against bad
    decision: str  # bad | good | undecided
    sessions: int  # sessions it took
    further: bool = False  # bad, and bad still differs from it in the same direction: a later step follows


@dataclass(frozen=True)
class BisectResult:
    """Where the regression came in, and how it was found."""

    culprit: str  # first bad commit
    subject: str  # its subject line
    parent: str  # the last good commit before it
    metric: str  # the metric bisected
    change: float | None  # relative change good -> bad (0.05 = +5%)
    regression: str  # the summary line, LKP style
    steps: tuple[Step, ...]  # the path taken, in order
    candidates: int  # commits on the path between good and bad (bad included)
    analysis: Analysis  # parent vs culprit
    further: str | None = None  # a further change between the culprit and bad, in words; None when none showed
    walk: str = "first parents from good to bad"  # which commits were searched (first parents, merged branches)


def bisect(spec_path: str, good: str, bad: str, store: Store, run_step: Callable, metric: str | None = None,
           max_retries: int = 2, say: Callable[[str], None] = lambda line: None,
           params: dict[str, str] | None = None) -> BisectResult:
    """Bisect ``good..bad`` for the spec's metric; ``run_step(exp)`` runs a session of ``exp`` into ``store``.

    ``params`` names the sweep point of a sweep spec (every parameter of every swept workload)."""
    exp = at_point(load_spec(spec_path), params or {})
    template = exp.variants[0]
    if template.external:
        raise UsageError(f"{spec_path}: bisect builds sides from git; its first variant is external")
    if not (template.build or exp.build):
        raise UsageError(f"{spec_path}: bisect needs a build command (experiment.build or the first variant's "
                         "build, with {src} and {build}) to build each commit")
    repo = repository(exp)
    good_c, bad_c = _commit(repo, good), _commit(repo, bad)
    path = _first_parent_path(repo, good_c, bad_c)
    say(f"bisecting {len(path)} commits between {good_c[:SHORT]} and {bad_c[:SHORT]} along first parents")
    ends = _Bisection(exp, repo, good_c, bad_c, store, run_step, metric, max_retries, say)
    row = ends.establish()
    culprit = _search(ends, path, good_c)
    walk = "first parents from good to bad"
    while (branch := _merged_branch(repo, culprit)):
        say(f"{culprit[:SHORT]} is a merge: bisecting the {len(branch)} commits of the branch it merged")
        inner = _search(ends, branch + [culprit], None)
        walk += f", then into the branch merged by {culprit[:SHORT]}"
        if inner == culprit:
            walk += " (every commit of it good: the merge itself)"
            break
        culprit = inner
    parent = _commit(repo, f"{culprit}^")
    analysis = ends.confirm(parent, culprit)
    subject = _subject(repo, culprit)
    change = row.estimate.delta if row.estimate is not None else None
    line = _summary(culprit, subject, row, change)
    further = _further(ends.steps, culprit, bad_c, spec_path, params or {})
    return BisectResult(culprit, subject, parent, ends.metric, change, line, tuple(ends.steps), len(path), analysis,
                        further, walk)


def _further(steps: list[Step], culprit: str, bad: str, spec_path: str, params: dict[str, str]) -> str | None:
    """A further change after the culprit, when bad still differed from it, with the command that bisects it."""
    step = next((s for s in steps if s.commit == culprit), None)
    if step is None or not step.further or culprit == bad:
        return None
    point = "".join(f" --param {k}={v}" for k, v in params.items())
    return (f"a further change follows: bad differs from the culprit by {step.vs_bad}; bisect it with "
            f"`perfab bisect {spec_path} --good {culprit[:SHORT]} --bad {bad[:SHORT]}{point}`")


def at_point(exp: Experiment, params: dict[str, str]) -> Experiment:
    """``exp`` with every swept workload fixed at the point ``params`` names (its values become side vars).

    Without ``params`` a sweep spec stays whole (its most regressed point is bisected); a parameter left
    out, a name no workload sweeps or a value outside the grid is a UsageError."""
    swept = {name: values for w in exp.workloads for name, values in w.params}
    if not swept:
        if params:
            raise UsageError(f"{exp.path} sweeps nothing; drop --param")
        return exp
    if not params:
        return exp  # the whole sweep: the point that regressed most is bisected
    missing = [n for n in swept if n not in params]
    if missing:
        grid = "; ".join(f"{n} over {', '.join(swept[n])}" for n in missing)
        raise UsageError(f"{exp.path} is a sweep ({grid}): bisect measures one point; choose it with "
                         f"--param {missing[0]}=VALUE")
    for name, value in params.items():
        if name not in swept:
            raise UsageError(f"--param {name}: {exp.path} sweeps no parameter {name!r} (it sweeps "
                             f"{', '.join(swept)})")
        if value not in swept[name]:
            raise UsageError(f"--param {name}={value}: not a point of the sweep ({', '.join(swept[name])})")
    return exp.derive(workloads=tuple(replace(w, params=()) for w in exp.workloads),
                      variants=tuple(replace(v, vars={**v.vars, **params}) for v in exp.variants))


def _search(ends: "_Bisection", path: list[str], good: str | None) -> str:
    """The first bad commit of ``path`` (its last commit is bad, the one before its first good), by halving.

    A candidate that cannot be built is skipped as ``git bisect skip`` does: the nearest other commit of the
    range is tried; when only skipped commits are left between the last good and the first bad, the range is
    named instead of a culprit."""
    lo, hi, skipped = -1, len(path) - 1, set()
    while open_ := [i for i in range(lo + 1, hi) if i not in skipped]:
        mid = min(open_, key=lambda i: (abs(i - (lo + hi) / 2), i))
        step = ends.classify(path[mid])
        if step.decision == "skip":
            skipped.add(mid)
            continue
        if step.decision == "undecided":
            fix = "more runs cannot change deterministic counts; check --metric" if step.sessions == 1 \
                else "rerun with more runs or narrow --good/--bad"
            raise PerfabError(f"cannot decide {path[mid][:SHORT]} ({step.vs_good} vs good, {step.vs_bad} vs bad) "
                              f"after {step.sessions} session(s); {fix}")
        lo, hi = (lo, mid) if step.decision == "bad" else (mid, hi)
    if any(lo < i < hi for i in skipped):
        first_good = path[lo][:SHORT] if lo >= 0 else (good or "the branch's base")[:SHORT]
        left = " ".join(c[:SHORT] for c in path[lo + 1:hi + 1])
        raise PerfabError(f"the first bad commit is one of {left} (after good {first_good[:SHORT]}): the ones "
                          "before the last could not be built and were skipped; fix their build or bisect "
                          "them by hand")
    return path[hi]


def max_steps(candidates: int) -> int:
    """The bound the path must stay within: ceil(log2 N) halvings, plus the two ends measured first."""
    return math.ceil(math.log2(max(candidates, 2))) + 2


MIN_RUNS = 2  # runs per side of every step: an exact row needs a second run to show its counts repeat


class _Bisection:
    def __init__(self, exp: Experiment, repo: Path, good: str, bad: str, store: Store, run_step, metric,
                 max_retries: int, say):
        self.exp, self.repo, self.good, self.bad = exp, repo, good, bad
        self.store, self.run_step, self.metric, self.max_retries, self.say = store, run_step, metric, max_retries, say
        self.steps: list[Step] = []
        self.direction: bool | None = None  # True: the metric went up from good to bad
        self.point: tuple = ()  # the sweep point bisected (the one that regressed most), () without a sweep

    def establish(self) -> Row:
        """Good against bad: the regression must be there, beyond noise."""
        exp = self._experiment("ends", [self.good, self.bad])
        analysis = self._measure(exp)
        row = self._worst_point(analysis, _side("bad", self.bad))
        if row.verdict != Verdict.CHANGE:
            raise PerfabError(f"{self.metric}: good {self.good[:SHORT]} and bad {self.bad[:SHORT]} do not differ "
                              f"beyond noise ({_change(row)}); nothing to bisect")
        if row.higher_is_better is not None and not row.regressed:
            raise PerfabError(f"{self.metric}: bad {self.bad[:SHORT]} is better than good ({_change(row)}); "
                              "swap --good and --bad")
        self.direction = _up(row)
        self.say(f"good -> bad: {self.metric} {_change(row)}")
        return row

    def classify(self, commit: str) -> Step:
        exp = self._experiment(commit[:SHORT], [self.good, commit, self.bad])
        sessions = 0
        while True:
            try:
                analysis = self._measure(exp)
            except BuildError as err:
                return self._skip(commit, err)
            sessions += 1
            vs_good = self._row(analysis, _side("cand", commit))
            vs_bad = self._row(self._rebased(exp, commit), _side("bad", self.bad))
            from_good = vs_good.verdict == Verdict.CHANGE and _up(vs_good) == self.direction
            from_bad = vs_bad.verdict == Verdict.CHANGE and _up(vs_bad) == self.direction
            decision = "bad" if from_good else "good" if from_bad else "undecided"
            if decision != "undecided" or sessions > self.max_retries or _deterministic(vs_good, vs_bad):
                break
            self.say(f"{commit[:SHORT]}: undecided ({_change(vs_good)} vs good, {_change(vs_bad)} to bad); "
                     "more runs")
        step = Step(commit, _subject(self.repo, commit), _change(vs_good), _change(vs_bad), decision, sessions,
                    from_good and from_bad)
        self.steps.append(step)
        self.say(f"{commit[:SHORT]} {decision}: {step.vs_good} vs good, {step.vs_bad} to bad")
        return step

    def _skip(self, commit: str, err: BuildError) -> Step:
        """A candidate that cannot be built: skipped, as ``git bisect skip`` does."""
        step = Step(commit, _subject(self.repo, commit), "-", "-", "skip", 0)
        self.steps.append(step)
        self.say(f"{commit[:SHORT]} skip: cannot build it ({str(err)[:120]}); trying another commit")
        return step

    def confirm(self, parent: str, culprit: str) -> Analysis:
        return self._measure(self._experiment(f"{culprit[:SHORT]}-parent", [parent, culprit], ("parent", "culprit")))

    def _experiment(self, label: str, commits: list[str], roles: tuple[str, ...] = ()) -> Experiment:
        roles = roles or (("good", "bad") if len(commits) == 2 else ("good", "cand", "bad"))
        sides = tuple(replace(self.exp.variants[0], name=_side(role, c), git=c) for role, c in zip(roles, commits))
        # One run per side leaves exact rows unchecked (never **): the second run shows the counts repeat.
        return self.exp.derive(name=f"{self.exp.name}-bisect-{label}", repo=str(self.repo), variants=sides,
                               baseline=sides[0].name, path=f"{self.exp.path}#bisect-{label}",
                               runs=max(MIN_RUNS, self.exp.runs))

    def _measure(self, exp: Experiment) -> Analysis:
        self.run_step(exp)
        analysis = compare(self.store.load(exp.name), exp)
        if self.metric is None:
            self.metric = _primary(exp)
        return analysis

    def _rebased(self, exp: Experiment, commit: str) -> Analysis:
        """The same runs compared against the candidate (to see whether bad differs from it)."""
        return compare(self.store.load(exp.name), replace(exp, baseline=_side("cand", commit)))

    def _worst_point(self, analysis: Analysis, variant: str) -> Row:
        """Good against bad at every sweep point of the metric; the point that regressed most is bisected."""
        rows = [r for r in analysis.rows if r.metric == self.metric and r.variant == variant]
        if not rows:
            raise UsageError(f"no metric {self.metric!r} measured for {variant}; pass --metric with one the "
                             "workload reports")
        missing = {r.params for r in analysis.rows if r.variant == variant} - {r.params for r in rows}
        if missing:
            raise UsageError(f"metric {self.metric!r} is missing at sweep point "
                             f"{' '.join(f'{k}={v}' for k, v in sorted(missing)[0])}; pass --metric with one "
                             "every point reports")
        worse = [r for r in rows if r.verdict == Verdict.CHANGE and (r.higher_is_better is None or r.regressed)]
        row = max(worse, key=lambda r: abs(r.estimate.delta or 0.0)) if worse else rows[0]
        self.point = row.params
        if row.params:
            self.say(f"bisecting {self.metric} at {' '.join(f'{k}={v}' for k, v in row.params)}")
        return row

    def _row(self, analysis: Analysis, variant: str) -> Row:
        rows = [r for r in analysis.rows if r.metric == self.metric and r.variant == variant
                and r.params == self.point]
        if not rows:
            raise UsageError(f"no metric {self.metric!r} measured for {variant}; pass --metric with one the "
                             "workload reports")
        return rows[0]


def _deterministic(*rows: Row) -> bool:
    """Rows of deterministic counts (the exact method): another session measures the same values."""
    return all(r.estimate is not None and r.estimate.traits.counted for r in rows)


def _primary(exp: Experiment) -> str:
    for w in exp.workloads:
        for m in w.metrics:
            if m.primary:
                return m.name
    raise UsageError(f"{exp.path}: no primary metric; mark one with primary = true or pass --metric NAME")


def _side(role: str, commit: str) -> str:
    return f"{role}-{commit[:SHORT]}"


def _up(row: Row) -> bool:
    change = row.estimate.delta if row.estimate is not None and row.estimate.delta is not None else \
        (row.estimate.shift if row.estimate is not None else 0.0)
    return (change or 0.0) > 0


def _change(row: Row) -> str:
    from perfab.report.document import mark
    from perfab.report.numbers import fmt_delta

    return f"{fmt_delta(row)} {mark(row)}"


def _summary(commit: str, subject: str, row: Row, change: float | None) -> str:
    what = f"{100 * abs(change):.1f}% regression" if change is not None else "regression"
    direction = "" if row.higher_is_better is None else (" (higher is better)" if row.higher_is_better else
                                                         " (lower is better)")
    sign = "-" if change is not None and change < 0 else "+"
    return f'commit: {commit} ("{subject}")\n{row.workload}.{row.metric}{direction}: {sign}{what}'


_FOR = "to bisect a repository's commits"  # what git is needed for, in its not-installed error


def _git(repo: Path, *args: str) -> str:
    return git_output(repo, *args, needed_for=_FOR)


def _commit(repo: Path, ref: str) -> str:
    return _git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()


def _subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit).strip()


def _merged_branch(repo: Path, commit: str) -> list[str]:
    """The commits a merge brought in along its second parent's first parents, oldest first; [] for no merge."""
    parents = _git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if len(parents) < 2:
        return []
    return _git(repo, "rev-list", "--first-parent", "--reverse", f"{parents[0]}..{parents[1]}").split()


def _first_parent_path(repo: Path, good: str, bad: str) -> list[str]:
    """Commits after good up to bad along bad's first parents, oldest first (bad last)."""
    if run_git(repo, "merge-base", "--is-ancestor", good, bad, needed_for=_FOR).returncode != 0:
        raise UsageError(f"{good[:SHORT]} is not an ancestor of {bad[:SHORT]}; --good must come before --bad")
    path = _git(repo, "rev-list", "--first-parent", "--ancestry-path", "--reverse", f"{good}..{bad}").split()
    if not path:
        raise UsageError("good and bad are the same commit; nothing to bisect")
    return path
