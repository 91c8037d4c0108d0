/*
 * lockops: locked read-modify-write helpers behind a LOCK_PREFIX-like macro.
 *
 * Every locked instruction records its address in a .smp_locks section
 * (.pushsection/.popsection inside the asm), as the kernel's LOCK_PREFIX does
 * so that a uniprocessor boot can patch the lock prefixes away.  Those
 * directives make the asm template several lines long, and gcc estimates an
 * asm's size by its lines: each helper looks like ~6 instructions, so the
 * small functions built on them look too big to inline.  Built with
 * -DASM_INLINE, the helpers use `asm inline` (gcc >= 9), which gcc sizes as
 * one instruction: the same functions become cheap enough to inline at their
 * call sites.  Nothing else differs between the two builds.
 *
 * Usage: lockops ITERATIONS   (prints ops/s and a checksum)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef ASM_INLINE
#define ASM_LOCKED asm inline volatile
#else
#define ASM_LOCKED asm volatile
#endif

#define LOCK_PREFIX_HERE \
	".pushsection .smp_locks,\"a\"\n" \
	".balign 4\n" \
	".long 671f - .\n" \
	".popsection\n" \
	"671:"
#define LOCK_PREFIX LOCK_PREFIX_HERE "\n\tlock "

static inline void atomic_inc(int *v)
{
	ASM_LOCKED(LOCK_PREFIX "incl %0" : "+m"(*v) :: "memory");
}

static inline int atomic_dec_and_test(int *v)
{
	unsigned char zero;
	ASM_LOCKED(LOCK_PREFIX "decl %0\n\tsete %1" : "+m"(*v), "=qm"(zero) :: "memory");
	return zero;
}

static inline void atomic_add(long i, long *v)
{
	ASM_LOCKED(LOCK_PREFIX "addq %1,%0" : "+m"(*v) : "er"(i) : "memory");
}

static inline void set_bit(long nr, unsigned long *addr)
{
	ASM_LOCKED(LOCK_PREFIX "btsq %1,%0" : "+m"(*addr) : "Ir"(nr) : "memory");
}

static inline void clear_bit(long nr, unsigned long *addr)
{
	ASM_LOCKED(LOCK_PREFIX "btrq %1,%0" : "+m"(*addr) : "Ir"(nr) : "memory");
}

struct obj {
	int refcnt;
	int freed;
	unsigned long flags;
	long bytes;
	long events;
};

#define OBJ_BUSY 3

/* Small functions made of locked helpers: what gcc decides to inline, or not. */
static void obj_get(struct obj *o)
{
	atomic_inc(&o->refcnt);
}

static void obj_put(struct obj *o)
{
	if (atomic_dec_and_test(&o->refcnt))
		o->freed++;
}

static void obj_account(struct obj *o, long bytes)
{
	set_bit(OBJ_BUSY, &o->flags);
	atomic_add(bytes, &o->bytes);
	atomic_add(1, &o->events);
	clear_bit(OBJ_BUSY, &o->flags);
}

static struct obj objs[16];

/* Sixteen callers, each a distinct call site of every helper function. */
#define CALLER(n) \
	__attribute__((noinline)) static long caller##n(long x) \
	{ \
		struct obj *o = &objs[(x + n) & 15]; \
		obj_get(o); \
		obj_account(o, (x & 255) + n); \
		obj_put(o); \
		return x * 6364136223846793005L + n; \
	}

CALLER(0) CALLER(1) CALLER(2) CALLER(3) CALLER(4) CALLER(5) CALLER(6) CALLER(7)
CALLER(8) CALLER(9) CALLER(10) CALLER(11) CALLER(12) CALLER(13) CALLER(14) CALLER(15)

typedef long (*caller_fn)(long);
static caller_fn callers[16] = {
	caller0, caller1, caller2, caller3, caller4, caller5, caller6, caller7,
	caller8, caller9, caller10, caller11, caller12, caller13, caller14, caller15,
};

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000, x = 1;
	struct timespec t0, t1;

	for (int i = 0; i < 16; i++)
		objs[i].refcnt = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i++)
		x = callers[(unsigned long)x >> 60](x);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	long sum = 0;
	for (int i = 0; i < 16; i++)
		sum += objs[i].bytes + objs[i].events + objs[i].refcnt + objs[i].freed;
	printf("ops/s: %.0f\nchecksum: %ld\n", iters / s, sum);
	return 0;
}
