/*
 * The branch predictor cachegrind simulates with --branch-sim=yes (facts from
 * valgrind's cg_branchpred.c; this is perfab's own code):
 *
 * - conditional branches: 16384 two-bit saturating counters, starting at 0
 *   (strongly not-taken).  The index is 14 bits: the last 7 outcomes of any
 *   conditional branch (global history, most recent in bit 0) above the low
 *   7 bits of the branch's address.  A counter of 2 or 3 predicts taken.
 * - indirect branches: a 512-entry table of last targets indexed by the low
 *   9 bits of the branch's address, starting at 0; the prediction is the
 *   last target seen there.
 *
 * perfab keeps one predictor per vCPU (each core has its own).
 */
#ifndef PERFAB_PREDICTOR_H
#define PERFAB_PREDICTOR_H

#include <stdint.h>

#define PRED_HIST_BITS 7
#define PRED_ADDR_BITS 7
#define PRED_COUNTERS (1u << (PRED_HIST_BITS + PRED_ADDR_BITS))
#define PRED_BTAC_BITS 9
#define PRED_BTAC (1u << PRED_BTAC_BITS)

/* One core's predictor state. */
struct predictor {
    uint32_t history;                   /* outcomes of recent conditional branches, newest in bit 0 */
    uint8_t counters[PRED_COUNTERS];    /* two-bit counters, 0..3 */
    uint64_t btac[PRED_BTAC];           /* last target per address slot */
};

/* Forget everything: counters 0, history 0, targets 0. */
void predictor_reset(struct predictor *p);

/* A conditional branch at `addr` went `taken` (0/1); returns 1 when it was mispredicted. */
int predict_conditional(struct predictor *p, uint64_t addr, int taken);

/* An indirect branch at `addr` went to `target`; returns 1 when it was mispredicted. */
int predict_indirect(struct predictor *p, uint64_t addr, uint64_t target);

#endif
