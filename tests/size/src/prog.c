/* Test program for perfab size: built twice, with -DOLD and without.
 * Each function below changes between the two builds in one known way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OLD
#define ONCE_ATTR __attribute__((noinline))
#define BUMP_ATTR __attribute__((noipa))
#define TAG_ATTR __attribute__((noipa))
#define MIX_ATTR inline
#else
#define ONCE_ATTR
#define BUMP_ATTR inline __attribute__((always_inline))
#define TAG_ATTR __attribute__((noinline))
#define MIX_ATTR __attribute__((noinline))
#endif

struct big { int a[16]; long tag; };
struct ctx { int ready; int n; int *v; long acc; };
int counter;
int helper_util(int x);
void log_error(const char *fmt, ...) __attribute__((cold));

/* once-called static: out of line in OLD, inlined into its only caller in NEW */
static ONCE_ATTR int once(int x)
{
	int r = 0;
	for (int i = 0; i < x; i++)
		r += i * x ^ (r >> 2);
	return r;
}

int run_once(int x) { return once(x) + 1; }

/* a small function with a locking instruction: out of line in OLD, inlined at 3 sites in NEW */
static BUMP_ATTR int bump(int *p)
{
	return __atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST);
}

int use_bump(void) { return bump(&counter) + bump(&counter) * 2 + bump(&counter) * 3; }

/* IPA-SRA: get_tag in OLD (noipa), get_tag.isra.0 in NEW */
static TAG_ATTR long get_tag(struct big *b)
{
	return b->tag * 3 + b->a[1];
}

long use_tag(struct big *x, struct big *y) { return get_tag(x) + get_tag(y) * 2; }

/* IPA-CP: scale with a variable k in OLD, always k = 10 in NEW -> scale.constprop.0 */
static __attribute__((noinline)) int scale(int x, int k)
{
	int s = 0;
	for (int i = 0; i < k; i++)
		s += x * i ^ (s >> 3);
	return s;
}

int use_scale(int x, int k)
{
#ifdef OLD
	return scale(x, k) + scale(x + 1, k);
#else
	(void)k;
	return scale(x, 10) + scale(x + 1, 10);
#endif
}

/* partial inlining: the cheap early exit is inlined, the body stays as process.part.0 */
static
#ifdef OLD
__attribute__((noinline))
#endif
void process(struct ctx *c)
{
	if (c->ready)
		return;
	for (int i = 0; i < c->n; i++) {
		c->acc += c->v[i] * (long)i;
		if (c->acc > 1000000) printf("big %d %ld\n", i, c->acc);
		if (c->acc < -1000000) printf("small %d %ld\n", i, c->acc);
		c->v[i] ^= (int)(c->acc >> 3);
	}
	c->ready = 1;
}

int run(struct ctx *a, struct ctx *b, struct ctx *d)
{
	process(a); process(b); process(d);
	return (int)(a->acc + b->acc + d->acc);
}

/* hot/cold split: the error path only exists in NEW, in sum.cold */
int sum(const int *v, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
#ifndef OLD
		if (v[i] < 0) {
			log_error("sum: bad value %d at %d of %d\n", v[i], i, n);
			log_error("sum: giving up\n");
			abort();
		}
#endif
		s += v[i] * i;
	}
	return s;
}

/* inlined at 2 sites in OLD, out of line in NEW */
static MIX_ATTR int mix(int a, int b)
{
	int h = a;
	for (int i = 0; i < b; i++)
		h = h * 31 + (b ^ i);
	return h;
}

int use_mix(int a, int b) { return mix(a, b) + mix(b, a); }

#ifdef OLD
int legacy(int x) { return x * 7 + helper_util(x); }
#else
int fresh(int x) { return x * 11 - helper_util(x) + helper_util(x + 1); }
#endif

/* body change: NEW does more work */
int report(const int *v, int n)
{
	long t = 0;
	for (int i = 0; i < n; i++)
		t += v[i];
#ifndef OLD
	for (int i = 0; i < n; i++)
		t ^= (long)v[i] << (i & 7);
#endif
	return (int)t;
}

/* same name as util.c's helper: kept apart by source file */
static __attribute__((noipa)) int helper(int x) { return x + 1; }

int main(int argc, char **argv)
{
	int v[4] = {argc, 2, 3, 4};
	struct big b1 = {.tag = argc}, b2 = {.tag = 2};
	struct ctx c = {0, 4, v, 0};
	long r = run_once(argc) + use_bump() + use_tag(&b1, &b2) + use_scale(argc, 10);
	r += run(&c, &c, &c) + sum(v, 4) + use_mix(argc, 3) + report(v, 4) + helper(argc);
#ifdef OLD
	r += legacy(argc);
#else
	r += fresh(argc);
#endif
	(void)argv;
	return (int)(r & 1);
}
