/*
 * syscalls: a kernel-heavy bundled workload.  Each iteration makes three
 * cheap system calls (getppid, write to /dev/null, a zero-timeout poll), so
 * most of its CPU time is system time: the kind of workload seed 000 looks
 * for when kernel code size matters.
 *
 * Usage: syscalls ITERATIONS   prints "syscalls/s: N"
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	int fd = open("/dev/null", O_WRONLY);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	struct timespec t0, t1;
	char c = 0;

	if (fd < 0) {
		perror("open /dev/null");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i++) {
		syscall(SYS_getppid);
		if (write(fd, &c, 1) != 1)
			return 1;
		poll(&p, 1, 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("syscalls/s: %.0f\n", 3 * iters / s);
	return 0;
}
