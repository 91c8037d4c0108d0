/* Fixture workload: user-space spinning, page faults and read(2) calls, so
 * that a cpu-clock profile holds both user ([.]) and kernel ([k]) symbols. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noipa)) void spin_user(long n)
{
	unsigned long x = 1;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1;
	sink = x;
}

__attribute__((noipa)) void touch_pages(int rounds)
{
	for (int r = 0; r < rounds; r++) {
		size_t len = 8u << 20;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (size_t off = 0; off < len; off += 4096)
			p[off] = (char)r;
		sink += (unsigned char)p[len - 4096];
		munmap(p, len);
	}
}

__attribute__((noipa)) void read_zero(int n)
{
	char buf[4096];
	int fd = open("/dev/zero", O_RDONLY);
	for (int i = 0; i < n; i++)
		sink += read(fd, buf, sizeof buf);
	close(fd);
}

int main(void)
{
	spin_user(200000000L);
	touch_pages(60);
	read_zero(200000);
	return 0;
}
