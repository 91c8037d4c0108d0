/*
 * Coherence between vCPUs: one private, set-associative, LRU L1d per vCPU
 * and a MESI protocol kept by snooping the other vCPUs' L1d on a miss or on
 * a write to a shared line (no separate directory: the private caches are
 * the directory).
 *
 *   read hit, or write hit on M:  nothing else happens
 *   write hit on E:               E -> M silently
 *   write hit on S:               every other copy is invalidated, then M
 *   read miss:                    a remote M or E copy drops to S; the line
 *                                 comes in S if any other vCPU holds it, else E
 *   write miss (RFO):             every other copy is invalidated; the line comes in M
 *
 * On a miss, a remote copy in M is a transfer of a modified line: what
 * perf c2c reports as HITM (it samples loads only; this model counts the
 * read-for-ownership of a store too).  Each remote copy removed by a write
 * is one invalidation.  An evicted line leaves silently (write-back is not
 * counted).
 */
#ifndef PERFAB_COHERENCE_H
#define PERFAB_COHERENCE_H

#include <stdint.h>

enum { MESI_I = 0, MESI_S = 1, MESI_E = 2, MESI_M = 3 };

/* Every vCPU's private L1d.  A way is `line | state << 62`; 0 is empty.
 * Valid ways come first in each set, most recently used first. */
struct coherence {
    int n;                  /* vCPUs */
    uint64_t sets;          /* sets per cache, a power of two */
    uint64_t assoc;         /* ways per set */
    uint64_t *ways;         /* n * sets * assoc */
};

/* What one access of one line did. */
struct coh_result {
    int miss;               /* the line was not in the vCPU's L1d */
    int hitm;               /* another vCPU held it modified */
    int invalidated;        /* copies removed from the other vCPUs' L1d */
};

/* `n` caches of `sets` x `assoc`; returns -1 when out of memory. */
int coherence_init(struct coherence *c, int n, uint64_t sets, uint64_t assoc);

/* Every cache empty. */
void coherence_reset(struct coherence *c);

/* vCPU `cpu` reads (write = 0) or writes line number `line` (below 2^62). */
void coherence_access(struct coherence *c, int cpu, uint64_t line, int write, struct coh_result *r);

/* The state of `line` in vCPU `cpu`'s L1d (MESI_I when absent); for tests. */
int coherence_state(const struct coherence *c, int cpu, uint64_t line);

#endif
