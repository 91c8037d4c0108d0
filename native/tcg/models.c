/*
 * perfab_tcg's models of what the emulator lacks, and its per-vCPU counts.
 *
 * Per-vCPU counts: with more than one vCPU (or the branch model) every block
 * calls models_on_tb at entry, which adds its instructions to that vCPU's
 * counters; with one vCPU and no branch model the window's totals are the
 * vCPU's and no callback runs.
 *
 * Branches (branch=on): the block's last instruction is classified once at
 * translation (x86_branch.c; QEMU ends a block at every branch).  Its outcome
 * is the next block the same vCPU enters at the same privilege: the taken
 * target or the fall-through for a conditional branch, the target itself for
 * an indirect one.  Keeping one pending branch per privilege lets a user
 * branch resolve after an interrupt taken in between.  A next block that is
 * neither outcome of a conditional branch (an interrupt or fault in kernel
 * mode came in between), or that starts inside the pending block past its
 * start (the block faulted before reaching its branch and is re-entered), is
 * counted as unresolved, not predicted.  Each vCPU has its own predictor
 * (predictor.c), reset at each window's start.
 *
 * Coherence (coherence=on): every data access, by physical address, goes
 * through its vCPU's private L1d (coherence.c).  HITM and invalidations are
 * charged to the accessing instruction's privilege and kernel block, and to
 * the physical line, which remembers the first virtual address it was met at.
 * Asking QEMU for a physical address costs more than the rest of the model,
 * so each vCPU keeps the page translations it asked for, as a TLB does, and
 * drops them all where x86 lets a TLB entry go stale no longer: when the
 * kernel writes CR3 or CR4 or executes INVLPG or INVPCID.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coherence.h"
#include "perfab_tcg.h"
#include "predictor.h"

/* One vCPU's counts and branch state. */
struct vcpu_state {
    uint64_t insns[2];                  /* instructions since boot, by privilege (block callback) */
    uint64_t base[2];                   /* insns at the window's start */
    const struct tbmodel *pending[2];   /* by privilege: the last block entered, when it ends in a branch */
    struct predictor pred;              /* this core's predictor */
    struct xlate *xlate;                /* coherence: page translations, XLATE_SLOTS by virtual page */
    uint64_t xlate_gen;                 /* translations of an older generation are dropped */
};

/* One remembered page translation. */
struct xlate {
    uint64_t vpage;                     /* virtual page number */
    uint64_t ppage;                     /* physical page number */
    uint64_t gen;                       /* the vCPU's generation it was made in; 0: never */
};

#define PAGE_SHIFT 12
#define XLATE_SLOTS 4096

/* HITM and invalidations of one physical data line in the window. */
struct linestat {
    uint64_t pline;                     /* physical line number, the key */
    uint64_t vline;                     /* virtual address of the line where first met */
    uint64_t hitm;                      /* transfers of the line modified by another vCPU */
    uint64_t inval;                     /* copies of it invalidated in other vCPUs */
    uint32_t cpus;                      /* bit per vCPU index (mod 32) that met an event on it */
    int used;                           /* slot taken */
};

static struct model_options opt;
static struct vcpu_state *vcpus;
static int n_slots, n_vcpus, tb_callback;
static uint64_t events[EV_N][2];        /* by privilege, in the window */
static uint64_t unresolved, mid_block;
static struct coherence coh;
static struct linestat *lines;
static size_t lines_cap, lines_used;

int models_init(const struct model_options *o, int slots, int n, uint64_t l1d_sets, uint64_t l1d_assoc)
{
    opt = *o;
    n_slots = slots > n ? slots : n;
    n_vcpus = n;
    tb_callback = n > 1 || opt.branch;
    vcpus = calloc((size_t)n_slots, sizeof(*vcpus));
    if (!vcpus)
        return -1;
    if (opt.coherence && coherence_init(&coh, n_slots, l1d_sets, l1d_assoc))
        return -1;
    for (int c = 0; opt.coherence && c < n_slots; c++) {
        vcpus[c].xlate = calloc(XLATE_SLOTS, sizeof(struct xlate));
        vcpus[c].xlate_gen = 1;
        if (!vcpus[c].xlate)
            return -1;
    }
    lines_cap = 4096;
    lines = calloc(lines_cap, sizeof(*lines));
    return lines ? 0 : -1;
}

int models_need_tb_callback(void)
{
    return tb_callback;
}

uint64_t models_mid_block_branches(void)
{
    return mid_block;
}

/* ---- translation ----------------------------------------------------- */

struct tbmodel *models_describe_tb(struct qemu_plugin_tb *tb, size_t n, int priv, struct tbstat *stat)
{
    struct tbmodel *m = calloc(1, sizeof(*m));
    if (!m)
        abort();
    m->vaddr = qemu_plugin_tb_vaddr(tb);
    m->stat = stat;
    m->n_insns = (uint32_t)n;
    m->priv = priv;
    for (size_t i = 0; opt.branch && i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t a = qemu_plugin_insn_vaddr(insn);
        struct branch_info br;
        if (!x86_classify(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn), a, &br))
            continue;
        if (i + 1 < n) {
            mid_block++;
            continue;
        }
        m->br = br;
        m->last = a;
    }
    return m;
}

/* ---- branches -------------------------------------------------------- */

static void count(const struct tbmodel *b, int ev, int missed)
{
    events[ev][b->priv]++;
    events[ev + 1][b->priv] += missed;
    if (b->stat) {
        b->stat->events[ev]++;
        b->stat->events[ev + 1] += missed;
    }
}

/* The branch ending block `b` was followed by a block at `next`. */
static void resolve(struct vcpu_state *v, const struct tbmodel *b, uint64_t next)
{
    if (b->br.kind == BR_IND) {
        if (next > b->vaddr && next <= b->last) {
            unresolved++;
            return;
        }
        count(b, EV_BI, predict_indirect(&v->pred, b->last, next));
        return;
    }
    int taken = next == b->br.target ? 1 : next == b->br.fallthrough ? 0 : -1;
    if (taken < 0) {
        unresolved++;
        return;
    }
    count(b, EV_BC, predict_conditional(&v->pred, b->last, taken));
}

void models_on_tb(unsigned int vcpu, void *udata)
{
    const struct tbmodel *m = udata;
    if ((int)vcpu >= n_slots)
        return;
    struct vcpu_state *v = &vcpus[vcpu];
    v->insns[m->priv] += m->n_insns;
    if (!opt.branch)
        return;
    const struct tbmodel *prev = v->pending[m->priv];
    if (prev && window_active)
        resolve(v, prev, m->vaddr);
    v->pending[m->priv] = m->br.kind ? m : NULL;
}

/* ---- coherence ------------------------------------------------------- */

static size_t line_slot(uint64_t pline, size_t cap)
{
    return (size_t)((pline * 0x9E3779B97F4A7C15ULL) >> 24) & (cap - 1);
}

static void lines_grow(void)
{
    size_t cap = lines_cap * 2;
    struct linestat *table = calloc(cap, sizeof(*table));
    if (!table)
        abort();
    for (size_t i = 0; i < lines_cap; i++) {
        if (!lines[i].used)
            continue;
        size_t s = line_slot(lines[i].pline, cap);
        while (table[s].used)
            s = (s + 1) & (cap - 1);
        table[s] = lines[i];
    }
    free(lines);
    lines = table;
    lines_cap = cap;
}

static struct linestat *line_lookup(uint64_t pline, uint64_t vline)
{
    if (2 * (lines_used + 1) > lines_cap)
        lines_grow();
    size_t s = line_slot(pline, lines_cap);
    while (lines[s].used) {
        if (lines[s].pline == pline)
            return &lines[s];
        s = (s + 1) & (lines_cap - 1);
    }
    lines[s].used = 1;
    lines[s].pline = pline;
    lines[s].vline = vline;
    lines_used++;
    return &lines[s];
}

uint64_t models_phys(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr)
{
    if ((int)vcpu >= n_slots)
        return ~0ULL;
    struct vcpu_state *v = &vcpus[vcpu];
    uint64_t vpage = vaddr >> PAGE_SHIFT, offset = vaddr & ((1ULL << PAGE_SHIFT) - 1);
    struct xlate *x = &v->xlate[vpage & (XLATE_SLOTS - 1)];
    if (x->gen == v->xlate_gen && x->vpage == vpage)
        return x->ppage << PAGE_SHIFT | offset;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw || qemu_plugin_hwaddr_is_io(hw))
        return ~0ULL;
    uint64_t pa = qemu_plugin_hwaddr_phys_addr(hw);
    *x = (struct xlate){vpage, pa >> PAGE_SHIFT, v->xlate_gen};
    return pa;
}

void models_flush_tlb(unsigned int vcpu, void *udata)
{
    (void)udata;
    if ((int)vcpu < n_slots)
        vcpus[vcpu].xlate_gen++;
}

int models_data_line(unsigned int vcpu, uint64_t pline, uint64_t vline, int write, const struct tbmodel *m)
{
    struct coh_result r;
    if ((int)vcpu >= n_slots)
        return 0;
    coherence_access(&coh, (int)vcpu, pline, write, &r);
    if (r.hitm || r.invalidated) {
        events[EV_HITM][m->priv] += (uint64_t)r.hitm;
        events[EV_INVAL][m->priv] += (uint64_t)r.invalidated;
        if (m->stat) {
            m->stat->events[EV_HITM] += (uint64_t)r.hitm;
            m->stat->events[EV_INVAL] += (uint64_t)r.invalidated;
        }
        struct linestat *ls = line_lookup(pline, vline);
        ls->hitm += (uint64_t)r.hitm;
        ls->inval += (uint64_t)r.invalidated;
        ls->cpus |= 1u << (vcpu & 31);
    }
    return r.miss;
}

/* ---- windows --------------------------------------------------------- */

void models_window_start(unsigned int vcpu, uint64_t after)
{
    for (int c = 0; c < n_slots; c++) {
        struct vcpu_state *v = &vcpus[c];
        memcpy(v->base, v->insns, sizeof(v->base));
        /* a pending branch ran before the window, except the marker block's own */
        if ((unsigned)c != vcpu)
            v->pending[USER] = NULL;
        v->pending[KERNEL] = NULL;
        if (opt.branch)
            predictor_reset(&v->pred);
    }
    if ((int)vcpu < n_slots)
        vcpus[vcpu].base[USER] -= after;
    memset(events, 0, sizeof(events));
    unresolved = 0;
    if (opt.coherence)
        coherence_reset(&coh);
    memset(lines, 0, lines_cap * sizeof(*lines));
    lines_used = 0;
}

/* ---- records --------------------------------------------------------- */

static void write_per_vcpu(FILE *out, unsigned int vcpu, uint64_t from_marker, const uint64_t totals[2])
{
    fputs(",\"per_vcpu\":[", out);
    for (int c = 0; c < n_vcpus; c++) {
        uint64_t u = totals[USER], k = totals[KERNEL];
        if (tb_callback) {
            u = vcpus[c].insns[USER] - vcpus[c].base[USER] - ((unsigned)c == vcpu ? from_marker : 0);
            k = vcpus[c].insns[KERNEL] - vcpus[c].base[KERNEL];
        }
        fprintf(out, "%s{\"insns_user\":%" PRIu64 ",\"insns_kernel\":%" PRIu64 "}", c ? "," : "", u, k);
    }
    fputc(']', out);
}

/* `name`:[[vaddr, events[first..first+n)], ...] over kernel blocks with any of them. */
static void write_tb_events(FILE *out, const char *name, int first, int n, struct tbstat *const *table,
                            size_t cap)
{
    int any = 0;
    fprintf(out, ",\"%s\":[", name);
    for (size_t i = 0; i < cap; i++) {
        const struct tbstat *st = table[i];
        uint64_t sum = 0;
        for (int e = first; st && e < first + n; e++)
            sum += st->events[e];
        if (!sum)
            continue;
        fprintf(out, "%s[%" PRIu64, any ? "," : "", st->vaddr);
        for (int e = first; e < first + n; e++)
            fprintf(out, ",%" PRIu64, st->events[e]);
        fputc(']', out);
        any = 1;
    }
    fputc(']', out);
}

static void write_branches(FILE *out)
{
    static const char *name[2] = {"user", "kernel"};
    fputs(",\"branches\":{", out);
    for (int p = 0; p < 2; p++)
        fprintf(out, "\"bc_%s\":%" PRIu64 ",\"bcm_%s\":%" PRIu64 ",\"bi_%s\":%" PRIu64 ",\"bim_%s\":%" PRIu64 ",",
                name[p], events[EV_BC][p], name[p], events[EV_BCM][p], name[p], events[EV_BI][p], name[p],
                events[EV_BIM][p]);
    fprintf(out, "\"unresolved\":%" PRIu64 "}", unresolved);
}

static int by_hitm(const void *a, const void *b)
{
    const struct linestat *x = *(struct linestat *const *)a, *y = *(struct linestat *const *)b;
    if (x->hitm != y->hitm)
        return x->hitm < y->hitm ? 1 : -1;
    if (x->inval != y->inval)
        return x->inval < y->inval ? 1 : -1;
    return x->pline < y->pline ? -1 : x->pline > y->pline;
}

/* "hitm_lines":[[vaddr, paddr, hitm, invalidations, vcpu bits], ...], the top lines by HITM. */
static void write_lines(FILE *out, unsigned line_shift)
{
    struct linestat **order = malloc((lines_used + 1) * sizeof(*order));
    size_t n = 0;
    if (!order)
        abort();
    for (size_t i = 0; i < lines_cap; i++)
        if (lines[i].used)
            order[n++] = &lines[i];
    qsort(order, n, sizeof(*order), by_hitm);
    fputs(",\"hitm_lines\":[", out);
    for (size_t i = 0; i < n && i < opt.top_lines; i++)
        fprintf(out, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu32 "]", i ? "," : "",
                order[i]->vline, order[i]->pline << line_shift, order[i]->hitm, order[i]->inval, order[i]->cpus);
    fputc(']', out);
    free(order);
}

void models_write(FILE *out, unsigned int vcpu, uint64_t from_marker, const uint64_t totals[2],
                  struct tbstat *const *table, size_t cap, unsigned line_shift)
{
    write_per_vcpu(out, vcpu, from_marker, totals);
    if (opt.branch) {
        write_branches(out);
        write_tb_events(out, "kernel_tb_branches", EV_BC, 4, table, cap);
    }
    if (opt.coherence) {
        fprintf(out, ",\"coherence\":{\"hitm_user\":%" PRIu64 ",\"hitm_kernel\":%" PRIu64
                ",\"invalidations_user\":%" PRIu64 ",\"invalidations_kernel\":%" PRIu64 "}",
                events[EV_HITM][USER], events[EV_HITM][KERNEL], events[EV_INVAL][USER], events[EV_INVAL][KERNEL]);
        write_tb_events(out, "kernel_tb_coherence", EV_HITM, 2, table, cap);
        write_lines(out, line_shift);
    }
}
