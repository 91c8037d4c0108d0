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
 * most in its size table.  The work is the same on every kernel; nothing
 * reads a clock.
 *
 * Usage: forkexec ROUNDS
 * Prints rounds and a checksum of the children's exit codes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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
	for (long i = 0; i < rounds; i++) {
		sum = sum * 31 + spawn(argv[0], (int)(i & 0x3f), 0);
		sum = sum * 31 + spawn(argv[0], (int)((i + 1) & 0x3f), 1);
		sum = sum * 31 + faults(page);
	}
	printf("rounds: %ld\nchecksum: %lu\n", rounds, sum % 1000000007UL);
	return 0;
}
