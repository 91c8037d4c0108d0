"""What boots as the unit lean on besides the analysis: saved guests that heal, and scratch folders whose owners
hold a lock (a perfab in another PID namespace cannot sweep a live session's guest away)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("damage", ["meta", "directory"])
def test_a_damaged_saved_guest_is_dropped_and_saved_again_with_a_note(tmp_path, damage):
    """A saved guest whose meta file is not its JSON, or a directory where its state belongs, is never restored:
    the boot drops it, boots to the point and saves it again, and the run's note names the saved guest."""
    from perfab.kernel.snapshot import Guide, Saved

    found = Saved.at(tmp_path, "ab" * 12)
    found.state.parent.mkdir(parents=True)
    if damage == "meta":
        found.state.write_bytes(b"QEVM")
        found.meta.write_text("{not json")
    else:
        found.state.mkdir()
        found.meta.write_text('{"address": 1, "size": 2}')
    guide = Guide(tmp_path, found, b"request")
    assert not guide.restore and guide.start == "booted"
    assert f"saved guest {found.key[:12]} was damaged" in guide.note and not found.state.exists()
    guide.close()
    healthy = Saved.at(tmp_path, "cd" * 12)
    healthy.state.write_bytes(b"QEVM")
    healthy.meta.write_text('{"address": 4096, "size": 65536}')
    assert Guide(tmp_path, healthy, b"request").restore  # a usable one is restored


def test_a_sweep_leaves_a_folder_whose_owner_holds_its_lock_whatever_its_name_says(tmp_path):
    """A perfab in another PID namespace sharing the temporary directory names its folder by a pid that means
    nothing here (no process, or another one): its owner lock, held while it lives, keeps a sweep off it; a
    folder whose lock is free and whose named owner is gone is removed."""
    import subprocess
    import sys

    from perfab import scratch

    alive = tmp_path / "perfab-boot-999999-12345-live"  # a pid no process here has
    dead = tmp_path / "perfab-boot-999998-12345-dead"
    for folder in (alive, dead):
        folder.mkdir()
        (folder / scratch.LOCK_FILE).write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; "
                               f"fd = os.open({str(alive / scratch.LOCK_FILE)!r}, os.O_RDWR); "
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert scratch.sweep(str(tmp_path)) == [dead]
        assert alive.is_dir() and not dead.exists()
    finally:
        holder.kill()
        holder.wait()
    assert scratch.sweep(str(tmp_path)) == [alive]  # its owner gone: the lock is free


def test_a_folder_this_process_makes_holds_its_owner_lock_until_released(tmp_path, monkeypatch):
    from perfab import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with scratch.owned("run") as folder:
        assert scratch._owner_gone(folder) is False  # held (flock locks of two descriptors conflict)
        assert scratch.sweep(str(tmp_path)) == []
    assert not folder.exists() and str(folder) not in scratch._HELD


def test_prune_keeps_the_newest_and_every_recently_used_saved_guest(tmp_path):
    """Two sessions side by side share the cache: one's prune must not push out the other's boots, used within
    the last two hours, whatever the number it keeps; older ones beyond it go."""
    import os
    import time

    from perfab.kernel.snapshot import RECENT_S, prune

    now = time.time()
    ages = {"new1": 10, "new2": 20, "recent": RECENT_S - 60, "old1": RECENT_S + 60, "old2": RECENT_S + 120}
    for name, age in ages.items():
        for suffix in (".state", ".json"):
            path = tmp_path / f"{name}{suffix}"
            path.write_text("x")
            os.utime(path, (now - age, now - age))
    prune(tmp_path, keep=2, now=now)
    assert sorted(p.stem for p in tmp_path.glob("*.state")) == ["new1", "new2", "recent"]
    assert not (tmp_path / "old1.json").exists()
