"""Bad experiment specs: each is refused before anything is stored, in one line naming file, key and fix.

Every situation is tried twice: ``perfab plan SPEC``, and ``perfab run SPEC``
against a database that already holds a finished session, which must come
out byte for byte unchanged (a bad spec never leaves a session behind).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, sessions_of, stored_db, two_sides, write

W = 'argv = ["true"]'
CPUS = os.sysconf("SC_NPROCESSORS_ONLN")  # what "100%" in a sweep resolves to
V2 = '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
def S(workload=W, experiment="", variants=V2, extra="", runs="2", warmup="0", name='"rel"', head=""):
    return (f'{head}[experiment]\nname = {name}\nruns = {runs}\nwarmup = {warmup}\n{experiment}\n\n'
            f'{variants}\n[[workload]]\nname = "w"\n{workload}\n{extra}')
def VA(extra):
    """Sides a and b, with ``extra`` lines in a's table."""
    return f'[[variant]]\nname = "a"\n{extra}\n\n[[variant]]\nname = "b"\n'
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

 "nesting-arrays-too-deep": S(head="x = " + "[" * 5000 + "]" * 5000 + "\n"),
 "nesting-inline-tables-too-deep": S(head="x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n"),
 "toml-duplicate-key": S(experiment="runs = 3"),
 "utf16-bytes": S().encode("utf-16"),
 "top-level-key-nul": S(head='"a\\u0000" = 1\n'),
 "env-name-nul": S(variants=VA('env = {"A\\u0000" = "1"}')),
 "env-value-bool": S(variants=VA("env = {X = true}")),
 "env-value-table": S(variants=VA("env = {X = {y = 1}}")),
 "env-not-table": S(variants=VA('env = "X=1"')),
 "experiment-not-table": "experiment = 3\n\n" + V2 + '\n[[workload]]\nname = "w"\n' + W + "\n",
 "variant-table-not-array": S(variants='[variant]\nname = "a"\n'),
 "variant-elements-not-tables": S(head="variant = [1, 2]\n", variants=""),
 "variant-empty-array": S(head="variant = []\n", variants=""),
 "workload-elements-not-tables": S().split("[[workload]]")[0].replace("[experiment]", "workload = [1]\n[experiment]", 1),
 "workload-table-not-array": S().split("[[workload]]")[0] + '[workload]\nname = "w"\n' + W + "\n",
 "measure-not-table": S(head="measure = 3\n"),
 "argv0-empty": S(workload='argv = ["", "x"]'),
 "shell-not-bool": S(workload='argv = "true"\nshell = "yes"'),
 "cwd-integer": S(workload=W + "\ncwd = 3"),
 "timeout-string": S(workload=W + '\ntimeout = "10s"'),
 "timeout-over-a-week": S(workload=W + "\ntimeout = 1e12"),
 "params-value-brace": S(workload=W + '\nparams = {threads = ["{x}"]}'),
 "params-value-empty-string": S(workload=W + '\nparams = {threads = [""]}'),
 "params-value-nan": S(workload=W + "\nparams = {threads = [nan]}"),
 "params-repeated-value": S(workload=W + "\nparams = {threads = [1, 1]}"),
 "params-percent-equals-number": S(workload=W + f'\nparams = {{threads = ["100%", {CPUS}]}}'),
 "params-name-digit-first": S(workload=W + '\nparams = {"1x" = [1]}'),
 "params-grid-too-large": S(workload=W + "\nparams = {a = [%s], b = [%s]}" % ((",".join(map(str, range(40))),) * 2)),
 "plan-too-large": S(runs="10000", warmup="1000", workload=W + "\nparams = {t = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}"),
 "parser-not-string": S(workload=W + "\nparser = 3"),
 "parser-options-without-parser": S(workload=W + '\nparser_options = {only = ["x"]}'),
 "parser-options-not-table": S(workload=W + '\nparser = "keyvalue"\nparser_options = 3'),
 "parser-options-for-optionless-parser": S(workload=W + '\nparser = "gnu-time"\nparser_options = {x = 1}'),
 "parser-regex-without-patterns": S(workload=W + '\nparser = "regex"'),
 "parser-keyvalue-only-not-list": S(workload=W + '\nparser = "keyvalue"\nparser_options = {only = 3}'),
 "service-not-table": S(workload=W + '\nservice = "redis"'),
 "service-unknown-key": S(extra='\n[workload.service]\nargv = ["true"]\nprot = 80\n'),
 "service-argv-empty": S(extra='\n[workload.service]\nargv = []\nport = 8080\n'),
 "service-port-string": S(extra='\n[workload.service]\nargv = ["true"]\nport = "80"\n'),
 "service-ready-timeout-negative": S(extra='\n[workload.service]\nargv = ["true"]\nready_timeout = -1\n'),
 "service-cpus-without-counters": S(extra='\n[workload.service]\nargv = ["true"]\ncpus = "1"\n'),
 "service-cpus-garbage": S(extra='\n[workload.service]\nargv = ["true"]\ncounters = "cpus"\ncpus = "x"\n'
                                 '\n[measure]\nbackend = "perf"\ncounters = ["cycles"]\n'),
 "service-counters-on-time-backend": S(extra='\n[workload.service]\nargv = ["true"]\ncounters = "pids"\n'),
 "min-runs-without-auto": S(experiment="min_runs = 5"),
 "auto-order-sequential": S(runs='"auto"', experiment='order = "sequential"'),
 "auto-min-runs-one": S(runs='"auto"', experiment="min_runs = 1"),
 "auto-max-runs-huge": S(runs='"auto"', experiment="max_runs = 100000"),
 "perf-without-counters": S(extra='\n[measure]\nbackend = "perf"\n'),
 "cachegrind-key-on-time-backend": S(extra='\n[measure]\nl1i = "32K,8,64"\n'),
 "cachegrind-l1i-integer": S(extra='\n[measure]\nbackend = "cachegrind"\nl1i = 32768\n'),
 "cachegrind-l1i-not-power-of-two": S(extra='\n[measure]\nbackend = "cachegrind"\nl1i = "33K,8,64"\n'),
 "max-events-zero": S(extra='\n[measure]\nbackend = "perf"\ncounters = ["cycles"]\nmax_events_per_run = 0\n'),
 "profile-freq-zero": S(extra="\n[measure]\nprofile_freq = 0\n"),
 "profile-string": S(extra='\n[measure]\nprofile = "yes"\n'),
 "interrupts-row-with-colon": S(extra='\n[measure]\ninterrupts = ["TLB:"]\n'),
 "metric-not-table": S(workload=W + "\nmetric = [1]"),
 "metric-not-array": S(workload=W + '\nmetric = {name = "x"}'),
 "metric-method-unknown": S(extra='\n[[workload.metric]]\nname = "x"\nmethod = "bayes"\n'),
 "metric-check-inf": S(extra='\n[[workload.metric]]\nname = "x"\ncheck = inf\n'),
 "metric-primary-string": S(extra='\n[[workload.metric]]\nname = "x"\nprimary = "yes"\n'),
 "external-on-one-side-only": S(variants=VA("external = true")),
 "detect-without-pattern": S(variants='[[variant]]\nname = "a"\nexternal = true\ndetect = "uname"\n\n'
                                      '[[variant]]\nname = "b"\nexternal = true\n'),
 "git-ref-like-an-option": S(variants=VA('git = "--upload-pack=touch /tmp/x"')),
 "git-ref-blank": S(variants=VA('git = " "')),
 "repo-not-a-git-repository": S(experiment='repo = "/nonexistent"', variants=VA('git = "main"')),
 "build-unknown-placeholder": S(experiment='build = ["echo {nope}"]'),
 "seed-beyond-int64": S(experiment="seed = 9223372036854775808"),
 "seed-float": S(experiment="seed = 1.0"),
 "build-timeout-negative": S(experiment="build_timeout = -1"),
 "stdout-cap-beyond-1gib": S(experiment="stdout_cap = 2147483648"),
 "margin-huge": S(experiment="margin = 1e9"),
 "pin-float": S(experiment="pin = 1.5"),
 "pin-empty": S(experiment='pin = ""'),
 "pin-twenty-digits": S(experiment='pin = "99999999999999999999"'),
 "order-integer": S(experiment="order = 1"),
 "baseline-integer": S(experiment="baseline = 1"),
 "warmup-negative": S(warmup="-1"),
 "runs-inf": S(runs="inf"),
 "variant-setup-unknown-placeholder": S(variants=VA('setup = ["echo {nope}"]')),
 "wrap-unknown-placeholder": S(variants=VA('wrap = ["{nope}"]')),
 "cwd-unknown-placeholder": S(workload=W + '\ncwd = "{nope}"'),
 "service-argv-unknown-placeholder": S(extra='\n[workload.service]\nargv = ["true", "{nope}"]\n'),
 "shell-command-unknown-placeholder": S(workload='argv = "echo {nope}"\nshell = true'),
 "wrap-not-list": S(variants=VA("wrap = 3")),
 "variant-setup-integer": S(variants=VA("setup = [1]")),
 "vars-name-digit-first": S(variants=VA('vars = {"1x" = "y"}')),
 "vars-value-table": S(variants=VA("vars = {x = {}}")),
 "name-leading-space": S(name='" x"'),
 "name-newline": S(name='"a\\nb"'),
 "name-non-ascii": S(name='"caf\u00e9"'),
 "workload-name-empty": S().replace('name = "w"', 'name = ""'),
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
    'unknown-experiment-key': 'experiment.warmpu: unknown key; remove it or use one of: alpha, baseline, build, build_timeout, confidence, fdr, layout, layout_builds, layout_check, margin, max_failures, max_runs, method, min_runs, name, order, perturb, perturb_seed, pin, repo, runs, seed, spending, stdout_cap, stop_on, warmup',
    'unknown-variant-key': 'variant[0].envv: unknown key; remove it or use one of: build, detect, detect_pattern, env, external, git, kernel, name, setup, teardown, vars, wrap',
    'unknown-workload-key': 'workload[0].args: unknown key; remove it or use one of: argv, cwd, metric, name, params, parser, parser_options, service, setup, shell, teardown, timeout',
    'unknown-measure-key': 'measure.counter: unknown key; remove it or use one of: accel, backend, boots, branch_sim, cache_sim, callgrind_toggle, coherence, counters, files, guest_counters, interrupts, l1d, l1i, ll, max_events_per_run, memory, profile, profile_event, profile_freq, root, size, snapshot, vcpus, vmstat',
    'runs-string': 'experiment.runs: expected integer or "auto", got string \'ten\'; write runs = 20 (runs per side) or runs = "auto" (lower case, a sequential experiment)',
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
    'placeholder-unknown': "workload 'w', variant 'a', workload.argv: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
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
    'backend-unknown': "measure.backend: unknown value 'vtune'; use one of: time, perf, cachegrind, guest",
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
    'runs-auto-typo': 'experiment.runs: expected integer or "auto", got string \'automatic\'; write runs = 20 (runs per side) or runs = "auto" (lower case, a sequential experiment)',
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
    'nesting-arrays-too-deep': 'arrays or tables nested too deeply to read; flatten them',
    'nesting-inline-tables-too-deep': 'arrays or tables nested too deeply to read; flatten them',
    'toml-duplicate-key': 'malformed TOML: Cannot overwrite a value (at line 5, column 9); fix the syntax at that line',
    'utf16-bytes': 'cannot read the spec (UnicodeDecodeError); check the path and that it is a UTF-8 text file',
    'top-level-key-nul': "'a\\x00': key contains a NUL byte; rename it",
    'env-name-nul': "variant[0].env.'A\\x00': key contains a NUL byte; rename it",
    'env-value-bool': 'variant[0].env.X: expected a string, got True; quote the value',
    'env-value-table': "variant[0].env.X: expected a string, got {'y': 1}; quote the value",
    'env-not-table': "variant[0].env: expected table, got string 'X=1'; write it as a TOML table",
    'experiment-not-table': 'experiment: expected table, got integer 3; write it as a TOML table',
    'variant-table-not-array': "variant: expected array, got table {'name': 'a'}; write it as a TOML array",
    'variant-elements-not-tables': 'variant[0]: expected a table, got integer 1; write it as [[variant]] with key = value lines',
    'variant-empty-array': 'variant: need at least one [[variant]] table (two to compare); add a baseline and an experiment side',
    'workload-elements-not-tables': 'workload[0]: expected a table, got integer 1; write it as [[workload]] with key = value lines',
    'workload-table-not-array': "workload: expected array, got table {'name': 'w', 'argv': ['true']}; write it as a TOML array",
    'measure-not-table': 'measure: expected a table; write [measure]',
    'argv0-empty': 'workload[0].argv[0]: is an empty program name; name the program to run',
    'shell-not-bool': "workload[0].shell: expected boolean, got string 'yes'; write it as a TOML boolean",
    'cwd-integer': 'workload[0].cwd: expected string, got integer 3; write it as a TOML string',
    'timeout-string': "workload[0].timeout: expected integer or float, got string '10s'; write it as a TOML integer or float",
    'timeout-over-a-week': 'workload[0].timeout: must be <= 604,800, got 1,000,000,000,000.0; use a value <= 604,800',
    'params-value-brace': "workload[0].params.threads: value '{x}' cannot be a placeholder value; use plain text",
    'params-value-empty-string': "workload[0].params.threads: value '' cannot be a placeholder value; use plain text",
    'params-value-nan': 'workload[0].params.threads: value nan is not finite; write a plain number',
    'params-repeated-value': "workload[0].params.threads: values ['1', '1'] repeat (after resolving percentages); list each value once",
    'params-percent-equals-number': "workload[0].params.threads: values ['2', '2'] repeat (after resolving percentages); list each value once",
    'params-name-digit-first': "workload[0].params.1x: is not a usable parameter name; use letters, digits and '_' (not build, experiment, metric, run_id, seq, src, value, variant, warmup, workload)",
    'params-grid-too-large': 'workload[0].params: the grid has 1,600 points (more than 1,000); sweep fewer values',
    'plan-too-large': "experiment.runs: the plan would hold 220,000 runs (more than 200,000); lower runs, warmup or the sweep's points",
    'parser-not-string': 'workload[0].parser: expected string, got integer 3; write it as a TOML string',
    'parser-options-without-parser': 'workload[0].parser_options: given without a parser; add parser = "..." or remove them',
    'parser-options-not-table': 'workload[0].parser_options: expected table, got integer 3; write it as a TOML table',
    'parser-options-for-optionless-parser': "workload[0].parser_options: parser 'gnu-time' has no option 'x': it accepts none; see the Parsers section of the README",
    'parser-regex-without-patterns': 'workload[0].parser_options: parser \'regex\' needs option patterns = {metric_name = "regex with one group"}; see the Parsers section of the README',
    'parser-keyvalue-only-not-list': 'workload[0].parser_options: keyvalue option only must be a list of metric names; see the Parsers section of the README',
    'service-not-table': "workload[0].service: expected table, got string 'redis'; write it as a TOML table",
    'service-unknown-key': 'workload[0].service.prot: unknown key; remove it or use one of: argv, counters, cpus, cwd, log, port, ready_timeout, requests',
    'service-argv-empty': 'workload[0].service.argv: is empty; name the server program',
    'service-port-string': "workload[0].service.port: expected integer, got string '80'; write it as a TOML integer",
    'service-ready-timeout-negative': 'workload[0].service.ready_timeout: must be >= 0, got -1; use a value >= 0',
    'service-cpus-without-counters': 'workload[0].service.cpus: goes with counters = "cpus" (and only with it); set both, e.g. counters = "cpus" and cpus = "1"',
    'service-cpus-garbage': 'workload[0].service.cpus: \'x\' is not a CPU list; write it like "2" or "0-1,3"',
    'service-counters-on-time-backend': 'workload[0].service.counters: counts with perf stat; set [measure] backend = "perf" or remove service.counters',
    'min-runs-without-auto': 'experiment.min_runs: is read only with runs = "auto"; set runs = "auto" (a sequential experiment) or remove it',
    'auto-order-sequential': 'experiment.order: a sequential experiment (runs = "auto") looks after each block; use order = "interleaved" or "alternate"',
    'auto-min-runs-one': 'experiment.min_runs: must be >= 2, got 1; use a value >= 2',
    'auto-max-runs-huge': 'experiment.max_runs: must be <= 10,000, got 100,000; use a value <= 10,000',
    'perf-without-counters': 'measure.counters: the perf backend needs events to count; add counters = ["task-clock", "context-switches"] or use backend = "time"',
    'cachegrind-key-on-time-backend': 'measure.l1i: is read by the cachegrind backend (or guest with cache_sim = true), not \'time\'; set backend = "cachegrind" or remove l1i',
    'cachegrind-l1i-integer': 'measure.l1i: expected string, got integer 32768; write it as a TOML string',
    'cachegrind-l1i-not-power-of-two': 'measure.l1i: l1i=\'33K,8,64\': valgrind cannot simulate this cache: 66 sets (valgrind needs a power of two); use l1i="32K,8,64" (nearest geometry valgrind simulates)',
    'max-events-zero': 'measure.max_events_per_run: must be >= 1, got 0; use a value >= 1',
    'profile-freq-zero': 'measure.profile_freq: must be >= 1, got 0; use a value >= 1',
    'profile-string': "measure.profile: expected boolean, got string 'yes'; write it as a TOML boolean",
    'interrupts-row-with-colon': 'measure.interrupts: \'TLB:\' is not a /proc/interrupts row name; use the name before the colon, e.g. "TLB", "CAL", "RES" or an IRQ number',
    'metric-not-table': 'workload[0].metric[0]: expected a table; write [[workload.metric]] tables',
    'metric-not-array': "workload[0].metric: expected array, got table {'name': 'x'}; write it as a TOML array",
    'metric-method-unknown': "workload[0].metric[0].method: unknown method 'bayes'; use one of: nonparametric, exact, normal",
    'metric-check-inf': 'workload[0].metric[0].check: must be a finite number, got inf; write a plain number',
    'metric-primary-string': "workload[0].metric[0].primary: expected boolean, got string 'yes'; write it as a TOML boolean",
    'external-on-one-side-only': 'variant.external: some sides are external and some are not; mark every side external = true (e.g. two booted kernels) or none',
    'detect-without-pattern': "variant[0].detect_pattern: missing; add the regex that detect's output must match",
    'git-ref-like-an-option': 'variant[0].git: \'--upload-pack=touch /tmp/x\' is not a git ref; name a branch, tag or commit, e.g. "v6.1"',
    'git-ref-blank': 'variant[0].git: \' \' is not a git ref; name a branch, tag or commit, e.g. "v6.1"',
    'repo-not-a-git-repository': "experiment.repo '/nonexistent' does not exist; set it to the git repository the sides' git refs name",
    'build-unknown-placeholder': "variant 'a' build: unknown placeholder {nope}; known: {build}, {experiment}, {layout_cflags}, {src}, {variant}",
    'seed-beyond-int64': 'experiment.seed: must be <= 9,223,372,036,854,775,807, got 9,223,372,036,854,775,808; use a value <= 9,223,372,036,854,775,807',
    'seed-float': 'experiment.seed: expected integer, got float 1.0; write it as a TOML integer',
    'build-timeout-negative': 'experiment.build_timeout: must be >= 0, got -1; use a value >= 0',
    'stdout-cap-beyond-1gib': 'experiment.stdout_cap: must be <= 1,073,741,824, got 2,147,483,648; use a value <= 1,073,741,824',
    'margin-huge': 'experiment.margin: must be <= 1,000, got 1,000,000,000.0; use a value <= 1,000',
    'pin-float': 'experiment.pin: expected string or integer, got float 1.5; write it as a TOML string or integer',
    'pin-empty': 'experiment.pin: \'\' is not a CPU list; write it like "2" or "0-1,3"',
    'pin-twenty-digits': "experiment.pin: CPU 99999999999999999999 in '99999999999999999999' is out of range; use CPU numbers 0..8191",
    'order-integer': 'experiment.order: expected string, got integer 1; write it as a TOML string',
    'baseline-integer': 'experiment.baseline: expected string, got integer 1; write it as a TOML string',
    'warmup-negative': 'experiment.warmup: must be >= 0, got -1; use a value >= 0',
    'runs-inf': 'experiment.runs: expected integer, got float inf; write it as a TOML integer',
    'variant-setup-unknown-placeholder': "workload 'w', variant 'a', variant.setup: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'wrap-unknown-placeholder': "workload 'w', variant 'a', variant.wrap: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'cwd-unknown-placeholder': "workload 'w', variant 'a', workload.cwd: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'service-argv-unknown-placeholder': "workload 'w', variant 'a', workload.service.argv: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'shell-command-unknown-placeholder': "workload 'w', variant 'a', workload.argv: unknown placeholder {nope}; known: {experiment}, {variant}, {workload}",
    'wrap-not-list': 'variant[0].wrap: expected a list of strings, got 3; write it as ["a", "b"]',
    'variant-setup-integer': 'variant[0].setup: expected a list of strings, got [1]; write it as ["a", "b"]',
    'vars-name-digit-first': "variant[0].vars.1x: is not a usable placeholder name; use letters, digits and '_', starting with a letter (not build, experiment, metric, run_id, seq, src, value, variant, warmup, workload)",
    'vars-value-table': 'variant[0].vars.x: expected a string, got {}; quote the value',
    'name-leading-space': "experiment.name: ' x' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
    'name-newline': "experiment.name: 'a\\nb' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
    'name-non-ascii': "experiment.name: 'café' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
    'workload-name-empty': "workload[0].name: '' is not a usable name; use letters, digits, '_', '-', '.', '+' and spaces",
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
    refused(tmp_path, kept, "gitref", text,
            f"git ref 'no-such-ref-xyz' names no commit in {repo.resolve()}; check variant.git (git log --oneline)")


@pytest.mark.parametrize("where", ["missing", "directory", "symlink-loop"])
def test_spec_path_is_not_a_file(tmp_path, kept, where):
    """A spec path that does not exist, is a directory, or is a symlink to itself is one line saying which."""
    if where == "directory":
        (tmp_path / "spec.toml").mkdir()
    if where == "symlink-loop":
        (tmp_path / "spec.toml").symlink_to("spec.toml")
    message = {"missing": "no such spec file", "directory": "is a directory",
               "symlink-loop": "cannot read the spec"}[where]
    db = shutil.copy(kept, tmp_path / "results.db")
    before = file_digest(db)
    for argv in (("plan", "spec.toml"), ("run", "spec.toml", "--db", "results.db")):
        cli(*argv, cwd=tmp_path).one_line_error(2, "^perfab: spec.toml: " + message)
    assert file_digest(db) == before


def test_byte_order_mark_is_read_as_utf8(tmp_path):
    """A spec saved with a UTF-8 byte-order mark (as some Windows editors do) is read like one without it."""
    write(tmp_path / "plain.toml", two_sides())
    write(tmp_path / "bom.toml", "\ufeff" + two_sides())
    plain = cli("plan", "plain.toml", cwd=tmp_path)
    got = cli("plan", "bom.toml", cwd=tmp_path)
    assert (got.code, got.err) == (0, plain.err) and "error" not in got.err  # plan's warnings alone, as without
    assert got.out == plain.out
    got = cli("run", "bom.toml", "--db", "results.db", "--no-report", cwd=tmp_path)
    assert (got.code, got.err) == (0, "")
    assert sessions_of(tmp_path / "results.db") == [(1, "finished")]
