#!/usr/bin/env python3
"""Generate lockbench.c: many call sites of a lock/unlock pair.

The program mimics the mechanism measured when _raw_spin_unlock() is inlined
into the kernel: every call site of ``unlock()`` either calls one out-of-line
copy (``-DUNLOCK_OUTLINE``) or carries its own inlined body.  Inlining removes
a call/ret per unlock (fewer instructions) and adds bytes at every site (a
larger code footprint, more L1i misses once the hot code exceeds the cache).

Usage: gen_lockbench.py SITES > lockbench.c
"""
import sys

HEADER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct lock { volatile int v; int preempt; unsigned long pending; };

static struct lock locks[64];
static unsigned long counters[64];

static inline __attribute__((always_inline)) void lock(struct lock *l)
{
	while (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE))
		;
	l->preempt++;
}

#ifdef UNLOCK_OUTLINE
#define UNLOCK_ATTR __attribute__((noinline))
#else
#define UNLOCK_ATTR static inline __attribute__((always_inline))
#endif

/* A release store plus a preempt_enable()-like tail, as in the kernel. */
UNLOCK_ATTR void unlock(struct lock *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
	if (--l->preempt == 0 && __builtin_expect(l->pending != 0, 0)) {
		l->pending = 0;
		counters[63]++;
	}
}
"""

SITE = r"""
__attribute__((noinline)) static unsigned long site{n}(unsigned long x)
{{
	struct lock *l = &locks[{n} & 63];
	lock(l);
	counters[{n} & 63] += x ^ {mul}u;
	unlock(l);
	x = x * 6364136223846793005ull + {n};
	lock(&locks[(x >> 58) & 63]);
	counters[(x >> 52) & 63] ^= x;
	unlock(&locks[(x >> 58) & 63]);
	return x;
}}
"""

MAIN = r"""
typedef unsigned long (*site_fn)(unsigned long);
static site_fn sites[] = {{ {table} }};

int main(int argc, char **argv)
{{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	unsigned long x = 88172645463325252ull, n = sizeof(sites) / sizeof(sites[0]);
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i++) {{
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		x = sites[x % n](x);
	}}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("checksum: %lu\n", (counters[0] ^ counters[17] ^ x) & 0xffffffffu);
	printf("ops/s: %.0f\n", iters / s);
	return 0;
}}
"""


def main() -> None:
    sites = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    out = [HEADER]
    for n in range(sites):
        out.append(SITE.format(n=n, mul=(n * 2654435761) & 0xFFFFFFFF))
    out.append(MAIN.format(table=", ".join(f"site{n}" for n in range(sites))))
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
