"""Bad experiment specs: each is refused before anything is stored, in one line naming file, key and fix.

Every situation is tried twice: ``perfab plan SPEC``, and ``perfab run SPEC``
against a database that already holds a finished session, which must come
out byte for byte unchanged (a bad spec never leaves a session behind).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, stored_db, two_sides, write

W = 'argv = ["true"]'
V2 = '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
def S(workload=W, experiment="", variants=V2, extra="", runs="2", warmup="0", name='"rel"', head=""):
    return (f'{head}[experiment]\nname = {name}\nruns = {runs}\nwarmup = {warmup}\n{experiment}\n\n'
            f'{variants}\n[[workload]]\nname = "w"\n{workload}\n{extra}')
CASES = {  # situation -> the spec's bytes
 "toml-syntax": S(experiment="margin = = 1"),
 "unterminated-string": S(experiment='order = "interleaved'),
 "empty-file": "",
 "only-comment": "# nothing\n",
 "binary-bytes": b"\x00\xff\xfe\x89PNG\r\n",
 "latin1-bytes": S(experiment='# caf\xe9').encode("latin-1"),
 "unknown-top-table": S(extra="\n[experiments]\nname = 'x'\n"),
 "unknown-experiment-key": S(experiment="warmpu = 3"),
 "unknown-variant-key": S(variants='[[variant]]\nname = "a"\nenvv = {}\n\n[[variant]]\nname = "b"\n'),
 "unknown-workload-key": S(workload=W + '\nargs = ["x"]'),
 "unknown-measure-key": S(extra='\n[measure]\nbackend = "time"\ncounter = ["cycles"]\n'),
 "runs-string": S(runs='"ten"'),
 "runs-float": S(runs="1.5"),
 "runs-bool": S(runs="true"),
 "runs-zero": S(runs="0"),
 "runs-negative": S(runs="-3"),
 "runs-int64-max": S(runs="9223372036854775807"),
 "warmup-1e8": S(warmup="1e8"),
 "warmup-huge-int": S(warmup="100000000"),
 "name-missing": S(name='""').replace('name = ""\n', '', 1),
 "name-empty": S(name='""'),
 "name-not-string": S(name='3'),
 "no-variants": S(variants=""),
 "duplicate-variant": S(variants='[[variant]]\nname = "a"\n\n[[variant]]\nname = "a"\n'),
 "variant-without-name": S(variants='[[variant]]\nname = "a"\n\n[[variant]]\nenv = {}\n'),
 "duplicate-workload": S(extra='\n[[workload]]\nname = "w"\nargv = ["true"]\n'),
 "no-workload": S().split("[[workload]]")[0],
 "argv-string": S(workload='argv = "true"'),
 "argv-empty": S(workload='argv = []'),
 "argv-non-string": S(workload='argv = ["echo", 3]'),
 "argv-nul": S(workload='argv = ["echo", "a\\u0000b"]'),
 "env-name-equals": S(variants='[[variant]]\nname = "a"\nenv = {"A=B" = "1"}\n\n[[variant]]\nname = "b"\n'),
 "env-name-empty": S(variants='[[variant]]\nname = "a"\nenv = {"" = "1"}\n\n[[variant]]\nname = "b"\n'),
 "env-value-nul": S(variants='[[variant]]\nname = "a"\nenv = {X = "a\\u0000"}\n\n[[variant]]\nname = "b"\n'),
 "placeholder-unknown": S(workload='argv = ["echo", "{nope}"]'),
 "parser-unknown": S(workload=W + '\nparser = "nosuch"'),
 "parser-options-unknown": S(workload='argv = ["true"]\nparser = "keyvalue"\nparser_options = {bogus = 1}'),
 "executable-missing": S(workload='argv = ["/nonexistent/bin/tool"]'),
 "executable-directory": S(workload='argv = ["/tmp"]'),
 "executable-not-on-path": S(workload='argv = ["no-such-tool-xyz"]'),
 "cwd-missing": S(workload=W + '\ncwd = "/nonexistent/dir"'),
 "cwd-file": S(workload=W + '\ncwd = "/etc/hostname"'),
 "pin-reversed": S(experiment='pin = "5-1"'),
 "pin-out-of-range": S(experiment='pin = "4096"'),
 "pin-garbage": S(experiment='pin = "one"'),
 "pin-negative": S(experiment='pin = -1'),
 "order-unknown": S(experiment='order = "shuffled"'),
 "method-unknown": S(experiment='method = "bayes"'),
 "alpha-zero": S(experiment='alpha = 0.0'),
 "alpha-one": S(experiment='alpha = 1.0'),
 "alpha-percent": S(experiment='alpha = 5'),
 "confidence-above-one": S(experiment='confidence = 95'),
 "margin-negative": S(experiment='margin = -1'),
 "margin-string": S(experiment='margin = "1%"'),
 "fdr-unknown": S(experiment='fdr = "bonferroni"'),
 "baseline-unknown": S(experiment='baseline = "c"'),
 "metric-direction-unknown": S(extra='\n[[workload.metric]]\nname = "x"\ndirection = "up"\n'),
 "metric-without-name": S(extra='\n[[workload.metric]]\nlabel = "x"\n'),
 "metric-duplicate": S(extra='\n[[workload.metric]]\nname = "x"\n\n[[workload.metric]]\nname = "x"\n'),
 "metric-margin-negative": S(extra='\n[[workload.metric]]\nname = "x"\nmargin = -2\n'),
 "params-empty-list": S(workload=W + '\nparams = {threads = []}'),
 "params-builtin-name": S(workload=W + '\nparams = {variant = [1, 2]}'),
 "params-not-table": S(workload=W + '\nparams = [1, 2]'),
 "params-nested": S(workload=W + '\nparams = {threads = [[1], [2]]}'),
 "backend-unknown": S(extra='\n[measure]\nbackend = "vtune"\n'),
 "cachegrind-l1i-garbage": S(extra='\n[measure]\nbackend = "cachegrind"\nl1i = "big"\n'),
 "cachegrind-branch-sim-string": S(extra='\n[measure]\nbackend = "cachegrind"\nbranch_sim = "yes"\n'),
 "counters-on-time-backend": S(extra='\n[measure]\nbackend = "time"\ncounters = ["cycles"]\n'),
 "service-without-argv": S(extra='\n[workload.service]\nport = 8080\n'),
 "service-port-zero": S(extra='\n[workload.service]\nargv = ["true"]\nport = 0\n'),
 "service-port-70000": S(extra='\n[workload.service]\nargv = ["true"]\nport = 70000\n'),
 "service-counters-bad": S(extra='\n[workload.service]\nargv = ["true"]\nport = 8080\ncounters = "all"\n'),
 "timeout-zero": S(workload=W + '\ntimeout = 0'),
 "timeout-negative": S(workload=W + '\ntimeout = -5'),
 "timeout-nan": S(workload=W + '\ntimeout = nan'),
 "margin-inf": S(experiment='margin = inf'),
 "build-string-not-array": S(experiment='build = 3'),
 "git-not-string": S(variants='[[variant]]\nname = "a"\ngit = 3\n\n[[variant]]\nname = "b"\n'),
 "auto-min-above-max": S(runs='"auto"', experiment='min_runs = 30\nmax_runs = 10'),
 "auto-unknown-spending": S(runs='"auto"', experiment='spending = "haybittle"'),
 "runs-auto-typo": S(runs='"automatic"'),
 "stop-on-unknown": S(runs='"auto"', experiment='stop_on = "some"'),
 "external-not-bool": S(variants='[[variant]]\nname = "a"\nexternal = "yes"\n\n[[variant]]\nname = "b"\n'),
 "shell-with-list": S(workload='argv = ["echo", "a"]\nshell = true'),
 "workload-setup-variant-placeholder": S(workload=W + '\nsetup = ["echo {variant}"]'),
 "wrap-empty-string": S(variants='[[variant]]\nname = "a"\nwrap = [""]\n\n[[variant]]\nname = "b"\n'),
 "stdout-cap-negative": S(experiment='stdout_cap = -1'),
 "max-failures-negative": S(experiment='max_failures = -1'),
 "vars-shadow-builtin": S(variants='[[variant]]\nname = "a"\nvars = {variant = "x"}\n\n[[variant]]\nname = "b"\n'),
 "variant-name-slash": S(variants='[[variant]]\nname = "a/b"\n\n[[variant]]\nname = "b"\n'),
 "detect-pattern-bad-regex": S(variants='[[variant]]\nname = "a"\nexternal = true\ndetect = "uname -r"\ndetect_pattern = "(["\n\n[[variant]]\nname = "b"\nexternal = true\n'),
}

# The one line after "perfab: SPEC: " for each situation ({cwd}: the directory perfab runs in).
EXPECTED = {
    'toml-syntax': 'malformed TOML: Invalid value (at line 5, column 10); fix the syntax at that line',
    'unterminated-string': "malformed TOML: Illegal character '\\n' (at line 5, column 21); fix the syntax at that line",
    'empty-file': 'experiment: missing; add it',
    'only-comment': 'experiment: missing; add it',
    'binary-bytes': 'cannot read the spec (UnicodeDecodeError); check the path and that it is a UTF-8 text file',
    'latin1-bytes': 'cannot read the spec (UnicodeDecodeError); check the path and that it is a UTF-8 text file',
    'unknown-top-table': 'experiments: unknown key; remove it or use one of: experiment, measure, variant, workload',
    'unknown-experiment-key': 'experiment.warmpu: unknown key; remove it or use one of: alpha, baseline, build, build_timeout, confidence, fdr, margin, max_failures, max_runs, method, min_runs, name, order, pin, repo, runs, seed, spending, stdout_cap, stop_on, warmup',
    'unknown-variant-key': 'variant[0].envv: unknown key; remove it or use one of: build, detect, detect_pattern, env, external, git, name, setup, teardown, vars, wrap',
    'unknown-workload-key': 'workload[0].args: unknown key; remove it or use one of: argv, cwd, metric, name, params, parser, parser_options, service, setup, shell, teardown, timeout',
    'unknown-measure-key': 'measure.counter: unknown key; remove it or use one of: backend, branch_sim, callgrind_toggle, counters, interrupts, l1d, l1i, ll, max_events_per_run, profile, profile_event, profile_freq',
    'runs-string': "experiment.runs: expected integer, got string 'ten'; write it as a TOML integer",
    'runs-float': 'experiment.runs: expected integer, got float 1.5; write it as a TOML integer',
    'runs-bool': 'experiment.runs: expected integer, got boolean True; write it as a TOML integer',
    'runs-zero': 'experiment.runs: must be >= 1, got 0; use a value >= 1',
    'runs-negative': 'experiment.runs: must be >= 1, got -3; use a value >= 1',
    'runs-int64-max': 'experiment.runs: must be <= 10,000, got 9,223,372,036,854,775,807; use a value <= 10,000',
    'warmup-1e8': 'experiment.warmup: expected integer, got float 100000000.0; write it as a TOML integer',
    'warmup-huge-int': 'experiment.warmup: must be <= 1,000, got 100,000,000; use a value <= 1,000',
    'name-missing': 'experiment.name: missing; add it',
    'name-empty': "experiment.name: '' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
    'name-not-string': 'experiment.name: expected string, got integer 3; write it as a TOML string',
    'no-variants': 'variant: missing; add it',
    'duplicate-variant': "variant.name: 'a' is used twice; give each one a distinct name",
    'variant-without-name': 'variant[1].name: missing; add it',
    'duplicate-workload': "workload.name: 'w' is used twice; give each one a distinct name",
    'no-workload': 'workload: missing; add it',
    'argv-string': 'workload[0].argv: a string command needs shell = true; write argv as a list ["prog", "arg"] or add shell = true',
    'argv-empty': 'workload[0].argv: is empty; name the program to run',
    'argv-non-string': 'workload[0].argv: expected a list of strings, got [\'echo\', 3]; write it as ["a", "b"]',
    'argv-nul': 'workload[0].argv[1]: contains a NUL byte (\\u0000); remove it: commands cannot carry NUL',
    'env-name-equals': "variant[0].env: 'A=B' is not an environment variable name; use a non-empty name without '='",
    'env-name-empty': "variant[0].env: '' is not an environment variable name; use a non-empty name without '='",
    'env-value-nul': 'variant[0].env.X: contains a NUL byte (\\u0000); remove it: commands cannot carry NUL',
    'placeholder-unknown': "workload 'w', variant 'a': unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'parser-unknown': "workload[0].parser: unknown parser 'nosuch': choose one of ab, db_bench, gnu-time, hackbench, keyvalue, lmbench, perf-bench, pgbench, redis-benchmark, regex, stress-ng, sysbench, unixbench, will-it-scale, wrk; see the Parsers section of the README",
    'parser-options-unknown': "workload[0].parser_options: parser 'keyvalue' has no option 'bogus': it accepts higher_is_better, only, units; see the Parsers section of the README",
    'executable-missing': "workload 'w', variant 'a': argv[0] '/nonexistent/bin/tool' does not exist; build it or fix the path (relative to {cwd})",
    'executable-directory': "workload 'w', variant 'a': argv[0] '/tmp' is a directory; build it or fix the path (relative to {cwd})",
    'executable-not-on-path': "workload 'w', variant 'a': argv[0] 'no-such-tool-xyz' is not on the PATH of this side; install it or give its full path",
    'cwd-missing': "workload 'w', variant 'a': cwd '/nonexistent/dir' is not a directory; create it or fix workload.cwd",
    'cwd-file': "workload 'w', variant 'a': cwd '/etc/hostname' is not a directory; create it or fix workload.cwd",
    'pin-reversed': 'experiment.pin: range \'5-1\' runs backwards; write it as "1-5"',
    'pin-out-of-range': "experiment.pin: CPU 4096 in '4096' is not available here (this machine offers 0-1); pin to those CPUs",
    'pin-garbage': 'experiment.pin: \'one\' is not a CPU list; write it like "2" or "0-1,3"',
    'pin-negative': 'experiment.pin: \'-1\' is not a CPU list; write it like "2" or "0-1,3"',
    'order-unknown': "experiment.order: unknown value 'shuffled'; use one of: interleaved, alternate, sequential, random",
    'method-unknown': "experiment.method: unknown value 'bayes'; use one of: nonparametric, exact, normal",
    'alpha-zero': 'experiment.alpha: must lie strictly between 0 and 1, got 0.0; e.g. alpha = 0.05, confidence = 0.95',
    'alpha-one': 'experiment.alpha: must lie strictly between 0 and 1, got 1.0; e.g. alpha = 0.05, confidence = 0.95',
    'alpha-percent': 'experiment.alpha: expected float, got integer 5; write it as a TOML float',
    'confidence-above-one': 'experiment.confidence: expected float, got integer 95; write it as a TOML float',
    'margin-negative': 'experiment.margin: must be >= 0, got -1; use a value >= 0',
    'margin-string': "experiment.margin: expected integer or float, got string '1%'; write it as a TOML integer or float",
    'fdr-unknown': "experiment.fdr: unknown value 'bonferroni'; use one of: bh, holm",
    'baseline-unknown': "experiment.baseline: no variant named 'c'; use one of: a, b",
    'metric-direction-unknown': 'workload[0].metric[0].direction: unknown value \'up\'; use "higher", "lower" or "none"',
    'metric-without-name': 'workload[0].metric[0].name: missing; add it',
    'metric-duplicate': "workload[0].metric.name: 'x' is used twice; give each one a distinct name",
    'metric-margin-negative': 'workload[0].metric[0].margin: must be >= 0, got -2; use a value >= 0',
    'params-empty-list': 'workload[0].params.threads: expected a non-empty array of values, got []; e.g. [1, 2, 4]',
    'params-builtin-name': "workload[0].params.variant: is not a usable parameter name; use letters, digits and '_' (not build, experiment, metric, run_id, seq, src, value, variant, warmup, workload)",
    'params-not-table': 'workload[0].params: expected table, got array [1, 2]; write it as a TOML table',
    'params-nested': 'workload[0].params.threads: value [1] is not a number or string; write e.g. 4 or "50%"',
    'backend-unknown': "measure.backend: unknown value 'vtune'; use one of: time, perf, cachegrind",
    'cachegrind-l1i-garbage': 'measure.l1i: l1i=\'big\' is not a cache geometry: write size,assoc,line with an optional K/M size suffix, e.g. l1i="32K,8,64"',
    'cachegrind-branch-sim-string': "measure.branch_sim: expected boolean, got string 'yes'; write it as a TOML boolean",
    'counters-on-time-backend': 'measure.counters: counters are read by the perf backend, not \'time\'; set backend = "perf" or remove counters',
    'service-without-argv': 'workload[0].service.argv: missing; add it',
    'service-port-zero': 'workload[0].service.port: 0 is not a TCP port; use 1..65535',
    'service-port-70000': 'workload[0].service.port: 70000 is not a TCP port; use 1..65535',
    'service-counters-bad': 'workload[0].service.counters: unknown value \'all\'; use "pids" or "cpus"',
    'timeout-zero': 'workload[0].timeout: must be >= 0.001, got 0; use a value >= 0.001',
    'timeout-negative': 'workload[0].timeout: must be >= 0.001, got -5; use a value >= 0.001',
    'timeout-nan': 'workload[0].timeout: must be a finite number, got nan; write a plain number',
    'margin-inf': 'experiment.margin: must be a finite number, got inf; write a plain number',
    'build-string-not-array': 'experiment.build: expected a list of strings, got 3; write it as ["a", "b"]',
    'git-not-string': 'variant[0].git: expected string, got integer 3; write it as a TOML string',
    'auto-min-above-max': 'experiment.max_runs: 10 is below min_runs 30; raise max_runs or lower min_runs',
    'auto-unknown-spending': "experiment.spending: unknown value 'haybittle'; use one of: pocock, obrien-fleming, linear",
    'runs-auto-typo': "experiment.runs: expected integer, got string 'automatic'; write it as a TOML integer",
    'stop-on-unknown': "experiment.stop_on: unknown value 'some'; use one of: primary, all",
    'external-not-bool': "variant[0].external: expected boolean, got string 'yes'; write it as a TOML boolean",
    'shell-with-list': 'workload[0].argv: shell = true takes one command string; write argv = "cmd | cmd"',
    'workload-setup-variant-placeholder': 'workload[0].setup: uses {variant}, but it runs once for every side and sweep point; use only {workload} and {experiment} here, or move the command to variant.setup (run on each switch to a side)',
    'wrap-empty-string': "workload 'w', variant 'a': wrap[0] '' is not on the PATH of this side; install it or give its full path",
    'stdout-cap-negative': 'experiment.stdout_cap: must be >= 0, got -1; use a value >= 0',
    'max-failures-negative': 'experiment.max_failures: must be >= 0, got -1; use a value >= 0',
    'vars-shadow-builtin': "variant[0].vars.variant: is not a usable placeholder name; use letters, digits and '_', starting with a letter (not build, experiment, metric, run_id, seq, src, value, variant, warmup, workload)",
    'variant-name-slash': "variant[0].name: 'a/b' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
    'detect-pattern-bad-regex': 'variant[0].detect_pattern: bad regex (unterminated character set at position 1); fix the pattern',
}


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    return stored_db(tmp_path_factory.mktemp("kept"))


def refused(tmp_path: Path, kept: Path, name: str, text: str | bytes, message: str) -> None:
    """``plan`` and ``run`` both exit 2 with exactly ``perfab: NAME.toml: MESSAGE``; the database is untouched."""
    write(tmp_path / f"{name}.toml", text)
    db = shutil.copy(kept, tmp_path / "results.db")
    before = file_digest(db)
    line = f"perfab: {name}.toml: {message}"
    for argv in (("plan", f"{name}.toml"), ("run", f"{name}.toml", "--db", "results.db")):
        got = cli(*argv, cwd=tmp_path)
        got.one_line_error(2, "^" + re.escape(line) + "$")
        assert got.out == ""
    assert file_digest(db) == before


@pytest.mark.parametrize("name", list(EXPECTED))
def test_bad_spec_is_refused_naming_file_key_and_fix(tmp_path, kept, name):
    """One hostile spec from the table: the exact one-line refusal, exit 2, the stored session kept as it was."""
    refused(tmp_path, kept, name, CASES[name], EXPECTED[name].replace("{cwd}", str(tmp_path)))


def test_program_without_execute_permission(tmp_path, kept):
    """A workload program that exists but is not executable is named, with chmod as the fix."""
    write(tmp_path / "tool", "#!/bin/sh\ntrue\n").chmod(0o644)
    refused(tmp_path, kept, "noexec", two_sides(workload='argv = ["./tool"]'),
            f"workload 'w', variant 'a': argv[0] './tool' is not executable (chmod +x it); build it or fix the path "
            f"(relative to {tmp_path})")


def test_service_program_missing(tmp_path, kept):
    """A service whose program is not on the PATH is named as the service's argv[0]."""
    refused(tmp_path, kept, "nosvc",
            two_sides(extra='\n[workload.service]\nargv = ["no-such-server-xyz"]\nport = 18080\n'),
            "workload 'w', variant 'a': service argv[0] 'no-such-server-xyz' is not on the PATH of this side; "
            "install it or give its full path")


def test_program_missing_on_one_side_only(tmp_path, kept):
    """A program path built from {variant} that exists for one side only is refused for the other side."""
    (tmp_path / "a").mkdir()
    write(tmp_path / "a" / "tool", "#!/bin/sh\ntrue\n").chmod(0o755)
    refused(tmp_path, kept, "oneside", two_sides(workload='argv = ["./{variant}/tool"]'),
            f"workload 'w', variant 'b': argv[0] './b/tool' does not exist; build it or fix the path "
            f"(relative to {tmp_path})")


def test_unknown_git_ref(tmp_path, kept):
    """A side built from a git ref the repository does not have is refused before any run."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    text = two_sides(experiment=f'repo = "{repo}"',
                     variants='[[variant]]\nname = "a"\ngit = "no-such-ref-xyz"\nbuild = ["true"]\n\n'
                              '[[variant]]\nname = "b"\n')
    write(tmp_path / "gitref.toml", text)
    db = shutil.copy(kept, tmp_path / "results.db")
    before = file_digest(db)
    for argv in (("plan", "gitref.toml"), ("run", "gitref.toml", "--db", "results.db")):
        cli(*argv, cwd=tmp_path).one_line_error(2, r"no-such-ref-xyz")
    assert file_digest(db) == before


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_spec_path_is_not_a_file(tmp_path, kept, where):
    """A spec path that does not exist, or is a directory, is one line saying which."""
    if where == "directory":
        (tmp_path / "spec.toml").mkdir()
    message = {"missing": "no such spec file", "directory": "is a directory"}[where]
    db = shutil.copy(kept, tmp_path / "results.db")
    before = file_digest(db)
    for argv in (("plan", "spec.toml"), ("run", "spec.toml", "--db", "results.db")):
        cli(*argv, cwd=tmp_path).one_line_error(2, "^perfab: spec.toml: " + message)
    assert file_digest(db) == before
