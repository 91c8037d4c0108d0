/*
 * lockpath: the spinlock path three ways, as in the paravirt spinlock regression.
 *
 *   direct    every site calls spin_lock()/spin_unlock(), out of line:
 *             call -> locked op -> ret (a native kernel's _spin_lock).
 *   indirect  every site calls _spin_lock(), which calls the lock through a
 *             function pointer in an ops table (pv_lock_ops.spin_lock):
 *             call -> indirect call -> locked op -> ret -> ret.
 *   inline    the lock and unlock bodies are inlined at every site: no call.
 *
 * Build with -DLOCKPATH_DIRECT, -DLOCKPATH_INDIRECT or -DLOCKPATH_INLINE.
 * The sites are many distinct functions, as a kernel's lock sites are, so
 * the returns of a shared lock function go back to many places.
 *
 * Usage: lockpath ITERATIONS   (lock/unlock pairs, rounded up to 64; prints ops/s)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct spinlock { int locked; };

#define ALWAYS static inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))

ALWAYS void arch_spin_lock(struct spinlock *l)
{
	while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

ALWAYS void arch_spin_unlock(struct spinlock *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#if defined(LOCKPATH_INLINE)
ALWAYS void spin_lock(struct spinlock *l) { arch_spin_lock(l); }
ALWAYS void spin_unlock(struct spinlock *l) { arch_spin_unlock(l); }
#elif defined(LOCKPATH_DIRECT)
NOINLINE void spin_lock(struct spinlock *l) { arch_spin_lock(l); }
NOINLINE void spin_unlock(struct spinlock *l) { arch_spin_unlock(l); }
#elif defined(LOCKPATH_INDIRECT)
NOINLINE static void native_spin_lock(struct spinlock *l) { arch_spin_lock(l); }
NOINLINE static void native_spin_unlock(struct spinlock *l) { arch_spin_unlock(l); }

/* Filled at run time so the compiler cannot turn the calls into direct ones. */
struct pv_lock_ops {
	void (*spin_lock)(struct spinlock *);
	void (*spin_unlock)(struct spinlock *);
} pv_lock_ops;

NOINLINE void spin_lock(struct spinlock *l) { pv_lock_ops.spin_lock(l); }
NOINLINE void spin_unlock(struct spinlock *l) { pv_lock_ops.spin_unlock(l); }
#else
#error "build with -DLOCKPATH_DIRECT, -DLOCKPATH_INDIRECT or -DLOCKPATH_INLINE"
#endif

static struct spinlock locks[8];
static unsigned long counts[8];

/* A site: take a lock, update what it protects, release it. */
#define SITE(n) \
	NOINLINE static unsigned long site##n(unsigned long x) \
	{ \
		struct spinlock *l = &locks[(x >> 7) & 7]; \
		spin_lock(l); \
		counts[(x >> 7) & 7] += x ^ n; \
		spin_unlock(l); \
		return x * 6364136223846793005ul + 1442695040888963407ul + n; \
	}
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4) SITES8(5) SITES8(6) SITES8(7) SITES8(8)

/* One pass calls every site once, in a fixed order: direct calls only, so
 * every indirect branch and every mispredict counted comes from the lock path. */
#define CALL8(a) x = site##a##0(x); x = site##a##1(x); x = site##a##2(x); x = site##a##3(x); \
	x = site##a##4(x); x = site##a##5(x); x = site##a##6(x); x = site##a##7(x);
NOINLINE static unsigned long pass(unsigned long x)
{
	CALL8(1) CALL8(2) CALL8(3) CALL8(4) CALL8(5) CALL8(6) CALL8(7) CALL8(8)
	return x;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	unsigned long x = 88172645463325252ul, sum = 0;
	struct timespec t0, t1;

#ifdef LOCKPATH_INDIRECT
	pv_lock_ops.spin_lock = native_spin_lock;
	pv_lock_ops.spin_unlock = native_spin_unlock;
#endif
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i += 64)
		x = pass(x);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (int i = 0; i < 8; i++)
		sum += counts[i];
	printf("ops/s: %.0f\nchecksum: %lu\n", (iters + 63) / 64 * 64 / s, sum);
	return 0;
}
