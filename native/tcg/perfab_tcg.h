/*
 * What perfab_tcg.c (counting, caches, windows) and models.c (per-vCPU
 * counts, the branch model, coherence between vCPUs) share.
 */
#ifndef PERFAB_TCG_H
#define PERFAB_TCG_H

#include <stdint.h>
#include <stdio.h>

#include "qemu_plugin_api.h"
#include "x86_branch.h"

#define KERNEL_BASE 0xffff800000000000ULL

enum { USER = 0, KERNEL = 1 };

/* Model events counted per kernel block and per privilege. */
enum { EV_BC, EV_BCM, EV_BI, EV_BIM, EV_HITM, EV_INVAL, EV_N };

/* Instructions, L1i misses and model events of one kernel block address. */
struct tbstat {
    uint64_t vaddr;                 /* start address of the block */
    uint64_t insns;                 /* instructions since boot (inline counter) */
    uint64_t insns_base;            /* insns at the window's start */
    uint64_t l1i_misses;            /* L1i misses in the current window */
    uint64_t events[EV_N];          /* model events in the current window */
};

/* What the models need of one translated block (allocated once per translation). */
struct tbmodel {
    uint64_t vaddr;                 /* start address of the block */
    uint64_t last;                  /* address of its last instruction */
    struct branch_info br;          /* that instruction as a branch (BR_NONE when it is none) */
    struct tbstat *stat;            /* per-address stats (kernel blocks), else NULL */
    uint32_t n_insns;               /* instructions in the block */
    int priv;                       /* USER or KERNEL */
};

/* Which models run, from the plugin's arguments. */
struct model_options {
    int branch;                     /* branch=on: the branch predictor */
    int coherence;                  /* coherence=on: private L1d per vCPU with MESI */
    unsigned top_lines;             /* lines=N: data lines listed per window by HITM */
};

/* ---- perfab_tcg.c ---- */

extern int window_active;           /* between a start and a stop marker */

/* ---- models.c ---- */

/* Set up for `slots` vCPU indexes, `n_vcpus` of them at start; L1d geometry for coherence. */
int models_init(const struct model_options *opt, int slots, int n_vcpus, uint64_t l1d_sets, uint64_t l1d_assoc);

/* True when blocks need the per-block callback (per-vCPU counts with SMP, or the branch model). */
int models_need_tb_callback(void);

/* The block's description for the models' callbacks. */
struct tbmodel *models_describe_tb(struct qemu_plugin_tb *tb, size_t n, int priv, struct tbstat *stat);

/* Per-block callback: per-vCPU counts, branch outcomes. */
void models_on_tb(unsigned int vcpu, void *udata);

/* The physical address of a data access at `vaddr` (~0 for I/O), from the vCPU's remembered translations. */
uint64_t models_phys(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr);

/* Insn callback before a CR3/CR4 write, INVLPG or INVPCID: forget the vCPU's translations. */
void models_flush_tlb(unsigned int vcpu, void *udata);

/* vCPU `vcpu` accessed physical line `pline` (virtual line address `vline`); returns 1 on an L1d miss. */
int models_data_line(unsigned int vcpu, uint64_t pline, uint64_t vline, int write, const struct tbmodel *m);

/* A window starts on `vcpu`, whose counted block holds `after` user instructions past the marker. */
void models_window_start(unsigned int vcpu, uint64_t after);

/* The window's per-vCPU counts and model results as JSON members (each starting with a comma). */
void models_write(FILE *out, unsigned int vcpu, uint64_t from_marker, const uint64_t totals[2],
                  struct tbstat *const *table, size_t cap, unsigned line_shift);

/* Blocks translated with a branch before their last instruction (expected 0: QEMU ends a block at one). */
uint64_t models_mid_block_branches(void);

#endif
