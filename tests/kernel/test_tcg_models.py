"""The TCG plugin's models without QEMU: x86 branch decoding, the predictor and MESI, on known inputs.

A small C driver, compiled here against native/tcg's sources, feeds each
part known byte sequences or access sequences and prints what came out; the
assertions are the answers worked out by hand from the x86 encodings,
cachegrind's predictor and the MESI rules (see each source's header).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from perfab.kernel import qemu

pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")

DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "x86_branch.h"
#include "predictor.h"
#include "coherence.h"

static size_t bytes(const char *hex, unsigned char *b, size_t cap)
{
    size_t n = 0;
    for (const char *p = hex; *p && n < cap; p += 2) {
        while (*p == ' ')
            p++;
        sscanf(p, "%2hhx", &b[n++]);
    }
    return n;
}

static void decode(const char *name, const char *hex)
{
    unsigned char b[16];
    size_t n = bytes(hex, b, sizeof b);
    struct branch_info bi;
    x86_classify(b, n, 0x1000, &bi);
    printf("decode %s %d %#llx %#llx\n", name, bi.kind, (unsigned long long)bi.target,
           (unsigned long long)bi.fallthrough);
}

static void flushes(const char *name, const char *hex)
{
    unsigned char b[16];
    size_t n = bytes(hex, b, sizeof b);
    printf("flush %s %d\n", name, x86_flushes_tlb(b, n));
}

static struct predictor pred;

static void conditional(const char *name, int n, int (*taken)(int))
{
    int missed = 0;
    predictor_reset(&pred);
    for (int i = 0; i < n; i++)
        missed += predict_conditional(&pred, 0x401000, taken(i));
    printf("cond %s %d\n", name, missed);
}

static int always(int i) { (void)i; return 1; }
static int never(int i) { (void)i; return 0; }
static int alternate(int i) { return i & 1; }
static int every_fourth(int i) { return (i & 3) == 3; }

static void indirect(const char *name, int n, int period)
{
    int missed = 0;
    predictor_reset(&pred);
    for (int i = 0; i < n; i++)
        missed += predict_indirect(&pred, 0x402000, 0x403000 + 0x100 * (uint64_t)(i % period));
    printf("ind %s %d\n", name, missed);
}

static struct coherence coh;
static int hitm, inval, miss;

static void access(int cpu, uint64_t line, int write)
{
    struct coh_result r;
    coherence_access(&coh, cpu, line, write, &r);
    hitm += r.hitm;
    inval += r.invalidated;
    miss += r.miss;
}

static void report(const char *name)
{
    printf("coh %s %d %d %d %d %d\n", name, hitm, inval, miss, coherence_state(&coh, 0, 5),
           coherence_state(&coh, 1, 5));
    coherence_reset(&coh);
    hitm = inval = miss = 0;
}

int main(void)
{
    decode("jz8", "74 05");
    decode("jnz32", "0f 85 10 00 00 00");
    decode("jl8_back", "7c fe");
    decode("hinted_jz", "2e 74 02");
    decode("jrcxz", "e3 fe");
    decode("loop", "e2 f0");
    decode("call_rax", "ff d0");
    decode("jmp_r11", "41 ff e3");
    decode("call_rip", "ff 15 00 10 00 00");
    decode("jmp_table", "ff 24 c5 00 00 00 00");
    decode("notrack_jmp", "3e ff e0");
    decode("rep_movsb", "f3 a4");
    decode("rep_stosq", "f3 48 ab");
    decode("repne_scasb", "f2 ae");
    decode("movsb", "a4");
    decode("ret", "c3");
    decode("repz_ret", "f3 c3");
    decode("call_rel", "e8 00 00 00 00");
    decode("jmp_rel8", "eb fe");
    decode("jmp_rel32", "e9 00 01 00 00");
    decode("inc_mem", "ff 00");
    decode("call_far", "ff 1d 00 00 00 00");
    decode("pause", "f3 90");
    decode("syscall", "0f 05");
    decode("iretq", "48 cf");
    decode("nopw", "66 0f 1f 44 00 00");
    decode("cut_jnz32", "0f 85 10");
    decode("cut_jz8", "74");
    flushes("mov_cr3", "0f 22 d8");
    flushes("mov_cr4", "0f 22 e7");
    flushes("mov_cr0", "0f 22 c0");
    flushes("read_cr3", "0f 20 d8");
    flushes("invlpg", "0f 01 3f");
    flushes("swapgs", "0f 01 f8");
    flushes("rdtscp", "0f 01 f9");
    flushes("invpcid", "66 0f 38 82 08");
    flushes("movbe", "0f 38 f0 07");

    conditional("always", 100, always);
    conditional("never", 100, never);
    conditional("alternate", 1000, alternate);
    conditional("every_fourth", 1000, every_fourth);
    indirect("same", 100, 1);
    indirect("alternate", 100, 2);

    coherence_init(&coh, 2, 64, 8);
    for (int i = 0; i < 10; i++)
        access(i & 1, 5, 1);
    report("pingpong_writes");
    access(0, 5, 0); access(1, 5, 0); access(0, 5, 1); access(1, 5, 0);
    report("read_read_upgrade_read");
    access(0, 5, 0); access(0, 5, 1);
    report("exclusive_then_write");
    access(0, 5, 0); access(1, 5, 0);
    report("both_read");
    access(0, 5, 1);
    for (int i = 1; i <= 8; i++)
        access(0, 5 + 64 * (uint64_t)i, 0);
    access(1, 5, 1);
    report("evicted_then_written");
    for (int i = 0; i < 10; i++)
        access(i & 1, 5 + (uint64_t)(i & 1), 1);
    report("padded_writes");
    return 0;
}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list[str]]:
    d = tmp_path_factory.mktemp("tcgmodels")
    (d / "driver.c").write_text(DRIVER)
    src = qemu.PLUGIN_DIR
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-I", str(src), "-o", str(d / "driver"), str(d / "driver.c"),
                    str(src / "x86_branch.c"), str(src / "predictor.c"), str(src / "coherence.c")], check=True)
    out = subprocess.run([str(d / "driver")], capture_output=True, text=True, check=True).stdout
    return {f"{kind} {name}": rest for kind, name, *rest in (line.split() for line in out.splitlines())}


NONE, COND, REP, IND = "0", "1", "2", "3"


@pytest.mark.parametrize("name, kind, target, fallthrough", [
    ("jz8", COND, "0x1007", "0x1002"),
    ("jnz32", COND, "0x1016", "0x1006"),
    ("jl8_back", COND, "0x1000", "0x1002"),
    ("hinted_jz", COND, "0x1005", "0x1003"),
    ("jrcxz", COND, "0x1000", "0x1002"),
    ("loop", COND, "0xff2", "0x1002"),
    ("rep_movsb", REP, "0x1000", "0x1002"),
    ("rep_stosq", REP, "0x1000", "0x1003"),
    ("repne_scasb", REP, "0x1000", "0x1002"),
])
def test_conditional_branches_and_rep_iterations_decode_with_their_targets(results, name, kind, target, fallthrough):
    assert results[f"decode {name}"] == [kind, target, fallthrough]


@pytest.mark.parametrize("name", ["call_rax", "jmp_r11", "call_rip", "jmp_table", "notrack_jmp"])
def test_indirect_calls_and_jumps_are_indirect_branches(results, name):
    assert results[f"decode {name}"][0] == IND


@pytest.mark.parametrize("name", ["movsb", "ret", "repz_ret", "call_rel", "jmp_rel8", "jmp_rel32", "inc_mem",
                                  "call_far", "pause", "syscall", "iretq", "nopw", "cut_jnz32", "cut_jz8"])
def test_returns_direct_transfers_and_other_instructions_are_not_branches(results, name):
    # cachegrind counts no returns (it assumes a perfect return-stack predictor) and no direct jumps or calls
    assert results[f"decode {name}"][0] == NONE


def test_always_taken_misses_while_history_and_counter_warm_up(results):
    # the first 7 branches each meet a fresh counter (the history changes), then 0 -> 1 -> 2 on all-ones history
    assert results["cond always"] == ["9"]
    assert results["cond never"] == ["0"]


def test_global_history_learns_regular_patterns(results):
    # alternating: the taken branches meet fresh counters under histories 0, 2, 10 and 42 while the history
    # fills, then history 42 steps 0 -> 1 -> 2; the not-taken ones are predicted by counters at 0 all along
    assert results["cond alternate"] == ["5"]
    assert 0 < int(results["cond every_fourth"][0]) <= 8


def test_target_buffer_misses_every_switch_of_target(results):
    assert results["ind same"] == ["1"]  # the empty buffer predicts 0
    assert results["ind alternate"] == ["100"]


@pytest.mark.parametrize("name, drops", [("mov_cr3", "1"), ("mov_cr4", "1"), ("invlpg", "1"), ("invpcid", "1"),
                                         ("mov_cr0", "0"), ("read_cr3", "0"), ("swapgs", "0"), ("rdtscp", "0"),
                                         ("movbe", "0")])
def test_cr3_cr4_writes_invlpg_and_invpcid_drop_translations(results, name, drops):
    assert results[f"flush {name}"] == [drops]


@pytest.mark.parametrize("name, hitm, inval, miss, state0, state1", [
    ("pingpong_writes", 9, 9, 10, "0", "3"),  # every write but the first takes the line modified elsewhere
    ("read_read_upgrade_read", 1, 1, 3, "1", "1"),  # the upgrade invalidates; the last read finds it modified
    ("exclusive_then_write", 0, 0, 1, "3", "0"),  # E -> M silently
    ("both_read", 0, 0, 2, "1", "1"),
    ("evicted_then_written", 0, 0, 10, "0", "3"),  # 8 more lines in a set of 8 ways pushed it out of cpu 0
    ("padded_writes", 0, 0, 2, "3", "0"),  # separate lines: no transfers after the first write of each
])
def test_mesi_counts_transfers_of_modified_lines_and_invalidations(results, name, hitm, inval, miss, state0, state1):
    assert results[f"coh {name}"] == [str(hitm), str(inval), str(miss), state0, state1]
