/* A static inline helper called from exactly 7 sites in 3 functions;
 * -DHELPER_OUTLINE keeps it out of line (the "before" of a diff). */
volatile int sink;

#ifdef HELPER_OUTLINE
#define HELPER_KIND __attribute__((noinline))
#else
#define HELPER_KIND inline __attribute__((always_inline))
#endif

static HELPER_KIND void helper(int x)
{
	sink = (x * 31) ^ (x >> 3);
	sink = sink + x;
}

__attribute__((noinline)) void one(int a)
{
	helper(a);
	helper(a + 11);
}

__attribute__((noinline)) void two(int a)
{
	helper(a * 3);
	helper(a - 5);
	helper(a ^ 9);
}

__attribute__((noinline)) void three(int a)
{
	helper(a << 2);
	helper(a | 1);
}

int main(int argc, char **argv)
{
	(void)argv;
	one(argc);
	two(argc);
	three(argc);
	return 0;
}
