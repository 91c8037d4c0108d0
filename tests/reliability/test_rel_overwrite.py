"""Output paths that are inputs: refused before any work, every input byte-identical; outputs written whole.

``report -o``, ``run --html`` and ``size -o`` given the results database
(directly, through a symlink, a hard link, a ``..`` detour or as one of its
``-wal``/``-shm`` companions), the spec, or one of the ELF files: one line
naming the output and the input it is, exit 2, nothing changed.  A report
that is written replaces its target by rename: the old file's inode is gone,
its mode kept, no temporary file left beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, stored_db, stored_rows, two_sides, write

REFUSED = r"output '.+' is the {what} '.+'; writing it would destroy the input: give another output path$"
FORMATS = ["text", "markdown", "csv", "json", "html", "lkp"]


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """A database with one finished session, copied fresh for each test by ``db_copy``."""
    return stored_db(tmp_path_factory.mktemp("kept"))


@pytest.fixture
def db_copy(kept, tmp_path) -> Path:
    target = tmp_path / "results.db"
    shutil.copy(kept, target)
    return target


def unchanged(db: Path, before: str, rows: list) -> None:
    assert file_digest(db) == before
    assert stored_rows(db) == rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_report_output_is_the_database(db_copy, fmt):
    """`report --format F -o DB`: refused for every format; the database keeps every byte."""
    rows = stored_rows(db_copy)
    before = file_digest(db_copy)
    cli("report", "--db", db_copy, "--format", fmt, "-o", db_copy).one_line_error(
        2, REFUSED.format(what="results database"))
    unchanged(db_copy, before, rows)


@pytest.mark.parametrize("how", ["symlink", "hardlink", "dotdot", "relative", "symlinked-dir"])
@pytest.mark.parametrize("fmt", ["html", "json"])
def test_report_output_reaches_the_database_another_way(db_copy, tmp_path, how, fmt):
    """A symlink, a hard link, `sub/../results.db`, a relative path, a symlinked directory: the same file."""
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        out = tmp_path / "link.html"
        out.symlink_to(db_copy)
    elif how == "hardlink":
        out = tmp_path / "hard.html"
        os.link(db_copy, out)
    elif how == "dotdot":
        out = f"{tmp_path}/sub/../results.db"
    elif how == "relative":
        out = os.path.relpath(db_copy)
    else:
        (tmp_path / "alias").symlink_to(tmp_path)
        out = tmp_path / "alias" / "results.db"
    rows = stored_rows(db_copy)
    before = file_digest(db_copy)
    cli("report", "--db", db_copy, "--format", fmt, "-o", out).one_line_error(
        2, REFUSED.format(what="results database"))
    unchanged(db_copy, before, rows)


@pytest.mark.parametrize("companion", ["-wal", "-shm", "-journal"])
def test_report_output_is_a_database_companion(db_copy, companion):
    """The database's WAL, shared-memory or journal file is part of it: refused."""
    write(Path(f"{db_copy}{companion}"), b"")
    cli("report", "--db", db_copy, "-o", f"{db_copy}{companion}").one_line_error(
        2, REFUSED.format(what="results database"))
    assert Path(f"{db_copy}{companion}").read_bytes() == b""


def test_report_output_is_the_second_of_two_databases(db_copy, tmp_path):
    """`--db A --db B -o B`: B is an input too."""
    other = tmp_path / "other.db"
    shutil.copy(db_copy, other)
    rows = stored_rows(other)
    before = file_digest(other)
    cli("report", "--db", db_copy, "--db", other, "-o", other).one_line_error(
        2, REFUSED.format(what="results database"))
    unchanged(other, before, rows)


def test_run_html_is_the_database(tmp_path):
    """`run SPEC --db X --html X`: refused before a run; the stored runs stay."""
    db = stored_db(tmp_path)
    spec = tmp_path / "kept.toml"
    rows = stored_rows(db)
    before = file_digest(db)
    cli("run", spec, "--db", db, "--html", db).one_line_error(2, REFUSED.format(what="results database"))
    unchanged(db, before, rows)


@pytest.mark.parametrize("how", ["same", "symlink", "dotdot"])
def test_run_html_is_the_spec(tmp_path, how):
    """`run SPEC --html SPEC` (or a link to it): refused before a run; the spec keeps every byte; no database."""
    spec = write(tmp_path / "s.toml", two_sides(name="s"))
    (tmp_path / "sub").mkdir()
    out = {"same": spec, "symlink": tmp_path / "page.html", "dotdot": f"{tmp_path}/sub/../s.toml"}[how]
    if how == "symlink":
        out.symlink_to(spec)
    text = spec.read_bytes()
    cli("run", spec, "--db", tmp_path / "r.db", "--html", out).one_line_error(
        2, REFUSED.format(what="experiment spec"))
    assert spec.read_bytes() == text
    assert not (tmp_path / "r.db").exists()


def test_run_html_elsewhere_is_written(tmp_path):
    """The refusal is narrow: an ordinary --html path still gets its page."""
    spec = write(tmp_path / "s.toml", two_sides(name="s"))
    out = cli("run", spec, "--db", tmp_path / "r.db", "--html", tmp_path / "r.html", "--no-report")
    assert out.code == 0, out.err
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.fixture(scope="module")
def elves(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is installed by make test")
    d = tmp_path_factory.mktemp("elves")
    write(d / "a.c", "int f(int x) { return x * 3; }\nint main(int c, char **v) { return f(c); }\n")
    write(d / "b.c", "int f(int x) { return x + 1; }\nint main(int c, char **v) { return f(c); }\n")
    for n in ("a", "b"):
        subprocess.run(["gcc", "-O2", "-o", str(d / n), str(d / f"{n}.c")], check=True)
    return d


@pytest.mark.parametrize("which", ["OLD", "NEW"])
@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_size_output_is_an_elf_input(elves, tmp_path, which, fmt):
    """`size OLD NEW --format F -o OLD|NEW`: refused; both ELF files keep every byte."""
    a, b = shutil.copy(elves / "a", tmp_path / "a"), shutil.copy(elves / "b", tmp_path / "b")
    before = (Path(a).read_bytes(), Path(b).read_bytes())
    target = a if which == "OLD" else b
    cli("size", "--format", fmt, "-o", target, a, b).one_line_error(
        2, rf"^perfab size: output '.+' is the {which} file '.+'; writing it would destroy the input")
    assert (Path(a).read_bytes(), Path(b).read_bytes()) == before


def test_size_output_is_a_symlink_to_old(elves, tmp_path):
    a = shutil.copy(elves / "a", tmp_path / "a")
    link = tmp_path / "out.html"
    link.symlink_to(a)
    before = Path(a).read_bytes()
    cli("size", "--format", "html", "-o", link, a, elves / "b").one_line_error(2, r"is the OLD file")
    assert Path(a).read_bytes() == before


def test_report_replaces_its_target_by_rename(db_copy, tmp_path):
    """An existing report is replaced whole: a new inode, the old mode, no temporary file left."""
    out = write(tmp_path / "r.json", "old report\n")
    out.chmod(0o640)
    inode = out.stat().st_ino
    keep = tmp_path / "kept-link"
    os.link(out, keep)  # still holds the old report after the rename
    assert cli("report", "--db", db_copy, "--format", "json", "-o", out).code == 0
    assert out.stat().st_ino != inode and keep.read_text() == "old report\n"
    assert out.read_text().startswith("{") and oct(out.stat().st_mode & 0o777) == "0o640"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_report_through_a_symlink_writes_its_target(db_copy, tmp_path):
    """-o LINK where LINK points at an ordinary file: the file is replaced, the link stays a link."""
    real = write(tmp_path / "real.md", "old\n")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    assert cli("report", "--db", db_copy, "--format", "markdown", "-o", link).code == 0
    assert link.is_symlink() and real.read_text() != "old\n"


def test_report_to_a_directory_is_one_line(db_copy, tmp_path):
    (tmp_path / "d").mkdir()
    cli("report", "--db", db_copy, "-o", tmp_path / "d").one_line_error(2, r"it is a directory; give a file path$")


def test_report_to_dev_null(db_copy):
    """A device cannot be renamed over: it is written in place, and /dev/null survives."""
    assert cli("report", "--db", db_copy, "-o", "/dev/null").code == 0
    assert Path("/dev/null").is_char_device()
