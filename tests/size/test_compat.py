"""``--compat`` against the kernel's real scripts/bloat-o-meter, byte for byte.

The script is not part of this repository.  It is looked up as
``$PERFAB_BLOAT_O_METER``, then ``bloat-o-meter`` on PATH, then a cached
copy; failing those it is extracted from Debian's ``linux-source-6.1``
package (``apt-get download``, about 140 MB, once per machine) into
``~/.cache/perfab/bloat-o-meter``.  The tests skip, saying why, only when
none of that works.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from size_helpers import SRC, compile_c, size_main


CACHE = Path.home() / ".cache" / "perfab" / "bloat-o-meter"


def _from_debian(dest: Path) -> str | None:
    """Extract scripts/bloat-o-meter from linux-source-6.1; None on success, else why not."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return "apt-get/dpkg-deb not available to fetch linux-source-6.1"
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(["apt-get", "download", "linux-source-6.1"], cwd=tmp, capture_output=True, text=True)
        if got.returncode != 0:  # a fresh machine has no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
            got = subprocess.run(["apt-get", "download", "linux-source-6.1"], cwd=tmp, capture_output=True,
                                 text=True)
        debs = list(Path(tmp).glob("linux-source-6.1_*.deb"))
        if got.returncode != 0 or not debs:
            return f"apt-get download linux-source-6.1 failed: {got.stderr.strip()[-200:]}"
        script = (
            f"dpkg-deb --fsys-tarfile {debs[0]} | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' "
            f"| tar -xJO --wildcards '*/scripts/bloat-o-meter'"
        )
        out = subprocess.run(["sh", "-c", script], capture_output=True)
        if out.returncode != 0 or b"bloat-o-meter" not in out.stdout[:2000] and b"nm" not in out.stdout:
            return f"could not extract scripts/bloat-o-meter: {out.stderr.decode()[-200:]}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(out.stdout)
        dest.chmod(0o755)
    return None


@pytest.fixture(scope="session")
def bloat_o_meter() -> str:
    """Path of the real script, or skip with the reason it could not be had."""
    for candidate in (os.environ.get("PERFAB_BLOAT_O_METER"), shutil.which("bloat-o-meter"), str(CACHE)):
        if candidate and Path(candidate).is_file():
            return candidate
    why = _from_debian(CACHE)
    if why:
        pytest.skip(f"scripts/bloat-o-meter unavailable ({why}); set PERFAB_BLOAT_O_METER to a copy")
    return str(CACHE)


def run_bloat_o_meter(script: str, *args) -> str:
    return subprocess.run(["python3", script, *map(str, args)], capture_output=True, text=True, check=True).stdout


def run_compat(*args) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert size_main(["--compat", *map(str, args)], out, err) == 0, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("flags", [[], ["-c"], ["-d"], ["-t"]])
@pytest.mark.parametrize("opt", ["-O2", "-Os"])
def test_compat_matches_bloat_o_meter_on_linked_pair(bloat_o_meter, pair, opt, flags):
    old, new = pair("gcc", opt)
    expected = run_bloat_o_meter(bloat_o_meter, *flags, old, new)
    assert "add/remove:" in expected and "Total: Before=" in expected
    assert run_compat(*flags, old, new) == expected


def test_compat_matches_on_relocatable_objects(bloat_o_meter, tmp_path):
    sections = ("-ffunction-sections", "-fdata-sections")
    old = compile_c(tmp_path / "old.o", "-O2", "-g", "-c", "-DOLD", *sections, str(SRC / "prog.c"))
    new = compile_c(tmp_path / "new.o", "-O2", "-g", "-c", *sections, str(SRC / "prog.c"))
    for flags in ([], ["-c"]):
        assert run_compat(*flags, old, new) == run_bloat_o_meter(bloat_o_meter, *flags, old, new)


def test_compat_matches_in_the_other_direction_and_on_itself(bloat_o_meter, pair):
    old, new = pair("gcc", "-O2")
    assert run_compat(new, old) == run_bloat_o_meter(bloat_o_meter, new, old)
    same = run_compat(old, old)
    assert same == run_bloat_o_meter(bloat_o_meter, old, old)
    assert same.startswith("add/remove: 0/0 grow/shrink: 0/0 up/down: 0/0 (0)\n")


def test_header_and_total_lines_print_like_seed_001():
    """The numbers quoted in the x86 asm_inline() changelog (seeds/001), printed back."""
    from perfab.size.compat import SymbolTable, header_line, total_line

    t = SymbolTable("Function", 82, 283, 870, 372, 76272, 43618, (), 22770320, 22802974)
    assert header_line(t) == "add/remove: 82/283 grow/shrink: 870/372 up/down: 76272/-43618 (32654)"
    assert total_line(t.old_total_bytes, t.new_total_bytes) == "Total: Before=22770320, After=22802974, chg +0.14%"
    assert total_line(23838694, 23977159) == "Total: Before=23838694, After=23977159, chg +0.58%"  # seed 000


def _quick_reader():
    native = pytest.importorskip("perfab_native")
    if not hasattr(native, "nm_diff"):
        pytest.skip("the installed perfab_native predates nm_diff; rebuild it with `make native`")


@pytest.mark.parametrize("mode", ["all", "text", "data+rodata", "categories"])
def test_the_compiled_reader_prints_what_the_numpy_reader_prints(pair, tmp_path, mode):
    """Two readers of .symtab, one text: the compiled one is only faster."""
    from perfab.size.bloat import format_compat
    from perfab.size.diff import diff_files
    from perfab.size.quick import compat_text

    _quick_reader()
    old, new = pair("gcc", "-O2")
    rel_old = compile_c(tmp_path / "old.o", "-O2", "-c", "-DOLD", "-fdata-sections", str(SRC / "prog.c"))
    rel_new = compile_c(tmp_path / "new.o", "-O2", "-c", str(SRC / "prog.c"))
    for a, b in ((old, new), (new, old), (rel_old, rel_new)):
        quick = compat_text(str(a), str(b), mode)
        assert quick is not None, "the compiled reader declined a readable pair"
        assert quick[0] == format_compat(list(diff_files(a, b, compat=True, mode=mode).tables))
        assert quick[1] is None


def test_the_compiled_reader_leaves_what_it_cannot_read_to_the_numpy_reader(pair, tmp_path):
    """A truncated file, a FIFO, a missing file: None, so `perfab size` names the cause as before."""
    from perfab.size.quick import compat_text

    _quick_reader()
    old, _ = pair("gcc", "-O2")
    cut = tmp_path / "cut"
    cut.write_bytes(Path(old).read_bytes()[:3000])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad in (cut, fifo, tmp_path / "missing"):
        assert compat_text(str(old), str(bad)) is None
        out, err = io.StringIO(), io.StringIO()
        assert size_main(["--compat", str(old), str(bad)], out, err) == 2
        assert err.getvalue().count("\n") == 1 and str(bad) in err.getvalue()
