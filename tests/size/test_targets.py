"""Two files built for different targets: machine is a warning, class and byte order a refusal.

The objects are real: one C file compiled by clang for several targets
(``--target=...``, objects only, so no cross libc is needed).
"""

from __future__ import annotations

import io
import json
import shutil

import pytest
from size_helpers import compile_c

from perfab.cli import main

SOURCE = "int table[8];\nint scale(int x) { return x * 3 + table[x & 7]; }\n"
TARGETS = {
    "x86-64": "x86_64-linux-gnu",
    "x32": "x86_64-linux-gnux32",  # ELF32, e_machine x86-64
    "aarch64": "aarch64-linux-gnu",
    "aarch64_be": "aarch64_be-linux-gnu",
}


@pytest.fixture(scope="module")
def obj(tmp_path_factory):
    if shutil.which("clang") is None:
        pytest.skip("clang is not installed (it cross-compiles the objects)")
    root = tmp_path_factory.mktemp("targets")
    (root / "t.c").write_text(SOURCE)
    return {name: compile_c(root / f"{name}.o", f"--target={t}", "-O2", "-c", str(root / "t.c"), cc="clang")
            for name, t in TARGETS.items()}


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["size", *map(str, argv)], out, err)
    return code, out.getvalue(), err.getvalue()


def test_machine_mismatch_is_one_warning_on_stderr_and_atop_the_report(obj):
    old, new = obj["x86-64"], obj["aarch64"]
    code, out, err = run(old, new)
    assert code == 0
    assert err == (
        f"perfab size: warning: {old} is ELF64 little-endian x86-64 (e_machine 62) and {new} is ELF64 little-endian "
        "AArch64 (e_machine 183): different machine: each function row compares code built for different targets; "
        "only the totals are comparable\n"
    )
    assert out.startswith(f"WARNING: {old} is ELF64 little-endian x86-64") and "scale" in out
    _, md, _ = run("--format", "markdown", old, new)
    assert md.splitlines()[2].startswith("> **Warning:** ") and "different machine" in md.splitlines()[2]
    _, doc, _ = run("--format", "json", old, new)
    assert "AArch64" in json.loads(doc)["mismatch"]


@pytest.mark.parametrize("old,new,what", [("x86-64", "x32", "class"), ("aarch64", "aarch64_be", "byte order")])
def test_class_or_byte_order_mismatch_is_refused_unless_allowed(obj, old, new, what):
    code, out, err = run(obj[old], obj[new])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"perfab size: {obj[old]} is ELF") and f": different {what}: " in err
    assert err.endswith("give two builds for the same target, or pass --allow-mismatch to diff them anyway\n")
    code, out, err = run("--allow-mismatch", obj[old], obj[new])
    assert code == 0 and err.startswith("perfab size: warning: ") and err.count("\n") == 1
    assert out.startswith("WARNING: ") and f"different {what}" in out.splitlines()[0]


def test_compat_keeps_bloat_o_meter_output_and_warns_on_stderr(obj):
    code, out, err = run("--compat", obj["x86-64"], obj["aarch64"])
    assert code == 0 and out.startswith("add/remove: ") and "WARNING" not in out
    assert err.startswith("perfab size: warning: ") and err.count("\n") == 1


def test_same_target_has_no_warning(obj):
    code, out, err = run(obj["aarch64"], obj["aarch64"])
    assert code == 0 and err == "" and not out.startswith("WARNING")
