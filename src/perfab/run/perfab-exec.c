/*
 * perfab-exec: run one command from a small process and report its rusage.
 *
 * Linux folds the memory high-water mark of the process that calls exec
 * into the new program's maxrss, so a workload spawned straight from
 * perfab (a large Python process) would report perfab's peak RSS.  This
 * program is small: it vforks, the child execs the workload, and the
 * parent reports the child's own rusage and wall time on the file
 * descriptor named by its first argument, then exits as the child did.
 *
 * Usage: perfab-exec FD PROGRAM [ARG...]
 * Writes: "wall_ns utime_us stime_us maxrss_kb nvcsw nivcsw\n" on FD, or
 *         "exec ERRNO\n" when PROGRAM cannot be executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int report, errpipe[2], err = 0, status;
	struct rusage ru;
	long long start, wall;
	pid_t pid;

	if (argc < 3)
		return 125;
	report = atoi(argv[1]);
	if (pipe2(errpipe, O_CLOEXEC) < 0 || fcntl(report, F_SETFD, FD_CLOEXEC) < 0)
		return 125;
	start = now_ns();
	pid = vfork();	/* the child only execs or reports exec's errno and exits */
	if (pid < 0)
		return 125;
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		err = errno;
		if (write(errpipe[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(errpipe[1]);
	if (read(errpipe[0], &err, sizeof(err)) == sizeof(err)) {
		dprintf(report, "exec %d\n", err);
		waitpid(pid, &status, 0);
		return 127;
	}
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			return 125;
	wall = now_ns() - start;
	dprintf(report, "%lld %lld %lld %ld %ld %ld\n", wall,
		(long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		(long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
		ru.ru_maxrss, ru.ru_nvcsw, ru.ru_nivcsw);
	if (WIFSIGNALED(status)) {
		struct rlimit none = { 0, 0 };

		setrlimit(RLIMIT_CORE, &none);	/* the workload already dumped its core, if any */
		signal(WTERMSIG(status), SIG_DFL);
		kill(getpid(), WTERMSIG(status));
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}
