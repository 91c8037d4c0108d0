/* cachegrind-style branch predictor: see predictor.h. */
#include <string.h>

#include "predictor.h"

void predictor_reset(struct predictor *p)
{
    memset(p, 0, sizeof(*p));
}

int predict_conditional(struct predictor *p, uint64_t addr, int taken)
{
    uint32_t hist = p->history & ((1u << PRED_HIST_BITS) - 1);
    uint32_t low = (uint32_t)addr & ((1u << PRED_ADDR_BITS) - 1);
    uint8_t *c = &p->counters[hist << PRED_ADDR_BITS | low];
    int predicted = *c >= 2;
    p->history = p->history << 1 | (taken ? 1u : 0u);
    if (taken && *c < 3)
        (*c)++;
    else if (!taken && *c > 0)
        (*c)--;
    return predicted != (taken != 0);
}

int predict_indirect(struct predictor *p, uint64_t addr, uint64_t target)
{
    uint64_t *slot = &p->btac[addr & (PRED_BTAC - 1)];
    int missed = *slot != target;
    *slot = target;
    return missed;
}
