"""``[measure] size = true``: each kernel side's vmlinux diffed against the baseline's once, stored with the
session, and printed by every report format; a side booting a prebuilt image is refused before anything runs.

The two "vmlinux" are prog.c built twice by gcc with DWARF (size_helpers.py): ELF files whose functions change
in known ways, as a kernel's do between two builds; the session is a real one of the time backend, whose stored
sources then carry the entry the guest backend writes.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from perfab.cli import main
from perfab.kernel.sides import KernelImage
from perfab.kernel.sizes import ROWS, side_sizes
from perfab.size.diff import diff_files
from perfab.size.report import format_text

SPEC = """\
[experiment]
name = "sized"
runs = 2
warmup = 0

[[variant]]
name = "outline"

[[variant]]
name = "inlined"

[[workload]]
name = "true"
argv = ["/bin/true"]
"""


def _cli(*argv, cwd: Path) -> tuple[int, str, str]:
    import os

    out, err, old = io.StringIO(), io.StringIO(), Path.cwd()
    os.chdir(cwd)
    try:
        code = main([str(a) for a in argv], out, err)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


def _kernels(old: Path, new: Path) -> dict[str, KernelImage]:
    return {"outline": KernelImage(old, None, "old", vmlinux=old),
            "inlined": KernelImage(new, None, "new", vmlinux=new)}


def test_every_side_but_the_baseline_is_diffed_against_it(pair):
    old, new = pair()
    said: list[str] = []
    sizes = side_sizes(_kernels(old, new), "outline", said.append)
    assert list(sizes) == ["inlined"] and said == ["size: inlined's vmlinux against outline's (perfab size)"]
    entry = sizes["inlined"]["size"]
    diff = diff_files(old, new)
    assert entry["text"] == format_text(diff, ROWS) and "inlined into" in entry["text"]  # DWARF causes
    assert entry["totals"]["text"] == {"old_bytes": diff.kind_totals()["text"][0],
                                       "new_bytes": diff.kind_totals()["text"][1]}
    assert side_sizes(_kernels(old, new), "absent", said.append) == {}  # no baseline image: nothing to diff


def test_the_stored_table_is_in_every_report_format(pair, tmp_path):
    old, new = pair()
    (tmp_path / "s.toml").write_text(SPEC)
    code, _, err = _cli("run", "s.toml", "--db", "s.db", "--no-report", cwd=tmp_path)
    assert code == 0, err
    entry = side_sizes(_kernels(old, new), "outline", lambda line: None)
    with sqlite3.connect(tmp_path / "s.db") as db:  # what the guest backend stores with a new session
        db.execute("UPDATE sessions SET sources_json = ?", (json.dumps(entry),))
    table = entry["inlined"]["size"]["text"].splitlines()
    code, text, err = _cli("report", "sized", "--db", "s.db", cwd=tmp_path)
    assert code == 0, err
    assert "SIZE: inlined's vmlinux against outline's" in text and f"perfab size {old} {new}" in text
    assert "\n".join(table) in text  # the table as perfab size prints it, not wrapped
    for fmt, heading in (("markdown", "### size: inlined's vmlinux against outline's"),
                         ("html", "Size: inlined's vmlinux against outline's")):
        code, out, err = _cli("report", "sized", "--db", "s.db", "--format", fmt, cwd=tmp_path)
        assert code == 0 and heading in out, (fmt, err, out[:400])
        assert table[1].split()[0] in out  # the first function row
    code, out, _ = _cli("report", "sized", "--db", "s.db", "--format", "json", cwd=tmp_path)
    assert json.loads(out)["sources"]["inlined"]["size"]["text"] == entry["inlined"]["size"]["text"]


def test_a_prebuilt_image_with_size_is_refused_in_plan(tmp_path):
    image = next(Path("/boot").glob("vmlinuz-*"), None)
    spec = SPEC.replace("[[workload]]", "[[workload]]", 1).replace(
        '[[variant]]\nname = "outline"\n',
        f'[measure]\nbackend = "guest"\naccel = "tcg"\nsize = true\n\n[[variant]]\nname = "outline"\n'
        f'[variant.kernel]\nimage = "{image}"\n')
    spec = spec.replace('name = "inlined"\n', 'name = "inlined"\n[variant.kernel]\nbase = "tinyconfig"\n')
    (tmp_path / "g.toml").write_text(spec)
    code, out, err = _cli("plan", "g.toml", cwd=tmp_path)
    assert code == 2 and "measure.size" in err and "'outline' boots a prebuilt image" in err, (out, err)
    assert len(err.strip().splitlines()) == 1
