/* outer_a inlines mid_b, which inlines inner_c: one chain in top(). */
volatile int sink;

static inline __attribute__((always_inline)) int inner_c(int x)
{
	sink = x * 7;
	sink = sink ^ x;
	return x + 1;
}

static inline __attribute__((always_inline)) int mid_b(int x)
{
	sink = x ^ 5;
	return inner_c(x * 3) + sink;
}

static inline __attribute__((always_inline)) int outer_a(int x)
{
	sink = x + 9;
	return mid_b(x) * 2 + sink;
}

__attribute__((noinline)) int top(int x)
{
	return outer_a(x);
}

int main(int argc, char **argv)
{
	(void)argv;
	return top(argc) & 1;
}
