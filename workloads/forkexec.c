/*
 * forkexec: process creation latency in lmbench's manner (lat_proc).
 *
 *   forkexec [-n ROUNDS] [MODE...]     MODE: exit, execve, sh (default: all three)
 *
 * Each mode is timed over ROUNDS repetitions (default 200) after one
 * unmeasured round, and printed as lmbench prints it, the mean in
 * microseconds of CLOCK_MONOTONIC:
 *
 *   Process fork+exit: 123.4567 microseconds
 *   Process fork+execve: 456.7890 microseconds
 *   Process fork+/bin/sh -c: 1234.5678 microseconds
 *
 * fork+exit: the child exits at once.  fork+execve: the child executes
 * this program again with the argument "--child", which exits at once.
 * fork+/bin/sh -c: the child runs "/bin/sh -c 'PROGRAM --child'".  The work
 * is a fixed count, so in a guest whose counts repeat (one vCPU under
 * perfab's TCG plugin) the instructions are those of exactly ROUNDS
 * creations; the times are the guest's clock.  "rounds: N" is printed last.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *self;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One process created, run and reaped in `mode`. */
static void once(const char *mode)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("forkexec: fork");
		exit(1);
	}
	if (pid == 0) {
		if (!strcmp(mode, "execve"))
			execl(self, self, "--child", (char *)NULL);
		else if (!strcmp(mode, "sh")) {
			char cmd[4096];
			snprintf(cmd, sizeof(cmd), "%s --child", self);
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		} else
			_exit(0);
		perror("forkexec: exec");
		_exit(1);
	}
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "forkexec: the %s child failed\n", mode);
		exit(1);
	}
}

static void measure(const char *mode, long rounds)
{
	static const struct { const char *mode, *label; } labels[] = {
		{"exit", "fork+exit"}, {"execve", "fork+execve"}, {"sh", "fork+/bin/sh -c"}};
	const char *label = NULL;
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		if (!strcmp(labels[i].mode, mode))
			label = labels[i].label;
	if (!label) {
		fprintf(stderr, "forkexec: unknown mode %s (use exit, execve, sh)\n", mode);
		exit(2);
	}
	once(mode);
	double t0 = now_us();
	for (long i = 0; i < rounds; i++)
		once(mode);
	printf("Process %s: %.4f microseconds\n", label, (now_us() - t0) / rounds);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--child"))
		return 0;
	self = argv[0];
	long rounds = 200;
	int first = 1;
	if (argc > 2 && !strcmp(argv[1], "-n")) {
		rounds = atol(argv[2]);
		first = 3;
	}
	if (rounds < 1) {
		fprintf(stderr, "usage: forkexec [-n ROUNDS] [exit|execve|sh ...]\n");
		return 2;
	}
	if (first >= argc) {
		measure("exit", rounds);
		measure("execve", rounds);
		measure("sh", rounds);
	} else {
		for (int i = first; i < argc; i++)
			measure(argv[i], rounds);
	}
	printf("rounds: %ld\n", rounds);
	return 0;
}
