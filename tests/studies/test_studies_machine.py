"""The studies' own machinery: the load meter, the busy-machine judgement, and every bundled study's files."""

from __future__ import annotations

import json
import re
import sys

import pytest

from perfab.specfile import load_spec
from studies_helpers import EXAMPLES, MAX_FOREIGN_SHARE, ROOT, Load, LoadMeter, cli, judged_on_quiet_machine

STUDIES = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and re.match(r"\d{3}-", p.name))


def test_cpu_time_of_perfab_workloads_is_counted_as_ours(tmp_path):
    """Workloads run under perfab's exec server; their CPU time must reach our RUSAGE_CHILDREN."""
    burn = "import time\nwhile time.process_time() < 0.2: pass"
    spec = tmp_path / "burn.toml"
    spec.write_text('[experiment]\nname = "burn"\nruns = 2\nwarmup = 0\n[[variant]]\nname = "a"\n'
                    '[[variant]]\nname = "b"\n[[workload]]\nname = "burn"\n'
                    f"argv = {json.dumps([sys.executable, '-c', burn])}\n")
    meter = LoadMeter().start()
    code, _, err = cli("run", str(spec), "--db", str(tmp_path / "r.db"), "--no-report")
    load = meter.stop()
    assert code == 0, err
    assert load.own_s >= 4 * 0.2, load
    slack_s = 0.05 * load.cpus  # /proc/stat counts in clock ticks
    assert load.own_s + load.foreign_s <= load.elapsed_s * load.cpus + slack_s, load


def failing():
    assert 1 == 2, "a verdict that did not hold"


def test_a_failed_verdict_on_a_busy_machine_is_a_skip_naming_the_load():
    busy = Load(elapsed_s=10, cpus=2, own_s=10, foreign_s=2 * 10 * (MAX_FOREIGN_SHARE + 0.1), loadavg_1m=3.5)
    with pytest.raises(pytest.skip.Exception, match=r"machine busy during the runs: .*load average 3.50.*"
                                                     r"a verdict that did not hold"):
        judged_on_quiet_machine(busy, failing)


def test_a_failed_verdict_on_a_quiet_machine_fails():
    quiet = Load(elapsed_s=10, cpus=2, own_s=10, foreign_s=0.5, loadavg_1m=0.1)
    with pytest.raises(AssertionError, match="a verdict that did not hold"):
        judged_on_quiet_machine(quiet, failing)
    judged_on_quiet_machine(quiet, lambda: None)


def test_there_are_four_studies_each_with_sources_specs_makefile_and_readme():
    assert [p.name[:3] for p in STUDIES] == ["001", "002", "003", "004"]
    for study in STUDIES:
        assert (study / "Makefile").is_file() and (study / "README.md").is_file(), study
        assert list(study.glob("*.c")), study
        assert list(study.glob("*.toml")), study


@pytest.mark.parametrize("spec", sorted(EXAMPLES.glob("[0-9][0-9][0-9]-*/*.toml")),
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_every_study_spec_is_valid_and_run_by_make_studies(spec):
    exp = load_spec(spec)
    assert exp.workloads and exp.build  # each side built from the study's own sources
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\nstudies:", 1)[1].split("\n\n", 1)[0]
    assert str(spec.relative_to(ROOT)) in target, f"make studies does not run {spec.relative_to(ROOT)}"
