/*
 * forkexec: lmbench-like process work for kernel study 001, a fixed count.
 *
 * One round:
 *   fork + exit + wait                  copy_process, exit, the atomics of
 *                                       mm, files, signal and cred refcounts
 *   fork + execve(self, "child") + wait the same plus exec's mm teardown
 *   page faults on 64 fresh pages       fault path, page refcounts
 *
 * These are the paths the seed's lmbench numbers moved (fork+exit,
 * fork+execve, page faults), and copy_process() is the function that grew
 * most in its size table.  The work is the same on every kernel.  Each
 * phase is timed on CLOCK_MONOTONIC, as lmbench's lat_proc reports it: in
 * a TCG guest with -icount that clock is emulated time, a function of the
 * instructions run.
 *
 * Usage: forkexec ROUNDS
 * Prints rounds, a checksum of the children's exit codes, and the mean
 * microseconds of one fork+exit, one fork+execve and one 64-page fault run.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAULT_PAGES 64

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Fork a child that runs `child` (or execs this program with "child"); its exit code. */
static int spawn(const char *self, int code, int exec)
{
	pid_t pid = fork();
	if (pid < 0)
		die("forkexec: fork");
	if (pid == 0) {
		if (exec) {
			char arg[16];
			snprintf(arg, sizeof(arg), "%d", code);
			execl(self, self, "child", arg, (char *)NULL);
			_exit(127);
		}
		_exit(code);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		die("forkexec: waitpid");
	return WEXITSTATUS(status);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Touch FAULT_PAGES fresh anonymous pages; returns the bytes read back. */
static long faults(long page)
{
	char *p = mmap(NULL, FAULT_PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("forkexec: mmap");
	long sum = 0;
	for (int i = 0; i < FAULT_PAGES; i++) {
		p[i * page] = (char)i;
		sum += p[i * page];
	}
	munmap(p, FAULT_PAGES * page);
	return sum;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return atoi(argv[2]) & 0x7f;
	if (argc != 2) {
		fprintf(stderr, "usage: forkexec ROUNDS\n");
		return 2;
	}
	long rounds = atol(argv[1]);
	if (rounds < 1) {
		fprintf(stderr, "forkexec: ROUNDS must be at least 1\n");
		return 2;
	}
	long page = sysconf(_SC_PAGESIZE);
	unsigned long sum = 0;
	double us[3] = {0, 0, 0}; /* fork+exit, fork+execve, faults */
	for (long i = 0; i < rounds; i++) {
		double t0 = now_us();
		sum = sum * 31 + spawn(argv[0], (int)(i & 0x3f), 0);
		double t1 = now_us();
		sum = sum * 31 + spawn(argv[0], (int)((i + 1) & 0x3f), 1);
		double t2 = now_us();
		sum = sum * 31 + faults(page);
		double t3 = now_us();
		us[0] += t1 - t0;
		us[1] += t2 - t1;
		us[2] += t3 - t2;
	}
	printf("rounds: %ld\nchecksum: %lu\n", rounds, sum % 1000000007UL);
	printf("fork_exit_us: %.2f\nfork_execve_us: %.2f\nfaults64_us: %.2f\n", us[0] / rounds, us[1] / rounds,
	       us[2] / rounds);
	return 0;
}
