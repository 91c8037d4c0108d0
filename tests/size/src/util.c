/* Second translation unit: a static with the same name as prog.c's. */
#include <stdarg.h>
#include <stdio.h>

static __attribute__((noipa)) int helper(int x)
{
#ifdef OLD
	return x * 2;
#else
	return x * 2 + (x >> 3) * 5 - (x & 3);
#endif
}

int helper_util(int x) { return helper(x) + 3; }

void log_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
