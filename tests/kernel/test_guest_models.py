"""The plugin's branch and coherence models on programs whose answer is known, in Debian's kernel under TCG.

Two static programs run as the guest's workload and open a plugin window
around each of their phases (the marker NOPs work in any program):

- ``branchy`` (1 vCPU, branch model): a loop of N iterations whose ``jz``
  follows random bits, the same loop on all-one bits, an indirect call that
  alternates between two targets, and one that always calls the same target.
  The same binary also runs under cachegrind on the host, whose per-function
  counts the plugin's must match.
- ``share`` (2 vCPUs, coherence model): two threads pinned to vCPUs 0 and 1
  write their own word N times, the two words in one cache line, then in two
  lines, then in one line without a PAUSE between writes.

Each boot costs about a minute of QEMU CPU time (icount).
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfab.kernel import qemu, tcg

KERNELS = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not KERNELS or not qemu.shutil.which(qemu.QEMU),
                                reason="needs qemu-system-x86 and linux-image-amd64 (make sysdeps)")

MARKERS = r"""
#define START .byte 0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x42
#define STOP .byte 0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x45
"""
LOOPS_S = MARKERS + r"""
        .text
# long bit_loop(const unsigned char *bits, long n): a jz on each bit and the loop's jnz, per iteration
        .globl bit_loop
        .type bit_loop, @function
bit_loop:
        START
        mov %rsi, %rcx
        xor %edx, %edx
1:      movzbl -1(%rdi,%rcx), %eax
        test %eax, %eax
        jz 2f
        inc %rdx
2:      dec %rcx
        jnz 1b
        STOP
        mov %rdx, %rax
        ret
        .size bit_loop, .-bit_loop

# void call_loop(long n, long alternate): an indirect call per iteration, to a, or to a and b in turn
        .globl call_loop
        .type call_loop, @function
call_loop:
        START
        mov %rdi, %rcx
        lea target_a(%rip), %r8
        lea target_b(%rip), %r9
        test %rsi, %rsi
        cmovz %r8, %r9
1:      mov %r8, %rax
        test $1, %cl
        cmovnz %r9, %rax
        call *%rax
        dec %rcx
        jnz 1b
        STOP
        ret
        .size call_loop, .-call_loop

        .type target_a, @function
target_a:
        ret
        .size target_a, .-target_a
        .type target_b, @function
target_b:
        ret
        .size target_b, .-target_b
        .section .note.GNU-stack,"",@progbits
"""
BRANCHY_C = r"""
#include <stdio.h>
#include <stdlib.h>
long bit_loop(const unsigned char *bits, long n);
void call_loop(long n, long alternate);
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    unsigned char *bits = malloc(n);
    unsigned long x = 12345;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        bits[i] = (unsigned char)(x >> 63);
    }
    long ones = bit_loop(bits, n);
    for (long i = 0; i < n; i++)
        bits[i] = 1;
    bit_loop(bits, n);
    call_loop(n, 1);
    call_loop(n, 0);
    printf("ones %ld\n", ones);
    return 0;
}
"""
SHARE_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define START __asm__ volatile(".byte 0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x42" ::: "memory")
#define STOP __asm__ volatile(".byte 0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x45" ::: "memory")
#define PAUSE __asm__ volatile("pause" ::: "memory")

static struct {
    _Alignas(64) volatile long words[16];   /* [0] and [1] share a line, [8] is the next line */
    _Alignas(64) volatile int ready;        /* the flags have lines of their own */
    _Alignas(64) volatile int done;
} box;
static long n;
static int pause_each;
static volatile long *slot[2];

static void *writer(void *arg)
{
    long me = (long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof(set), &set);
    if (me == 0)
        START;
    __atomic_add_fetch(&box.ready, 1, __ATOMIC_SEQ_CST);
    while (box.ready < 2)
        PAUSE;
    volatile long *p = slot[me];
    for (long i = 0; i < n; i++) {
        *p = i;
        if (pause_each)
            PAUSE;
    }
    if (me == 1) {
        box.done = 1;
    } else {
        while (!box.done)
            PAUSE;
        STOP;
    }
    return NULL;
}

static void phase(const char *name, int padded, int pause)
{
    pthread_t t[2];
    box.ready = box.done = 0;
    slot[0] = &box.words[0];
    slot[1] = padded ? &box.words[8] : &box.words[1];
    pause_each = pause;
    for (long c = 0; c < 2; c++)
        pthread_create(&t[c], NULL, writer, (void *)c);
    for (int c = 0; c < 2; c++)
        pthread_join(t[c], NULL);
    printf("%s %p %p\n", name, (void *)slot[0], (void *)slot[1]);
}

int main(int argc, char **argv)
{
    n = atol(argv[1]);
    phase("shared", 0, 1);
    phase("padded", 1, 1);
    phase("shared-nopause", 0, 0);
    return 0;
}
"""
N = 100000  # iterations of each branch loop
WRITES = 20000  # writes of each thread


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("models")
    for name, text in (("loops.S", LOOPS_S), ("branchy.c", BRANCHY_C), ("share.c", SHARE_C)):
        (d / name).write_text(text)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(d / "branchy"), str(d / "branchy.c"), str(d / "loops.S")],
                   check=True)
    subprocess.run(["gcc", "-O2", "-static", "-pthread", "-o", str(d / "share"), str(d / "share.c")], check=True)
    return d


@pytest.fixture(scope="module")
def kcache(tmp_path_factory) -> Path:
    """One helper cache for the module's boots: the first one's guest kallsyms serve the later ones."""
    return tmp_path_factory.mktemp("kcache")


@pytest.fixture(scope="module")
def branchy(programs, kcache) -> qemu.BootResult:
    req = qemu.BootRequest(kernel=KERNELS[-1], argv=(str(programs / "branchy"), str(N)), accel="tcg",
                           plugin=qemu.PluginOptions(branch=True), timeout_s=400, kallsyms=True,
                           cache_dir=str(kcache))
    res = qemu.boot(req)
    assert res.failure is None, res.console_tail
    return res


@pytest.fixture(scope="module")
def share(programs, branchy, kcache, tmp_path_factory) -> dict:
    """The coherence boot through the launcher, named by the kallsyms branchy's boot cached: its result."""
    d = tmp_path_factory.mktemp("share")
    req = {"kernel": KERNELS[-1], "argv": [str(programs / "share"), str(WRITES)], "vcpus": 2, "accel": "tcg",
           "plugin": {"coherence": True}, "cache_dir": str(kcache), "timeout_s": 400, "symbols": "guest",
           "result": str(d / "out.json"), "top": 200}
    (d / "req.json").write_text(json.dumps(req))
    env = {**os.environ, "PYTHONPATH": str(Path(qemu.__file__).parents[2])}
    proc = subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(d / "req.json")],
                          capture_output=True, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr
    body = json.loads((d / "out.json").read_text())
    body["stdout"] = proc.stdout.decode()
    return body


def test_a_branch_on_random_bits_misses_half_the_time_and_a_settled_one_almost_never(branchy):
    random, settled, _, _ = (w.branches for w in branchy.records)
    assert random.bc_user == settled.bc_user == 2 * N  # every jz and jnz of the window, the first one too
    # each random outcome is missed with probability 1/2 whatever the counter: binomial, sd sqrt(N)/2
    assert abs(random.bcm_user - N / 2) < 5 * math.sqrt(N) / 2 + 100
    assert settled.bcm_user < 50  # only while the history and the counters warm up
    assert random.bi_user == settled.bi_user == 0


def test_an_indirect_call_alternating_between_two_targets_misses_every_time(branchy):
    _, _, alternating, steady = (w.branches for w in branchy.records)
    assert alternating.bi_user == steady.bi_user == N  # the returns are not counted, as in cachegrind
    assert alternating.bim_user >= N - 1
    assert steady.bim_user <= 1  # the empty target buffer's first guess
    assert alternating.bc_user == steady.bc_user == N


def test_branch_counts_match_cachegrind_on_the_same_binary(branchy, programs):
    if not shutil.which("valgrind"):
        pytest.skip("needs valgrind")
    out = programs / "cg.out"
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes",
                    f"--cachegrind-out-file={out}", str(programs / "branchy"), str(N)],
                   check=True, capture_output=True)
    cg = _cachegrind_functions(out)
    w = branchy.records
    loops = {"bit_loop": w[0:2], "call_loop": w[2:4]}
    for fn, windows in loops.items():
        ours = [sum(getattr(x.branches, k) for x in windows) for k in ("bc_user", "bcm_user", "bi_user", "bim_user")]
        assert (ours[0], ours[2]) == (cg[fn]["Bc"], cg[fn]["Bi"]), fn
        # the predictors start apart (the plugin's is reset at the window, cachegrind's ran the startup code)
        assert abs(ours[1] - cg[fn]["Bcm"]) <= 0.001 * N + 20 and abs(ours[3] - cg[fn]["Bim"]) <= 2, fn


def _cachegrind_functions(path: Path) -> dict[str, dict[str, int]]:
    """Per-function event totals of a cachegrind.out file."""
    events, fn, totals = [], None, {}
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fn="):
            fn = line[3:]
        elif fn and line[:1].isdigit():
            acc = totals.setdefault(fn, dict.fromkeys(events, 0))
            for name, value in zip(events, line.split()[1:]):
                acc[name] += int(value)
    return totals


def test_adjacent_words_written_from_two_vcpus_bounce_their_line(share):
    shared, padded, _ = (w["coherence"] for w in share["windows"])
    assert abs(shared["hitm_user"] - 2 * WRITES) <= 10  # each write finds the line modified by the other vCPU
    assert abs(shared["invalidations_user"] - 2 * WRITES) <= 10
    assert padded["hitm_user"] <= 10 and padded["invalidations_user"] <= 10
    line = share["stdout"].splitlines()[0].split()[1]  # the shared line's address, as the program printed it
    top = share["hitm_lines"][0]
    assert top["line"] == line and top["vaddr"] == int(line, 16) and top["vcpus"] == [0, 1]
    assert abs(top["hitm"] - 2 * WRITES) <= 10


def test_per_cpu_data_is_named_by_variable_and_cpu(share, branchy):
    # the per-CPU bases were read from the running guest: __per_cpu_offset[0..1], in the kernel's direct map
    symbols = branchy.kallsyms.decode()
    bases = [int(b, 16) for b in share["percpu_bases"]]
    assert len(bases) == 2 and bases[0] != bases[1] and all(b >= 0xFFFF888000000000 for b in bases)
    per_cpu = tcg.percpu_symbols(symbols)
    assert per_cpu and tcg.percpu_table(tcg.data_symbols(symbols)) is not None
    size = per_cpu[-1][0]
    # a line at CPU 1's copy of runqueues is named so, by the bases the guest gave and its per-CPU symbols
    offset = dict((name, off) for off, name in per_cpu)["runqueues"]
    line = tcg.DataLine(bases[1] + offset + 0x40, 0, 1, 0, (0, 1))
    [(name, _)] = tcg.name_lines(tcg.data_symbols(symbols), (line,), per_cpu, tuple(bases))
    assert name == "runqueues+0x40 [cpu1]"
    # and every line the model saw in a per-CPU area (the tick's, when one falls in a window) is named by its CPU
    inside = [d for d in share["hitm_lines"] if any(b <= d["vaddr"] < b + size for b in bases)]
    for d in inside:
        cpu = next(i for i, b in enumerate(bases) if b <= d["vaddr"] < b + size)
        name, _, where = d["line"].rpartition(" ")
        assert where == f"[cpu{cpu}]" and "+0x" in name, d


def test_without_pause_the_vcpus_interleave_per_time_slice_and_hardly_bounce(share):
    # QEMU's single-threaded TCG switches vCPUs at PAUSE, HLT, interrupts and timer deadlines, not per access
    *_, nopause = (w["coherence"] for w in share["windows"])
    assert nopause["hitm_user"] < WRITES / 100


def test_each_vcpu_counts_its_own_thread(share):
    w = share["windows"][0]
    per_vcpu = w["per_vcpu"]
    assert len(per_vcpu) == 2 and share["vcpus_seen"] == 2
    assert all(v["insns_user"] >= 2 * WRITES for v in per_vcpu)  # a store and a pause per write at least
    assert sum(v["insns_user"] for v in per_vcpu) == w["insns_user"]
    assert sum(v["insns_kernel"] for v in per_vcpu) == w["insns_kernel"]
    assert share["per_vcpu"] == [{k: sum(x["per_vcpu"][i][k] for x in share["windows"]) for k in v}
                                 for i, v in enumerate(per_vcpu)]
