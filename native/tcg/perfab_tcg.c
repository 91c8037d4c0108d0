/*
 * perfab_tcg: a QEMU system-mode TCG plugin counting what a guest executes
 * between two marker instructions, split user/kernel.
 *
 * Markers: the guest executes the 7-byte NOP `nopl 0x42414650(%rax)`
 * (0f 1f 80 50 46 41 42) to open a window and `nopl 0x45414650(%rax)`
 * (0f 1f 80 50 46 41 45) to close it.  Each closed window appends one JSON
 * line to the output file: instruction counts, optional simulated cache
 * counts and, per kernel translation block, its instructions and L1i misses.
 *
 * Arguments (QEMU splits them at commas, so geometry uses colons):
 *   out=PATH               where records go (required)
 *   cache=on|off           simulate L1i, L1d and LL (default off)
 *   l1i=SIZE:ASSOC:LINE    bytes, ways, line bytes (default 32768:8:64)
 *   l1d=SIZE:ASSOC:LINE    (default 32768:8:64)
 *   ll=SIZE:ASSOC:LINE     (default 8388608:16:64)
 *   branch=on|off          cachegrind's branch predictor (default off; models.c)
 *   coherence=on|off       private L1d per vCPU with MESI: HITM, invalidations (default off; models.c)
 *   lines=N                data lines listed per window by HITM (default 32)
 *
 * Counting: each translation block adds its instruction count inline to the
 * user or kernel counter (x86-64: a block at or above 0xffff800000000000 is
 * kernel).  A block left early by a fault or interrupt still counts whole,
 * as its re-execution does; with one TCG thread the result is deterministic
 * for a deterministic guest.  Marker positions inside a block are corrected
 * for, so a window counts exactly the instructions between the markers.
 *
 * Cache model (cachegrind-style): set-associative, LRU, write-allocate,
 * virtual addresses, every vCPU sharing one hierarchy (callbacks are
 * serialised by `-accel tcg,thread=single`).  Every instruction is one L1i
 * reference; a fetch or data access crossing a line boundary touches both
 * lines and counts one miss if either misses.  L1 misses go to LL.  Caches
 * start cold at each window's start.  With coherence=on the L1d is private
 * per vCPU and physically addressed (models.c), and its misses reach LL by
 * physical address.
 *
 * Each window also lists per-vCPU instruction counts ("per_vcpu") and, with
 * the models on, branch and coherence counts (see models.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfab_tcg.h"

PERFAB_EXPORT int qemu_plugin_version = PERFAB_QEMU_PLUGIN_API;

#define MARKER_LEN 7
static const uint8_t MARK_START[MARKER_LEN] = {0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x42};
static const uint8_t MARK_STOP[MARKER_LEN] = {0x0f, 0x1f, 0x80, 0x50, 0x46, 0x41, 0x45};

enum { L1I = 0, L1D = 1, LL = 2, NLEVELS = 3 };
static const char *LEVEL_NAME[NLEVELS] = {"l1i", "l1d", "ll"};

/* One set-associative LRU cache: per set, ways ordered most recent first. */
struct cache {
    uint64_t size, assoc, line;     /* geometry in bytes, ways, bytes */
    unsigned line_shift;            /* log2(line) */
    uint64_t sets;                  /* size / (assoc * line), a power of two */
    uint64_t *tags;                 /* sets * assoc line numbers, ~0 when empty */
};

/* What a block's execution callback needs to simulate its fetches. */
struct tbinfo {
    int priv;                       /* USER or KERNEL */
    uint32_t n_insns;               /* instructions in the block */
    uint32_t n_lines;               /* entries in lines[] */
    struct tbstat *stat;            /* per-address stats (kernel blocks) */
    uint64_t lines[];               /* line numbers fetched in order; bit 63: same insn as previous */
};

#define CONT_BIT (1ULL << 63)
#define PHYS_TAG (1ULL << 62)   /* set in a physical address sent to LL: kept apart from virtual lines */

static FILE *out;
static int n_vcpus;
static int cache_on;
static struct model_options model_opt = {0, 0, 32};
static struct cache caches[NLEVELS];
static uint64_t insns[2];                       /* user, kernel since boot */
static uint64_t window_base[2];                 /* insns at the window's start */
static uint64_t refs[NLEVELS][2], misses[NLEVELS][2];
int window_active;
static unsigned windows;

static struct tbstat **tb_table;                /* open addressing by vaddr */
static size_t tb_cap, tb_used;

/* ---- caches ---------------------------------------------------------- */

static int parse_geometry(const char *text, struct cache *c)
{
    unsigned long long size, assoc, line;
    if (sscanf(text, "%llu:%llu:%llu", &size, &assoc, &line) != 3 || !size || !assoc || !line)
        return -1;
    if (line & (line - 1) || size % (assoc * line))
        return -1;
    uint64_t sets = size / (assoc * line);
    if (sets & (sets - 1))
        return -1;
    c->size = size;
    c->assoc = assoc;
    c->line = line;
    c->sets = sets;
    c->line_shift = (unsigned)__builtin_ctzll(line);
    return 0;
}

static void cache_reset(struct cache *c)
{
    memset(c->tags, 0xff, c->sets * c->assoc * sizeof(uint64_t));
}

/* Look line number `ln` up; returns 1 on a miss.  Moves it to most recent. */
static inline int cache_ref(struct cache *c, uint64_t ln)
{
    uint64_t *set = c->tags + (ln & (c->sets - 1)) * c->assoc;
    if (set[0] == ln)
        return 0;
    for (uint64_t i = 1; i < c->assoc; i++) {
        if (set[i] == ln) {
            memmove(set + 1, set, i * sizeof(uint64_t));
            set[0] = ln;
            return 0;
        }
    }
    memmove(set + 1, set, (c->assoc - 1) * sizeof(uint64_t));
    set[0] = ln;
    return 1;
}

/* LL lookup for an L1 miss of byte address `addr`. */
static inline void ll_ref(uint64_t addr, int priv)
{
    refs[LL][priv]++;
    misses[LL][priv] += cache_ref(&caches[LL], addr >> caches[LL].line_shift);
}

/* ---- per-kernel-block table ----------------------------------------- */

static size_t tb_slot(uint64_t vaddr, size_t cap)
{
    return (size_t)((vaddr * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);
}

static void tb_grow(void)
{
    size_t cap = tb_cap ? tb_cap * 2 : 65536;
    struct tbstat **table = calloc(cap, sizeof(*table));
    if (!table)
        abort();
    for (size_t i = 0; i < tb_cap; i++) {
        if (!tb_table[i])
            continue;
        size_t s = tb_slot(tb_table[i]->vaddr, cap);
        while (table[s])
            s = (s + 1) & (cap - 1);
        table[s] = tb_table[i];
    }
    free(tb_table);
    tb_table = table;
    tb_cap = cap;
}

static struct tbstat *tb_lookup(uint64_t vaddr)
{
    if (2 * (tb_used + 1) > tb_cap)
        tb_grow();
    size_t s = tb_slot(vaddr, tb_cap);
    while (tb_table[s]) {
        if (tb_table[s]->vaddr == vaddr)
            return tb_table[s];
        s = (s + 1) & (tb_cap - 1);
    }
    struct tbstat *st = calloc(1, sizeof(*st));
    if (!st)
        abort();
    st->vaddr = vaddr;
    tb_table[s] = st;
    tb_used++;
    return st;
}

/* ---- windows and records -------------------------------------------- */

static void window_start(unsigned int vcpu, uint64_t after)
{
    window_base[USER] = insns[USER];
    window_base[KERNEL] = insns[KERNEL];
    /* the block's instructions after the marker were added at block entry */
    window_base[USER] -= after;
    for (size_t i = 0; i < tb_cap; i++) {
        if (tb_table[i]) {
            tb_table[i]->insns_base = tb_table[i]->insns;
            tb_table[i]->l1i_misses = 0;
            memset(tb_table[i]->events, 0, sizeof(tb_table[i]->events));
        }
    }
    memset(refs, 0, sizeof(refs));
    memset(misses, 0, sizeof(misses));
    models_window_start(vcpu, after);
    if (cache_on)
        for (int l = 0; l < NLEVELS; l++)
            cache_reset(&caches[l]);
    window_active = 1;
}

static void write_cache(void)
{
    fprintf(out, ",\"cache\":{");
    for (int l = 0; l < NLEVELS; l++) {
        const struct cache *c = &caches[l];
        fprintf(out,
                "%s\"%s\":{\"size\":%" PRIu64 ",\"assoc\":%" PRIu64 ",\"line\":%" PRIu64
                ",\"refs_user\":%" PRIu64 ",\"refs_kernel\":%" PRIu64
                ",\"misses_user\":%" PRIu64 ",\"misses_kernel\":%" PRIu64 "}",
                l ? "," : "", LEVEL_NAME[l], c->size, c->assoc, c->line, refs[l][USER],
                refs[l][KERNEL], misses[l][USER], misses[l][KERNEL]);
    }
    fputc('}', out);
}

static void write_kernel_tbs(void)
{
    int first = 1;
    fprintf(out, ",\"kernel_tbs\":[");
    for (size_t i = 0; i < tb_cap; i++) {
        const struct tbstat *st = tb_table[i];
        if (!st || (st->insns == st->insns_base && !st->l1i_misses))
            continue;
        fprintf(out, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", st->vaddr,
                st->insns - st->insns_base, st->l1i_misses);
        first = 0;
    }
    fputc(']', out);
}

static void window_stop(unsigned int vcpu, uint64_t from_marker)
{
    if (!window_active)
        return;
    window_active = 0;
    uint64_t user = insns[USER] - from_marker - window_base[USER];
    uint64_t kernel = insns[KERNEL] - window_base[KERNEL];
    fprintf(out, "{\"window\":%u,\"vcpus\":%d,\"insns_user\":%" PRIu64 ",\"insns_kernel\":%" PRIu64,
            ++windows, n_vcpus, user, kernel);
    if (cache_on)
        write_cache();
    write_kernel_tbs();
    uint64_t totals[2] = {user, kernel};
    models_write(out, vcpu, from_marker, totals, tb_table, tb_cap, caches[L1D].line_shift);
    fputs("}\n", out);
    fflush(out);
}

/* userdata: bit 32 set for a stop marker; low bits: instructions counted
 * inline at block entry that lie after (start) or at/after (stop) it. */
static void on_marker(unsigned int vcpu, void *udata)
{
    uint64_t v = (uint64_t)(uintptr_t)udata;
    if (v >> 32)
        window_stop(vcpu, v & 0xffffffffu);
    else
        window_start(vcpu, v);
}

/* ---- execution callbacks for the cache model ------------------------ */

static void on_tb_exec(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    if (!window_active)
        return;
    const struct tbinfo *tb = udata;
    int p = tb->priv;
    unsigned shift = caches[L1I].line_shift;
    uint64_t n_miss = 0;
    int prev_missed = 0;
    refs[L1I][p] += tb->n_insns;
    for (uint32_t i = 0; i < tb->n_lines; i++) {
        uint64_t ln = tb->lines[i] & ~CONT_BIT;
        int missed = cache_ref(&caches[L1I], ln);
        if (missed) {
            ll_ref(ln << shift, p);
            if (!((tb->lines[i] & CONT_BIT) && prev_missed))
                n_miss++;
        }
        prev_missed = missed;
    }
    misses[L1I][p] += n_miss;
    if (tb->stat)
        tb->stat->l1i_misses += n_miss;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)vcpu;
    if (!window_active)
        return;
    int p = (int)(uintptr_t)udata;
    struct cache *c = &caches[L1D];
    uint64_t size = 1ULL << qemu_plugin_mem_size_shift(info);
    uint64_t first = vaddr >> c->line_shift, last = (vaddr + size - 1) >> c->line_shift;
    int missed = 0;
    refs[L1D][p]++;
    for (uint64_t ln = first; ln <= last; ln++) {
        if (cache_ref(c, ln)) {
            missed = 1;
            ll_ref(ln << c->line_shift, p);
        }
    }
    misses[L1D][p] += missed;
}

/* coherence=on: the data access goes through the vCPU's private L1d by physical line. */
static void on_mem_coherent(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    if (!window_active)
        return;
    const struct tbmodel *m = udata;
    unsigned shift = caches[L1D].line_shift;
    uint64_t size = 1ULL << qemu_plugin_mem_size_shift(info);
    uint64_t pa = models_phys(vcpu, info, vaddr);
    if (pa == ~0ULL)
        return;
    int write = qemu_plugin_mem_is_store(info), missed = 0;
    for (uint64_t v = vaddr & ~(caches[L1D].line - 1); v < vaddr + size; v += caches[L1D].line) {
        uint64_t p = v <= vaddr ? pa : (v >> 12 == vaddr >> 12 ? pa + (v - vaddr) : models_phys(vcpu, info, v));
        if (p == ~0ULL)
            continue;
        if (models_data_line(vcpu, p >> shift, v, write, m)) {
            missed = 1;
            if (cache_on)
                ll_ref((p & ~(caches[L1D].line - 1)) | PHYS_TAG, m->priv);
        }
    }
    refs[L1D][m->priv]++;
    misses[L1D][m->priv] += missed;
}

/* ---- translation ----------------------------------------------------- */

static struct tbinfo *describe_tb(struct qemu_plugin_tb *tb, size_t n, int priv)
{
    unsigned shift = caches[L1I].line_shift;
    uint32_t cap = (uint32_t)(2 * n + 1);
    struct tbinfo *info = malloc(sizeof(*info) + cap * sizeof(uint64_t));
    if (!info)
        abort();
    info->priv = priv;
    info->n_insns = (uint32_t)n;
    info->n_lines = 0;
    info->stat = NULL;
    uint64_t last = ~0ULL;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t a = qemu_plugin_insn_vaddr(insn);
        uint64_t z = qemu_plugin_insn_size(insn);
        uint64_t lo = a >> shift, hi = (a + (z ? z : 1) - 1) >> shift;
        for (uint64_t ln = lo; ln <= hi && info->n_lines < cap; ln++) {
            if (ln == last)
                continue;
            info->lines[info->n_lines++] = ln | (ln != lo ? CONT_BIT : 0);
            last = ln;
        }
    }
    return info;
}

/* coherence=on: the kernel instructions after which remembered translations may be stale. */
static void mark_tlb_flushes(struct qemu_plugin_tb *tb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (x86_flushes_tlb(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn)))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, models_flush_tlb, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
}

static void mark_markers(struct qemu_plugin_tb *tb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (qemu_plugin_insn_size(insn) != MARKER_LEN)
            continue;
        const uint8_t *bytes = qemu_plugin_insn_data(insn);
        uint64_t v;
        if (!memcmp(bytes, MARK_START, MARKER_LEN))
            v = n - 1 - i;
        else if (!memcmp(bytes, MARK_STOP, MARKER_LEN))
            v = (1ULL << 32) | (n - i);
        else
            continue;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)v);
    }
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    int priv = vaddr >= KERNEL_BASE ? KERNEL : USER;
    struct tbstat *stat = NULL;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns[priv], n);
    if (priv == KERNEL) {
        stat = tb_lookup(vaddr);
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &stat->insns, n);
        if (model_opt.coherence)
            mark_tlb_flushes(tb, n);
    } else {
        mark_markers(tb, n);
    }
    struct tbmodel *model = NULL;
    if (models_need_tb_callback() || model_opt.coherence) {
        model = models_describe_tb(tb, n, priv, stat);
        if (models_need_tb_callback())
            qemu_plugin_register_vcpu_tb_exec_cb(tb, models_on_tb, QEMU_PLUGIN_CB_NO_REGS, model);
    }
    if (cache_on) {
        struct tbinfo *info = describe_tb(tb, n, priv);
        info->stat = stat;
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, info);
    }
    for (size_t i = 0; (cache_on || model_opt.coherence) && i < n; i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i),
                                         model_opt.coherence ? on_mem_coherent : on_mem,
                                         QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         model_opt.coherence ? (void *)model : (void *)(uintptr_t)priv);
}

/* ---- install --------------------------------------------------------- */

static void on_qemu_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    if (out) {
        fprintf(out, "{\"exit\":true,\"windows\":%u,\"insns_user\":%" PRIu64
                ",\"insns_kernel\":%" PRIu64 ",\"mid_block_branches\":%" PRIu64 "}\n", windows, insns[USER],
                insns[KERNEL], models_mid_block_branches());
        fclose(out);
        out = NULL;
    }
}

static int fail(const char *what, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "perfab_tcg: %s: %s\n", what, arg);
    qemu_plugin_outs(msg);
    fputs(msg, stderr);
    return -1;
}

static int parse_args(int argc, char **argv, const char **path)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "out=", 4))
            *path = a + 4;
        else if (!strcmp(a, "cache=on"))
            cache_on = 1;
        else if (!strcmp(a, "cache=off"))
            cache_on = 0;
        else if (!strncmp(a, "l1i=", 4) && !parse_geometry(a + 4, &caches[L1I]))
            ;
        else if (!strncmp(a, "l1d=", 4) && !parse_geometry(a + 4, &caches[L1D]))
            ;
        else if (!strncmp(a, "ll=", 3) && !parse_geometry(a + 3, &caches[LL]))
            ;
        else if (!strcmp(a, "branch=on") || !strcmp(a, "branch=off"))
            model_opt.branch = a[8] == 'n';
        else if (!strcmp(a, "coherence=on") || !strcmp(a, "coherence=off"))
            model_opt.coherence = a[11] == 'n';
        else if (!strncmp(a, "lines=", 6) && strspn(a + 6, "0123456789") == strlen(a + 6) && a[6])
            model_opt.top_lines = (unsigned)strtoul(a + 6, NULL, 10);
        else
            return fail("bad argument (want out=PATH, cache=on|off, l1i|l1d|ll=SIZE:ASSOC:LINE"
                        " with power-of-two sets and line, branch=on|off, coherence=on|off, lines=N)", a);
    }
    return 0;
}

PERFAB_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv)
{
    const char *path = NULL;
    parse_geometry("32768:8:64", &caches[L1I]);
    parse_geometry("32768:8:64", &caches[L1D]);
    parse_geometry("8388608:16:64", &caches[LL]);
    if (parse_args(argc, argv, &path))
        return -1;
    if (!path)
        return fail("missing argument", "out=PATH");
    if (!info->system_emulation || strcmp(info->target_name, "x86_64"))
        return fail("needs qemu-system-x86_64, got", info->target_name);
    n_vcpus = info->system.smp_vcpus;
    if (models_init(&model_opt, info->system.max_vcpus, n_vcpus, caches[L1D].sets, caches[L1D].assoc))
        return fail("out of memory for", "the models");
    for (int l = 0; l < NLEVELS; l++) {
        caches[l].tags = malloc(caches[l].sets * caches[l].assoc * sizeof(uint64_t));
        if (!caches[l].tags)
            return fail("out of memory for cache", LEVEL_NAME[l]);
        cache_reset(&caches[l]);
    }
    out = fopen(path, "w");
    if (!out)
        return fail("cannot write", path);
    tb_grow();
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
