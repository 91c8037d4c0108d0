"""Checks before a kernel is built, and the build cache's key, on Debian's real 6.1 tree.

These run ``make tinyconfig``/``olddefconfig`` at most (seconds each), never
a kernel build, so they run in every ``make test``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.kernel import source as ksource
from perfab.kernel.build import KernelBuildError, KernelRequest, build_kernel, check_kernel

SPINLOCK_C = "kernel/locking/spinlock.c"


def quiet(line: str) -> None:
    """A progress sink that drops everything."""


def one_line(err: Exception) -> str:
    text = str(err)
    assert "\n" not in text, text
    return text


def patch_file(tmp_path: Path, tree: Path, rel: str, find: str, replace: str, name: str) -> Path:
    """A unified diff of one real line of ``tree/rel``, made by diff(1) on a copy."""
    import subprocess

    a, b = tmp_path / name / "a", tmp_path / name / "b"
    for side in (a, b):
        (side / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / rel, side / rel)
    text = (b / rel).read_text()
    assert find in text
    (b / rel).write_text(text.replace(find, replace, 1))
    done = subprocess.run(["diff", "-u", f"a/{rel}", f"b/{rel}"], cwd=tmp_path / name, capture_output=True, text=True)
    out = tmp_path / f"{name}.patch"
    out.write_text(done.stdout)
    return out


def test_unknown_option_is_named_before_make(fresh_cache: Path):
    with pytest.raises(UsageError) as err:
        check_kernel(KernelRequest(options={"PARAVIRT_SPINLOCK": "y", "SMP": "y"}), fresh_cache, quiet)
    text = one_line(err.value)
    assert "PARAVIRT_SPINLOCK " in text and "does not exist in any Kconfig" in text
    assert "did you mean PARAVIRT_SPINLOCKS?" in text
    assert not (fresh_cache / "failed").exists() and not list((fresh_cache / "tmp").iterdir())


def test_dropped_and_changed_options_are_named_with_the_reason(fresh_cache: Path):
    request = KernelRequest(options={"PARAVIRT_SPINLOCKS": "y", "NR_CPUS": "100000", "SMP": "y"})
    with pytest.raises(UsageError) as err:
        check_kernel(request, fresh_cache, quiet)
    text = one_line(err.value)
    assert "PARAVIRT_SPINLOCKS=y was dropped by olddefconfig: it depends on" in text
    assert "PARAVIRT" in text.split("PARAVIRT_SPINLOCKS=y", 1)[1].split("not set")[0]
    assert "NR_CPUS=100000 became" in text and "range" in text
    assert "SMP=" not in text  # kept as asked
    assert not (fresh_cache / "kernels").exists()


def test_no_kernel_source_names_the_package_or_the_path(monkeypatch, tmp_path: Path):
    with pytest.raises(UsageError, match=r"no kernel source at .*nowhere"):
        check_kernel(KernelRequest(source=str(tmp_path / "nowhere")), tmp_path / "c", quiet)
    monkeypatch.setattr(ksource, "DEBIAN_TARBALL", tmp_path / "linux-source-6.1.tar.xz")
    with pytest.raises(UsageError) as err:
        check_kernel(KernelRequest(), tmp_path / "c", quiet)
    assert "apt-get install linux-source-6.1" in one_line(err.value)


def test_a_tree_that_is_not_a_kernel_or_was_configured_in_place(tmp_path: Path):
    (tmp_path / "t").mkdir()
    with pytest.raises(UsageError, match="is not a kernel source tree"):
        check_kernel(KernelRequest(source=str(tmp_path / "t")), tmp_path / "c", quiet)
    for name in ("Makefile", "Kconfig", ".config"):
        (tmp_path / "t" / name).write_text("\n")
    with pytest.raises(UsageError, match="make mrproper"):
        check_kernel(KernelRequest(source=str(tmp_path / "t")), tmp_path / "c", quiet)


def test_missing_base_config_and_bad_option_name(fresh_cache: Path):
    with pytest.raises(UsageError, match="neither tinyconfig nor defconfig nor a file"):
        check_kernel(KernelRequest(base="tinyconfg"), fresh_cache, quiet)
    with pytest.raises(UsageError, match="not a Kconfig symbol"):
        KernelRequest(options={"SMP y": "y"})


def test_patch_that_does_not_apply_names_the_first_failing_hunk(fresh_cache: Path, debian_tree: Path,
                                                               tmp_path: Path):
    good = patch_file(tmp_path, debian_tree, SPINLOCK_C, "#include <linux/linkage.h>",
                      "#include <linux/linkage.h>\n/* perfab test */", "good")
    text = good.read_text().replace("#include <linux/linkage.h>", "#include <linux/linkage_nope.h>")
    bad = tmp_path / "bad.patch"
    bad.write_text(text)
    with pytest.raises(UsageError) as err:
        check_kernel(KernelRequest(patches=[str(good), str(bad)]), fresh_cache, quiet)
    line = one_line(err.value)
    assert f"patch {bad} does not apply" in line and f"first failing hunk at {SPINLOCK_C}:" in line
    assert "perfab test" not in (debian_tree / SPINLOCK_C).read_text()  # the pristine tree is untouched
    with pytest.raises(UsageError, match="kernel patch .* not found"):
        check_kernel(KernelRequest(patches=[str(tmp_path / "absent.patch")]), fresh_cache, quiet)


def test_key_is_stable_and_changes_with_options_patches_and_compiler(shared_cache: Path, fresh_cache: Path,
                                                                    tmp_path_factory, debian_tree: Path,
                                                                    tmp_path: Path):
    base = check_kernel(KernelRequest(), fresh_cache, quiet)
    other = tmp_path_factory.mktemp("kcache2")
    (other / "sources").symlink_to(shared_cache / "sources")
    assert check_kernel(KernelRequest(), other, quiet).key == base.key  # resolved again from scratch: same key
    assert check_kernel(KernelRequest(jobs=1), fresh_cache, quiet).key == base.key  # -j is not part of it
    keys = {"base": base.key}
    keys["option"] = check_kernel(KernelRequest(options={"NR_CPUS": "4"}), fresh_cache, quiet).key
    patch = patch_file(tmp_path, debian_tree, SPINLOCK_C, "#include <linux/linkage.h>",
                       "#include <linux/linkage.h>\n/* perfab test */", "comment")
    keys["patch"] = check_kernel(KernelRequest(patches=[str(patch)]), fresh_cache, quiet).key
    assert "perfab test" not in (debian_tree / SPINLOCK_C).read_text()
    if shutil.which("clang"):
        keys["compiler"] = check_kernel(KernelRequest(cc="clang"), fresh_cache, quiet).key
    assert len(set(keys.values())) == len(keys), keys
    assert not list((fresh_cache / "tmp").iterdir())  # scratch directories are gone


def test_build_failure_quotes_the_first_error_and_keeps_the_log(fresh_cache: Path, debian_tree: Path,
                                                                tmp_path: Path):
    broken = patch_file(tmp_path, debian_tree, "arch/x86/tools/relocs_common.c", '#include "relocs.h"',
                        '#include "relocs.h"\n#error perfab test: broken on purpose', "broken")
    with pytest.raises(KernelBuildError) as err:
        build_kernel(KernelRequest(patches=[str(broken)], jobs=2), fresh_cache, quiet)
    line = one_line(err.value)
    assert "kernel build failed:" in line and "error: #error perfab test: broken on purpose" in line
    log = Path(line.split("full log: ")[1].split(";")[0])
    assert log.is_file() and log.is_relative_to(fresh_cache / "failed")
    assert "broken on purpose" in log.read_text()
    assert not (fresh_cache / "kernels").exists()
