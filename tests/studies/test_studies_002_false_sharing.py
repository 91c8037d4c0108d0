"""Study 002: the read-mostly field padded away from the lock word is read faster (timed, 2 CPUs)."""

from __future__ import annotations

from studies_helpers import LoadMeter, judged_on_quiet_machine, require_cpus, rows_by, run_study, spec, verdict

SPEC = spec("002-false-sharing", "time.toml")


def test_padded_layout_reads_faster_while_the_writer_runs(tmp_path):
    require_cpus(2)
    meter = LoadMeter().start()
    rows = rows_by(run_study(SPEC, tmp_path), "metric")
    assert rows["checksum"]["verdict"] == "flat"  # the same reads on both sides
    read = rows["reader ns/read"]
    assert read["n_base"] == read["n_exp"] == 20

    def check():
        assert read["verdict"] == "**" and read["delta"] < 0, verdict(read)

    judged_on_quiet_machine(meter.stop(), check)
