/*
 * Which x86-64 instructions are branches, in cachegrind's classification
 * (valgrind's cg_main.c with --branch-sim=yes), decoded from their bytes.
 *
 * Conditional (cachegrind's Bc): a guarded side exit of the block, i.e.
 * Jcc short and near, JrCXZ, LOOP/LOOPE/LOOPNE, and each iteration of a
 * REP-prefixed string instruction (VEX loops a REP string instruction with
 * a guarded exit per iteration, so cachegrind counts it as one).
 * Indirect (cachegrind's Bi): a jump or call whose target is not a constant,
 * i.e. CALL and JMP through FF /2 and FF /4.  Returns are not counted at
 * all: cachegrind assumes a return-stack predictor that never misses.
 * Direct jumps and calls, far transfers, SYSCALL/SYSRET/IRET and INT are
 * not branches in this sense.
 *
 * 64-bit code only: 0x40..0x4f are REX prefixes.
 *
 * Also here: which instructions drop TLB entries (x86_flushes_tlb).
 */
#ifndef PERFAB_X86_BRANCH_H
#define PERFAB_X86_BRANCH_H

#include <stddef.h>
#include <stdint.h>

enum branch_kind {
    BR_NONE = 0,    /* not a branch (or not one cachegrind counts) */
    BR_COND = 1,    /* Jcc, JrCXZ, LOOPcc: taken goes to `target` */
    BR_REP = 2,     /* REP string iteration: taken repeats it (`target` is the instruction itself) */
    BR_IND = 3,     /* indirect CALL or JMP: the target is whatever executes next */
};

/* What one instruction is, as far as the branch model cares. */
struct branch_info {
    enum branch_kind kind;  /* see above */
    uint64_t target;        /* BR_COND: the taken target; BR_REP: the instruction's address; else 0 */
    uint64_t fallthrough;   /* address of the next instruction */
};

/* Classify the `len` bytes of the instruction at `vaddr`; returns info.kind. */
enum branch_kind x86_classify(const uint8_t *bytes, size_t len, uint64_t vaddr, struct branch_info *info);

/* 1 when the instruction can drop cached address translations: a move to CR3 or CR4, INVLPG or INVPCID
 * (the events after which x86 promises no stale TLB entry; see the coherence model's translation cache). */
int x86_flushes_tlb(const uint8_t *bytes, size_t len);

#endif
