"""Sides built from git: a shared cache entry built once and never in place, and no build process outliving perfab.

Real ``git`` repositories and real ``perfab run`` processes.  Two processes
building the same commit at once build it once; an entry whose files changed
after it was built is refused; a resumed session whose build changed is
refused; a build that times out, is stopped by a signal, or leaves a
background child behind leaves no process (checked in ``/proc``); unclear
repository and timeout settings are one line each.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import SRC, Outcome, cli, file_digest, stored_db, stored_rows, two_sides, write

ENTRY = "from perfab.cli import main_entry; main_entry()"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**GIT_ENV, "HOME": str(repo)}).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    write(r / "prog.sh", "#!/bin/sh\necho 'ops: 5'\n").chmod(0o755)
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "one")
    return r


def git_spec(tmp_path: Path, repo: Path, build: str, name: str = "g", runs: int = 2, extra: str = "") -> Path:
    """Side a built from main by ``build``; side b plain; the workload runs the built copy on side a."""
    return write(tmp_path / f"{name}.toml", f"""[experiment]
name = "{name}"
runs = {runs}
warmup = 0
repo = "{repo}"
{extra}

[[variant]]
name = "a"
git = "main"
build = {json.dumps(build)}

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["sh", "-c", "echo 'ops: 5'"]
parser = "keyvalue"
""")


def start(spec: Path, db: Path, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ENTRY, "run", str(spec), "--db", str(db), "--no-report"],
                            env={**os.environ, "PYTHONPATH": str(SRC)}, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def alive_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` (the process tree, read from /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
                found.append(int(pid))
        except OSError:
            pass
    return found


def no_process_left(marker: str, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive_with(marker)
    for pid in left:  # never leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"


def sources(db: Path) -> list[dict]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [json.loads(r[0]) for r in con.execute("SELECT sources_json FROM sessions ORDER BY id")]
    finally:
        con.close()


def test_two_processes_build_one_entry_once(tmp_path, repo):
    """Two `perfab run` at once on the same commit: one builds, the other waits and reuses it; one content hash."""
    count = tmp_path / "builds"
    spec = git_spec(tmp_path, repo, f"sleep 1; echo built >> {count}; cp {{src}}/prog.sh {{build}}/prog")
    procs = [start(spec, tmp_path / f"r{i}.db", tmp_path) for i in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert count.read_text() == "built\n"  # built once, never over itself
    hashes = {s["a"]["content"] for i in range(2) for s in sources(tmp_path / f"r{i}.db")}
    assert len(hashes) == 1 and len(next(iter(hashes))) == 64
    entries = [p for p in (tmp_path / ".perfab" / "cache").iterdir() if p.is_dir()]
    assert len(entries) == 1 and not entries[0].name.startswith(".")  # nothing half-built left beside it
    assert b"waiting: another perfab is building" in b"".join(err for _, err in outs)


def test_an_entry_changed_after_its_build_is_refused(tmp_path, repo):
    """A file written into a published entry: the next session is refused, naming the entry; nothing stored."""
    spec = git_spec(tmp_path, repo, "cp {src}/prog.sh {build}/prog")
    db = tmp_path / "r.db"
    assert cli("run", spec, "--db", db, "--no-report", cwd=tmp_path).code == 0
    entry = next(p for p in (tmp_path / ".perfab" / "cache").iterdir() if p.is_dir())
    rows = stored_rows(db)
    before = file_digest(db)
    (entry / "build" / "prog").write_text("#!/bin/sh\necho 'ops: 9'\n")
    out = cli("run", spec, "--db", db, "--no-report", "--new-session", cwd=tmp_path)
    out.one_line_error(1, rf"variant 'a': cache entry {entry} changed after it was built \(content [0-9a-f]{{12}}, "
                          r"now [0-9a-f]{12}\); something wrote into it: remove the directory to build it again$")
    assert stored_rows(db) == rows and file_digest(db) == before


def test_the_entry_is_published_whole_and_the_log_kept(tmp_path, repo):
    """After a build: the entry holds src, build, its log and stamp; the stamp's hash is the session's."""
    spec = git_spec(tmp_path, repo, "cp {src}/prog.sh {build}/prog")
    db = tmp_path / "r.db"
    assert cli("run", spec, "--db", db, "--no-report", cwd=tmp_path).code == 0
    entry = next(p for p in (tmp_path / ".perfab" / "cache").iterdir() if p.is_dir())
    assert sorted(p.name for p in entry.iterdir()) == [".perfab-built", "build", "build.log", "src"]
    stamp = json.loads((entry / ".perfab-built").read_text())
    assert stamp["content"] == sources(db)[0]["a"]["content"]
    assert git(entry / "src", "rev-parse", "HEAD").strip() == git(repo, "rev-parse", "main").strip()


def test_a_failed_build_leaves_no_entry_and_the_next_session_builds_it(tmp_path, repo):
    """A failed build is not published: no entry, its log kept beside the cache; a fixed build then publishes."""
    flag = tmp_path / "fail"
    flag.write_text("")
    spec = git_spec(tmp_path, repo, f"test ! -e {flag} && cp {{src}}/prog.sh {{build}}/prog")
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db, "--no-report", cwd=tmp_path)
    assert out.code == 1 and "exited 1" in out.err
    cache = tmp_path / ".perfab" / "cache"
    assert not [p for p in cache.iterdir() if p.is_dir()]
    assert [p.name for p in cache.glob("*.build.log")]
    flag.unlink()
    assert cli("run", spec, "--db", db, "--no-report", cwd=tmp_path).code == 0


def test_a_resumed_session_refuses_a_changed_build(tmp_path):
    """A side built in place whose files changed, and whose rebuild differs, when the session resumes: refused;
    the stored runs stay."""
    flag = tmp_path / "stop"
    flag.write_text("")
    spec = write(tmp_path / "s.toml", two_sides(
        experiment="max_failures = 0",
        variants='[[variant]]\nname = "a"\nbuild = ["sh", "-c", "date +%s%N > {build}/stamp"]\n\n'
                 '[[variant]]\nname = "b"\n',
        workload=f'argv = ["sh", "-c", "test ! -e {flag}"]', name="s"))
    db = tmp_path / "r.db"
    first = cli("run", spec, "--db", db, "--no-report", cwd=tmp_path)
    assert first.code == 1 and "aborted" in first.err
    flag.unlink()
    write(tmp_path / ".perfab" / "build" / "s" / "a" / "stamp", "changed by hand\n")
    rows = stored_rows(db)
    out = after_build(cli("run", spec, "--db", db, "--no-report", "--resume", cwd=tmp_path))
    out.one_line_error(1, r"variant 'a': its build is not the one this session measured \(content [0-9a-f]{12}, "
                          r"now [0-9a-f]{12}\); start a new session with --new-session$")
    assert stored_rows(db) == rows


def test_a_resumed_session_with_an_unchanged_build_is_not_rebuilt(tmp_path):
    """The same build files when the session resumes: no rebuild, the session finishes."""
    flag, count = tmp_path / "stop", tmp_path / "builds"
    flag.write_text("")
    spec = write(tmp_path / "s.toml", two_sides(
        experiment="max_failures = 0",
        variants=f'[[variant]]\nname = "a"\nbuild = ["sh", "-c", "echo x >> {count}; echo 1 > {{build}}/f"]\n\n'
                 '[[variant]]\nname = "b"\n',
        workload=f'argv = ["sh", "-c", "test ! -e {flag}"]', name="s"))
    db = tmp_path / "r.db"
    assert cli("run", spec, "--db", db, "--no-report", cwd=tmp_path).code == 1
    flag.unlink()
    out = cli("run", spec, "--db", db, "--no-report", "--resume", cwd=tmp_path)
    assert out.code == 0, out.err
    assert count.read_text() == "x\n" and "build unchanged since the session began; not rebuilt" in out.err


def after_build(out: Outcome) -> Outcome:
    """``out`` without the progress line that announces a build."""
    err = "".join(line for line in out.err.splitlines(True) if not line.startswith("perfab: building "))
    return Outcome(out.code, out.out, err)


def marker_script(tmp_path: Path, body: str) -> tuple[Path, str]:
    """A build script whose processes carry a unique marker in their command lines."""
    marker = f"perfab-build-marker-{os.getpid()}-{time.monotonic_ns()}"
    path = write(tmp_path / f"{marker}.sh", "#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path, marker


def test_a_build_timeout_stops_its_whole_tree(tmp_path, repo):
    """A build past build_timeout, with a child in its own session: one line, exit 1, no process left."""
    script, marker = marker_script(tmp_path, "setsid sh -c 'sleep 300' &\nsleep 300\n")
    spec = git_spec(tmp_path, repo, str(script), extra="build_timeout = 1")
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report", cwd=tmp_path)
    out_lines = [line for line in out.err.splitlines() if not line.startswith("perfab: building")]
    assert out.code == 1 and len(out_lines) == 1, out.err
    assert out_lines[0].startswith("perfab: variant 'a': build did not finish in 1 s (log: ")
    assert out_lines[0].endswith("its processes are stopped; raise experiment.build_timeout")
    no_process_left(marker)
    no_process_left("sleep 300")


def test_a_successful_build_leaves_no_background_child(tmp_path, repo):
    """A build that starts a daemon and exits 0: the build counts, the daemon is stopped with it."""
    script, marker = marker_script(tmp_path, 'cp "$1/prog.sh" "$2/prog"\n(setsid sleep 301 &)\nexit 0\n')
    spec = git_spec(tmp_path, repo, [str(script), "{src}", "{build}"])
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report", cwd=tmp_path)
    assert out.code == 0, out.err
    no_process_left("sleep 301")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_during_a_build_says_so_and_stops_the_build(tmp_path, repo, sig):
    """SIGTERM or SIGHUP while a side builds: one line naming the signal and the side, exit 128+N, no process."""
    script, marker = marker_script(tmp_path, "sleep 302\n")
    spec = git_spec(tmp_path, repo, str(script))
    db = tmp_path / "r.db"
    proc = start(spec, db, tmp_path)
    deadline = time.monotonic() + 60
    while not (alive_with(marker) and alive_with("sleep 302")) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not alive_with(marker):
        proc.kill()
        raise AssertionError(proc.communicate())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    lines = [x for x in err.decode().splitlines() if not x.startswith("perfab: building")]
    assert proc.returncode == 128 + sig and lines == [
        f"perfab: stopped by {sig.name} while building 'a'; its processes are stopped and nothing is stored; "
        "run again to build it"], err
    no_process_left(marker)
    no_process_left("sleep 302")
    assert not [p for p in (tmp_path / ".perfab" / "cache").iterdir() if p.is_dir()]


def test_build_timeout_zero_is_refused_by_plan(tmp_path, repo):
    """`build_timeout = 0`: refused when the spec is read (plan and run alike), not at the build."""
    spec = git_spec(tmp_path, repo, "true", extra="build_timeout = 0")
    for command in ("plan", "run"):
        cli(command, spec, cwd=tmp_path).one_line_error(
            2, r"experiment.build_timeout: must be > 0, got 0; give the seconds a build may take \(default 3600\)$")


@pytest.mark.parametrize("how", ["missing", "file", "dotdot"])
def test_a_repo_that_is_no_directory_says_which(tmp_path, how):
    """experiment.repo missing, a file, or `nosuch/..`: one line saying so, not 'not inside a git repository'."""
    kept = stored_db(tmp_path)
    repo = {"missing": tmp_path / "nosuch", "file": write(tmp_path / "f", "x"), "dotdot": f"{tmp_path}/nosuch/.."}[how]
    spec = git_spec(tmp_path, Path(repo) if how != "dotdot" else repo, "true")
    why = "is not a directory" if how == "file" else "does not exist"
    rows = stored_rows(kept)
    before = file_digest(kept)
    cli("run", spec, "--db", kept, cwd=tmp_path).one_line_error(
        2, rf"experiment.repo '.+' {why}; set it to the git repository the sides' git refs name$")
    assert stored_rows(kept) == rows and file_digest(kept) == before


def test_a_bare_repository_builds(tmp_path, repo):
    """A bare repository is a repository: its commits are checked out and built."""
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    spec = git_spec(tmp_path, bare, "cp {src}/prog.sh {build}/prog")
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report", cwd=tmp_path)
    assert out.code == 0, out.err
    assert sources(tmp_path / "r.db")[0]["a"]["commit"] == git(repo, "rev-parse", "main").strip()
