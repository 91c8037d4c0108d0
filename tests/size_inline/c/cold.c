/* check() splits into hot and .cold parts at -O2: its DWARF uses DW_AT_ranges
 * (.debug_ranges in DWARF 4, .debug_rnglists in DWARF 5). */
#include <stdio.h>
volatile int sink;
__attribute__((cold, noinline)) void fail(int x) { sink = x; }
static inline __attribute__((always_inline)) void report(int x)
{
	fprintf(stderr, "odd value %d\n", x);
	sink = x;
}
__attribute__((noinline)) int check(int *v, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
		if (v[i] < 0) {
			fail(v[i]);
			report(v[i]);
			report(v[i] + 1);
		}
		s += v[i];
	}
	return s;
}
int main(int argc, char **argv) { int v[4] = {argc, 2, 3, 4}; (void)argv; return check(v, 4); }
