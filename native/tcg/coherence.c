/* MESI between private L1d caches: see coherence.h. */
#include <stdlib.h>
#include <string.h>

#include "coherence.h"

#define STATE_SHIFT 62
#define LINE_MASK ((1ULL << STATE_SHIFT) - 1)

int coherence_init(struct coherence *c, int n, uint64_t sets, uint64_t assoc)
{
    c->n = n;
    c->sets = sets;
    c->assoc = assoc;
    c->ways = calloc((size_t)n * sets * assoc, sizeof(uint64_t));
    return c->ways ? 0 : -1;
}

void coherence_reset(struct coherence *c)
{
    memset(c->ways, 0, (size_t)c->n * c->sets * c->assoc * sizeof(uint64_t));
}

static uint64_t *set_of(const struct coherence *c, int cpu, uint64_t line)
{
    return c->ways + ((uint64_t)cpu * c->sets + (line & (c->sets - 1))) * c->assoc;
}

/* The way holding `line` in `set`, or -1. */
static int find(const struct coherence *c, const uint64_t *set, uint64_t line)
{
    for (uint64_t i = 0; i < c->assoc && set[i]; i++)
        if ((set[i] & LINE_MASK) == line)
            return (int)i;
    return -1;
}

/* Move way `i` to the front (most recent) with `state`. */
static void touch(uint64_t *set, int i, uint64_t line, int state)
{
    memmove(set + 1, set, (size_t)i * sizeof(uint64_t));
    set[0] = line | (uint64_t)state << STATE_SHIFT;
}

/* Remove way `i`, keeping the valid ways first. */
static void drop(const struct coherence *c, uint64_t *set, int i)
{
    memmove(set + i, set + i + 1, (c->assoc - (uint64_t)i - 1) * sizeof(uint64_t));
    set[c->assoc - 1] = 0;
}

/* Snoop every other vCPU for `line`: invalidate on a write, downgrade to S on a read.
 * Returns how many copies there were; sets r->hitm and r->invalidated. */
static int snoop(struct coherence *c, int cpu, uint64_t line, int write, struct coh_result *r)
{
    int copies = 0;
    for (int o = 0; o < c->n; o++) {
        if (o == cpu)
            continue;
        uint64_t *set = set_of(c, o, line);
        int i = find(c, set, line);
        if (i < 0)
            continue;
        copies++;
        int state = (int)(set[i] >> STATE_SHIFT);
        r->hitm |= state == MESI_M;
        if (write) {
            drop(c, set, i);
            r->invalidated++;
        } else if (state != MESI_S) {
            set[i] = line | (uint64_t)MESI_S << STATE_SHIFT;
        }
    }
    return copies;
}

void coherence_access(struct coherence *c, int cpu, uint64_t line, int write, struct coh_result *r)
{
    uint64_t *set = set_of(c, cpu, line);
    r->miss = r->hitm = r->invalidated = 0;
    if ((set[0] & LINE_MASK) == line && set[0] && (!write || set[0] >> STATE_SHIFT == MESI_M))
        return;  /* the most recent line again, and nothing to change */
    int i = find(c, set, line);
    if (i >= 0) {
        int state = (int)(set[i] >> STATE_SHIFT);
        if (write && state == MESI_S)
            snoop(c, cpu, line, 1, r);
        touch(set, i, line, write ? MESI_M : state);
        return;
    }
    r->miss = 1;
    int copies = snoop(c, cpu, line, write, r);
    touch(set, (int)c->assoc - 1, line, write ? MESI_M : copies ? MESI_S : MESI_E);
}

int coherence_state(const struct coherence *c, int cpu, uint64_t line)
{
    const uint64_t *set = set_of(c, cpu, line);
    int i = find(c, set, line);
    return i < 0 ? MESI_I : (int)(set[i] >> STATE_SHIFT);
}
