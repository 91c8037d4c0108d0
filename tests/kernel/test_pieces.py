"""The guest engine's parts that need no boot: archive, result framing, /proc parsing, symbols."""

from __future__ import annotations

import glob
import shutil
import subprocess
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.kernel import guestresult, initramfs, qemu, tcg

DATA = Path(__file__).resolve().parents[1] / "data" / "guest-proc"


def test_the_archive_lists_with_cpio_and_holds_the_workload_and_its_libraries(tmp_path):
    if not shutil.which("cpio") or not initramfs.BUSYBOX.exists():
        pytest.skip("needs cpio and busybox-static")
    true = shutil.which("true")
    w = initramfs.Workload(argv=(true, "x"), cwd="/work/here", env=(("A", "1"),))
    image = initramfs.build(w, tmp_path)
    names = subprocess.run(["cpio", "-t"], stdin=image.open("rb"), capture_output=True,
                           text=True, check=True).stdout.split()
    assert {"init", "bin/busybox", "bin/sh", ".perfab/bin/perfab-guestrun", ".perfab/req/argv",
            "work/here", true.lstrip("/")} <= set(names)
    assert any(n.endswith("libc.so.6") for n in names)  # true is dynamic: its libraries come along
    assert initramfs.build(w, tmp_path) == image  # same content, same cached file
    out = subprocess.run(["cpio", "-i", "--to-stdout", ".perfab/req/argv"], stdin=image.open("rb"),
                         capture_output=True, check=True).stdout
    assert out == true.encode() + b"\0x\0"


def test_a_missing_guest_file_is_one_line(tmp_path):
    w = initramfs.Workload(argv=("true",), files=("/nonexistent/file",))
    with pytest.raises(UsageError, match="does not exist on the host"):
        initramfs.build(w, tmp_path)


def test_result_sections_survive_binary_payloads_and_a_cut():
    payload = b"a\r\nPERFAB-SECTION fake 3\n\0\xff"
    blob = ((b"PERFAB-SECTION stdout %d\n" % len(payload)) + payload
            + b"\nPERFAB-SECTION status 9\nstatus 0\n\nPERFAB-END\n")
    s = guestresult.parse_sections(blob)
    assert s["stdout"] == payload and s["status"] == b"status 0\n" and "end" in s
    cut = guestresult.parse_sections(blob[:40])
    assert "end" not in cut and "stdout" not in cut


def test_interrupt_and_vmstat_deltas_from_a_real_guest():
    d = guestresult.interrupt_deltas((DATA / "interrupts.before").read_bytes(),
                                     (DATA / "interrupts.after").read_bytes())
    assert set(d) >= {"irq.LOC", "irq.CAL", "irq.TLB", "irq.RES"}
    assert d["irq.LOC"] > 0 and all(v >= 0 for v in d.values())
    v = guestresult.vmstat_deltas((DATA / "vmstat.before").read_bytes(), (DATA / "vmstat.after").read_bytes())
    assert v["vmstat.pgfault"] > 0 and "vmstat.nr_free_pages" in v


def test_symbolize_charges_each_block_to_the_symbol_below_it():
    syms = [(0xFFFFFFFF81000000, "_stext"), (0xFFFFFFFF81000100, "a"), (0xFFFFFFFF81000200, "b")]
    w = tcg.Window(index=1, vcpus=1, insns_user=0, insns_kernel=60,
                   kernel_tbs=((0xFFFFFFFF81000100, 10, 1), (0xFFFFFFFF81000180, 20, 0),
                               (0xFFFFFFFF81000200, 25, 5), (0xFFFFFFFF80000000, 5, 0)))
    by_insns, by_misses = tcg.symbolize(syms, w)
    assert [(s.name, s.insns) for s in by_insns] == [("a", 30), ("b", 25), ("[unknown]", 5)]
    assert [(s.name, s.l1i_misses) for s in by_misses] == [("b", 5), ("a", 1)]


def test_symbols_parse_text_only_and_sorted():
    text = ("ffffffff81000200 T b\nffffffff81000100 t a [mod]\nffffffff82000000 D data\n"
            "ffffffff81000300 W weak\n")
    assert tcg.parse_symbols(text) == [(0xFFFFFFFF81000100, "a"), (0xFFFFFFFF81000200, "b"),
                                       (0xFFFFFFFF81000300, "weak")]


def test_debians_placeholder_system_map_is_named_as_such():
    maps = sorted(glob.glob("/boot/System.map-*"))
    if not maps or "-dbg" not in Path(maps[-1]).read_text():
        pytest.skip("no Debian placeholder System.map in /boot")
    with pytest.raises(UsageError, match="placeholder"):
        tcg.load_symbols(maps[-1])


def test_bad_cache_geometry_is_refused_before_booting():
    kernel = __file__  # any existing file: the check comes first
    for bad in ("32K:8:64", "32768:8:48", "3000:1:64"):
        req = qemu.BootRequest(kernel=kernel, argv=("true",), plugin=qemu.PluginOptions(l1i=bad))
        with pytest.raises(UsageError, match="SIZE:ASSOC:LINE"):
            qemu._check(req)


def test_the_plugin_refuses_a_bad_argument(tmp_path):
    """QEMU itself loads the plugin and stops when its install function refuses."""
    kernels = sorted(glob.glob("/boot/vmlinuz-*"))
    if not kernels or not shutil.which(qemu.QEMU):
        pytest.skip("needs qemu-system-x86 and a kernel")
    so = qemu.plugin_path(tmp_path)
    proc = subprocess.run([qemu.QEMU, "-display", "none", "-nodefaults", "-accel", "tcg",
                           "-kernel", kernels[-1], "-plugin", f"file={so},out={tmp_path / 'o'},l1i=1:2:3"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "perfab_tcg: bad argument" in proc.stderr and "l1i=1:2:3" in proc.stderr


def test_a_guest_setup_error_is_the_failure_with_the_end_of_the_services_log():
    sections = {"error": b"the service exited (status 1) before it accepted connections on 127.0.0.1:80\n",
                "service.log": b"nginx: [emerg] bind() failed\n\nnginx: [emerg] open() \"/x.conf\" failed\n\n",
                "status": b"", "end": b""}
    why = guestresult.failure(sections, None, "", 0, False, 60, "")
    assert why == ('the service exited (status 1) before it accepted connections on 127.0.0.1:80; the service\'s '
                   'log ends: nginx: [emerg] open() "/x.conf" failed')
    assert guestresult.failure({**sections, "service.log": b""}, None, "", 0, False, 60, "").endswith(":80")


def test_the_launchers_service_section_reads_before_and_after():
    blob = b"before user_s 0.01 sys_s 0.00 run_ns 2030 syscr 25 syscw 1 procs 2\n" \
           b"after user_s 0.02 sys_s 0.01 run_ns 5030 syscr 30 syscw 201 procs 2\ngarbage line\n"
    got = guestresult.parse_service(blob)
    assert got["before"]["run_ns"] == 2030 and got["after"]["syscw"] == 201 and set(got) == {"before", "after"}


def test_kernel_data_lines_are_named_by_symbol_and_other_lines_by_address():
    data = tcg.data_symbols("ffffffff82000000 D jiffies_64\nffffffff82000100 b tasklist_lock\n"
                            "ffffffff81000000 T _text\n0000000000012000 D fixed_percpu_data\n")
    assert data == [(0xFFFFFFFF82000000, "jiffies_64"), (0xFFFFFFFF82000100, "tasklist_lock")]

    def line(vaddr: int) -> tcg.DataLine:
        return tcg.DataLine(vaddr=vaddr, paddr=0, hitm=1, invalidations=0, vcpus=(0, 1))
    lines = (line(0xFFFFFFFF82000140), line(0xFFFFFFFF82000000), line(0x4BB380), line(0xFFFF888001234000),
             line(0xFFFFFFFFC0001000))
    assert [name for name, _ in tcg.name_lines(data, lines)] == [
        "tasklist_lock+0x40", "jiffies_64+0x0", "0x4bb380", "0xffff888001234000", "0xffffffffc0001000"]
    assert [name for name, _ in tcg.name_lines([], lines[:1])] == ["0xffffffff82000140"]


def test_model_counts_are_charged_to_the_symbol_below_each_block():
    syms = [(0xFFFFFFFF81000100, "a"), (0xFFFFFFFF81000200, "b")]
    w = tcg.Window(index=1, vcpus=2, insns_user=0, insns_kernel=0,
                   branches=tcg.Branches(0, 0, 0, 0, 30, 6, 2, 2, 0),
                   kernel_tb_branches=((0xFFFFFFFF81000100, 10, 1, 0, 0), (0xFFFFFFFF81000180, 10, 1, 2, 2),
                                       (0xFFFFFFFF81000200, 10, 4, 0, 0)),
                   coherence=tcg.Coherence(0, 5, 0, 7),
                   kernel_tb_coherence=((0xFFFFFFFF81000210, 1, 7), (0xFFFFFFFF81000110, 4, 0)))
    events = tcg.symbolize_events(syms, w)
    assert [(s.name, s.counts) for s in events["by_branch_misses"]] == [("a", (20, 2, 2, 2)), ("b", (10, 4, 0, 0))]
    assert [(s.name, s.counts) for s in events["by_hitm"]] == [("a", (4, 0)), ("b", (1, 7))]
    assert tcg.symbolize_events(syms, tcg.Window(index=1, vcpus=1, insns_user=0, insns_kernel=0)) == {}
