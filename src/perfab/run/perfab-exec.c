/*
 * perfab-exec: a small helper that runs perfab's workloads and services so
 * that each one's rusage is its own and nothing it starts outlives it.
 *
 * Linux folds the memory high-water mark of the process that calls exec
 * into the new program's maxrss, so a workload spawned straight from perfab
 * (a large Python process) would report perfab's peak RSS.  This helper is
 * small, and it is the parent of what perfab runs.  Three modes:
 *
 *   perfab-exec FD                          the fork server (below)
 *   perfab-exec --rusage-out PATH -- ARGV   run ARGV once, write its rusage
 *   perfab-exec --contain -- ARGV           hold ARGV and all it forks
 *
 * The fork server: perfab starts it once, and for every run it vforks a
 * child that execs the workload, so the workload's maxrss is its own and a
 * run costs one exec.  FD is the control socket (AF_UNIX, SOCK_STREAM).
 * One request at a time, native byte order:
 *
 *   request  u32 length, then length bytes: u32 argc, u32 envc,
 *            u32 mask_bytes, the CPU mask (empty: no pinning), then
 *            NUL-terminated strings: cwd (empty: the server's), argv[argc],
 *            env[envc].  The workload's stdout and stderr arrive with it as
 *            two descriptors (SCM_RIGHTS).
 *   replies  nine int64: kind, value, detail, wall_ns, utime_us, stime_us,
 *            maxrss_kb, nvcsw, nivcsw.
 *            STARTED pid        the child runs, leading its own session;
 *            FAILED errno stage nothing runs (chdir, affinity or exec failed);
 *            DONE status        after STARTED: the raw wait status, rusage.
 *
 * The child: setsid, chdir, sched_setaffinity, stdout/stderr from the
 * request (stdin stays /dev/null), execvpe with PATH taken from the
 * request's environment.  The server is a child subreaper
 * (PR_SET_CHILD_SUBREAPER): whatever the workload leaves behind, even in
 * another session, becomes the server's child when its parent dies.  When
 * the workload ends, its process group is killed, the workload is reaped,
 * then every process left below the server is killed and reaped before
 * DONE is sent.  At EOF on the socket (perfab closed it or died) the server
 * kills the run in flight and all it started, and exits.
 *
 * --rusage-out: fork and exec ARGV, wait for it, write one line to PATH
 * ("wall_ns utime_us stime_us maxrss_kb nvcsw nivcsw status", the raw wait
 * status last) and exit as ARGV did: the same exit status, or the same
 * terminating signal raised on itself (without a core dump).  Put between
 * a wrapper (perf stat, a variant's wrap) and the workload, it reports the
 * workload's rusage rather than the wrapper's.
 *
 * --contain: a child subreaper that execs ARGV in a child and reaps all it
 * forks.  SIGTERM, SIGINT and SIGHUP are passed to every process below it;
 * SIGUSR1 kills them all.  When ARGV's process ends, everything left below
 * is killed and perfab-exec exits as ARGV did.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (256 << 20)

static int control = -1;

enum { STARTED = 1, FAILED = 2, DONE = 3 };
enum { STAGE_EXEC = 1, STAGE_CHDIR = 2, STAGE_AFFINITY = 3, STAGE_FDS = 4 };

struct run {
	char *cwd;		/* "" keeps the server's */
	char **argv;
	char **envp;
	void *mask;		/* NULL: no pinning */
	size_t mask_bytes;
	int out, err;		/* the workload's stdout and stderr */
};

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The process whose wait status reap() keeps (--contain's ARGV), and that status; -1 until it is reaped. */
static pid_t watched;
static int watched_status = -1;

static pid_t reap(pid_t pid, int flags)
{
	int status;
	pid_t got;

	while ((got = waitpid(pid, &status, flags)) < 0 && errno == EINTR)
		;
	if (got > 0 && got == watched)
		watched_status = status;
	return got;
}

static int grow(pid_t **pid, pid_t **ppid, char **state, size_t *cap)
{
	size_t more = *cap ? 2 * *cap : 256;
	void *p;

	if (!(p = realloc(*pid, more * sizeof(**pid))))
		return -1;
	*pid = p;
	if (!(p = realloc(*ppid, more * sizeof(**ppid))))
		return -1;
	*ppid = p;
	if (!(p = realloc(*state, more)))
		return -1;
	*state = p;
	*cap = more;
	return 0;
}

static void swap(pid_t *pid, pid_t *ppid, char *state, size_t a, size_t b)
{
	pid_t p = pid[a], pp = ppid[a];
	char s = state[a];

	pid[a] = pid[b], ppid[a] = ppid[b], state[a] = state[b];
	pid[b] = p, ppid[b] = pp, state[b] = s;
}

/* The parent of process `pid` and its state letter, from /proc/PID/stat; -1 if it is gone. */
static pid_t parent_of(const char *pid, char *state)
{
	char path[64], buf[512], *p;
	int fd, pp = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the command name may hold anything */
	if (!p || sscanf(p + 1, " %c %d", state, &pp) != 2)
		return -1;
	return pp;
}

/*
 * Every live process below this one (zombies left out): pids into *below
 * and their parents into *parent (malloc'ed), from one pass over /proc.
 * The count; -1 without /proc.
 */
static int descendants(pid_t **below, pid_t **parent)
{
	pid_t *pid = NULL, *ppid = NULL, self = getpid();
	char *state = NULL;
	size_t n = 0, cap = 0, i, j, found = 0, live = 0;
	struct dirent *e;
	DIR *d = opendir("/proc");
	int grew = 1;

	*below = *parent = NULL;
	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (n == cap && grow(&pid, &ppid, &state, &cap) < 0)
			break;
		pid[n] = (pid_t)atoi(e->d_name);
		ppid[n] = parent_of(e->d_name, &state[n]);
		if (ppid[n] > 0)
			n++;
	}
	closedir(d);
	/* Move the descendants to the front, parents first, until a pass finds no more. */
	while (grew) {
		grew = 0;
		for (i = found; i < n; i++) {
			int below_us = ppid[i] == self;

			for (j = 0; j < found && !below_us; j++)
				below_us = ppid[i] == pid[j];
			if (below_us) {
				swap(pid, ppid, state, i, found++);
				grew = 1;
			}
		}
	}
	for (i = 0; i < found; i++)
		if (state[i] != 'Z')
			swap(pid, ppid, state, i, live++);
	free(state);
	*below = pid;
	*parent = ppid;
	return (int)live;
}

/* Send `sig` to every process below this one. */
static void signal_tree(int sig)
{
	pid_t *below, *parent;
	int i, n = descendants(&below, &parent);

	for (i = 0; i < n; i++)
		kill(below[i], sig);
	free(below);
	free(parent);
}

/*
 * Kill every process below this one and reap them, until none is left.  A
 * killed process's children become ours (we are a subreaper): the next pass
 * finds them.  One we may not signal (a setuid program) is left alone.
 * With no child at all it costs one system call.
 */
static void kill_tree(void)
{
	pid_t *below, *parent, self = getpid();
	int i, n, killed;

	if (reap(-1, WNOHANG) < 0 && errno == ECHILD)
		return;
	do {
		n = descendants(&below, &parent);
		for (i = killed = 0; i < n; i++)
			if (kill(below[i], SIGKILL) == 0)
				killed++;
			else
				below[i] = 0;
		for (i = 0; i < n; i++)
			if (below[i] && parent[i] == self)
				reap(below[i], 0);
		free(below);
		free(parent);
		while (reap(-1, WNOHANG) > 0)	/* zombies, ours now or already */
			;
	} while (killed > 0);
}

static void reply(pid_t running, int64_t kind, int64_t value, int64_t detail, long long wall_ns,
		  const struct rusage *ru)
{
	int64_t r[9] = { kind, value, detail, wall_ns };

	if (ru) {
		r[4] = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
		r[5] = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
		r[6] = ru->ru_maxrss;
		r[7] = ru->ru_nvcsw;
		r[8] = ru->ru_nivcsw;
	}
	if (send(control, r, sizeof(r), MSG_NOSIGNAL) == (ssize_t)sizeof(r))
		return;
	if (running > 0)	/* perfab is gone: so is its run */
		killpg(running, SIGKILL);
	kill_tree();
	_exit(0);
}

static int read_full(char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(control, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The request's length and its two descriptors; 0 at EOF. */
static int read_header(uint32_t *len, int fds[2])
{
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = { len, sizeof(*len) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;

	do
		n = recvmsg(control, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		return 0;
	memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
	if (n < (ssize_t)sizeof(*len) && read_full((char *)len + n, sizeof(*len) - n) < 0)
		return 0;
	return 1;
}

/* Split the request body into r's fields; pointers into body.  -1 if malformed. */
static int parse(char *body, uint32_t len, struct run *r)
{
	uint32_t head[3], i, count;
	char *p = body + sizeof(head), *end = body + len;

	if (len < sizeof(head))
		return -1;
	memcpy(head, body, sizeof(head));
	if (head[0] == 0 || head[0] > len || head[1] > len || head[2] > (uint32_t)(end - p))
		return -1;
	r->mask_bytes = head[2];
	r->mask = head[2] ? p : NULL;
	p += head[2];
	r->argv = calloc((size_t)head[0] + head[1] + 2, sizeof(char *));
	if (!r->argv)
		return -1;
	r->envp = r->argv + head[0] + 1;
	count = 1 + head[0] + head[1];
	for (i = 0; i < count; i++) {
		char *s = p, *nul = memchr(p, 0, (size_t)(end - p));

		if (!nul)
			return -1;
		p = nul + 1;
		if (i == 0)
			r->cwd = s;
		else if (i <= head[0])
			r->argv[i - 1] = s;
		else
			r->envp[i - 1 - head[0]] = s;
	}
	return 0;
}

/* execvpe searches the server's own PATH: make it the request's. */
static void use_path_of(char **envp)
{
	for (; *envp; envp++)
		if (strncmp(*envp, "PATH=", 5) == 0) {
			setenv("PATH", *envp + 5, 1);
			return;
		}
	unsetenv("PATH");	/* execvpe then searches the default path */
}

static void fail(int pipe_w, int stage)
{
	int e[2] = { errno, stage };

	if (write(pipe_w, e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* In the vforked child: only system calls, then exec or _exit. */
static void child(const struct run *r, int pipe_w)
{
	if (setsid() < 0)
		fail(pipe_w, STAGE_FDS);
	if (r->cwd[0] && chdir(r->cwd) < 0)
		fail(pipe_w, STAGE_CHDIR);
	if (r->mask && sched_setaffinity(0, r->mask_bytes, r->mask) < 0)
		fail(pipe_w, STAGE_AFFINITY);
	if (dup2(r->out, 1) < 0 || dup2(r->err, 2) < 0)
		fail(pipe_w, STAGE_FDS);
	execvpe(r->argv[0], r->argv, r->envp);
	fail(pipe_w, STAGE_EXEC);
}

/*
 * Sleep until the child exits; at EOF on the control socket kill its group
 * and exit.  Without pidfds, sleep in waitid alone.  The child is left a
 * zombie, so its process group can still be killed by its id.
 */
static void await_exit(pid_t pid)
{
#ifdef SYS_pidfd_open
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);	/* Linux 5.3 */
#else
	int pidfd = -1;
#endif
	struct pollfd p[2] = { { pidfd, POLLIN, 0 }, { control, POLLRDHUP, 0 } };
	siginfo_t info;

	while (pidfd >= 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			killpg(pid, SIGKILL);
			kill_tree();
			_exit(0);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
}

static void run(struct run *r)
{
	int errpipe[2], e[2], status;
	struct rusage ru;
	long long start, wall;
	pid_t pid;

	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		close(r->out);
		close(r->err);
		reply(0, FAILED, errno, STAGE_FDS, 0, NULL);
		return;
	}
	use_path_of(r->envp);
	start = now_ns();
	pid = vfork();
	if (pid == 0)
		child(r, errpipe[1]);
	e[0] = errno;
	close(errpipe[1]);
	close(r->out);	/* the child has its own copies, or is gone: closed before any reply */
	close(r->err);
	r->out = r->err = -1;
	if (pid < 0) {
		close(errpipe[0]);
		reply(0, FAILED, e[0], STAGE_FDS, 0, NULL);
		return;
	}
	if (read(errpipe[0], e, sizeof(e)) == (ssize_t)sizeof(e)) {
		close(errpipe[0]);
		waitpid(pid, NULL, 0);
		reply(0, FAILED, e[0], e[1], 0, NULL);
		return;
	}
	close(errpipe[0]);
	reply(pid, STARTED, pid, 0, 0, NULL);
	await_exit(pid);
	wall = now_ns() - start;
	killpg(pid, SIGKILL);	/* leftovers would disturb the next run and hold its pipes */
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			_exit(125);
	kill_tree();		/* and those that left the process group */
	reply(0, DONE, status, 0, wall, &ru);
}

/*
 * The kernel's struct sigaction, for the signals glibc keeps for itself
 * (32 and 33: its signal() refuses them, yet an ignored disposition
 * inherited from whoever started this server would pass to every workload).
 */
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

/* Signals at their defaults and none blocked, inherited as such by every workload. */
static void reset_signals(void)
{
	struct kernel_sigaction dfl = { SIG_DFL, 0, NULL, 0 };
	sigset_t none;
	int sig;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		if (signal(sig, SIG_DFL) == SIG_ERR && sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

static void setup(void)
{
	int fd;

	reset_signals();
	prctl(PR_SET_CHILD_SUBREAPER, 1);	/* what a workload leaves behind stays ours to kill */
	fcntl(control, F_SETFD, FD_CLOEXEC);	/* workloads never see it */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;	/* 0, 1 and 2 open: received descriptors never land on them */
	if (fd > 2)
		close(fd);
}

/*
 * vfork and exec argv (searching PATH) with signal mask `mask` and SIGCHLD
 * ignored if `ignore_chld`; the pid, or -1 with exec's errno.
 */
static pid_t spawn(char **argv, const sigset_t *mask, int ignore_chld)
{
	int p[2], e;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = vfork();
	if (pid == 0) {
		int why;

		sigprocmask(SIG_SETMASK, mask, NULL);
		if (ignore_chld)
			signal(SIGCHLD, SIG_IGN);
		execvp(argv[0], argv);
		why = errno;
		if (write(p[1], &why, sizeof(why)) < 0)
			_exit(127);
		_exit(127);
	}
	e = errno;
	close(p[1]);
	if (pid > 0 && read(p[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	errno = e;
	return pid;
}

/* Exit as a process with wait status `status` did: its exit code, or its signal (no core dump). */
static void exit_like(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		struct rlimit none = { 0, 0 };
		sigset_t only;

		prctl(PR_SET_DUMPABLE, 0);	/* a core of this helper would say nothing */
		setrlimit(RLIMIT_CORE, &none);
		signal(sig, SIG_DFL);
		sigemptyset(&only);
		sigaddset(&only, sig);
		sigprocmask(SIG_UNBLOCK, &only, NULL);
		kill(getpid(), sig);
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

static int cannot_execute(const char *program)
{
	fprintf(stderr, "perfab-exec: cannot execute '%s': %s\n", program, strerror(errno));
	return 127;
}

/* --rusage-out PATH -- ARGV: run ARGV, write its rusage to PATH, exit as it did. */
static int rusage_out(const char *path, char **argv)
{
	struct sigaction old;
	struct rusage ru;
	sigset_t mask;
	long long start, wall;
	int status, fd;
	pid_t pid;

	sigaction(SIGCHLD, NULL, &old);	/* inherited ignored, it would leave nothing to wait for */
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_SETMASK, NULL, &mask);
	start = now_ns();
	pid = spawn(argv, &mask, old.sa_handler == SIG_IGN);
	if (pid < 0)
		return cannot_execute(argv[0]);
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			return 125;
	wall = now_ns() - start;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || dprintf(fd, "%lld %lld %lld %ld %ld %ld %d\n", wall,
			      (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
			      (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
			      ru.ru_maxrss, ru.ru_nvcsw, ru.ru_nivcsw, status) < 0)
		fprintf(stderr, "perfab-exec: cannot write %s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	exit_like(status);
	return 125;
}

/* --contain -- ARGV: run ARGV holding all it forks; see the top of this file. */
static int contain(char **argv)
{
	sigset_t wanted, none;
	int sig;

	reset_signals();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sigemptyset(&none);
	sigemptyset(&wanted);
	sigaddset(&wanted, SIGCHLD);
	sigaddset(&wanted, SIGTERM);
	sigaddset(&wanted, SIGINT);
	sigaddset(&wanted, SIGHUP);
	sigaddset(&wanted, SIGUSR1);
	sigprocmask(SIG_BLOCK, &wanted, NULL);
	watched = spawn(argv, &none, 0);
	if (watched < 0)
		return cannot_execute(argv[0]);
	for (;;) {
		sig = sigwaitinfo(&wanted, NULL);
		if (sig == SIGCHLD)
			while (reap(-1, WNOHANG) > 0)
				;
		else if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
			signal_tree(sig);
		if (watched_status >= 0 || sig == SIGUSR1) {
			kill_tree();
			exit_like(watched_status >= 0 ? watched_status : SIGKILL);
		}
	}
}

int main(int argc, char **argv)
{
	struct run r;
	uint32_t len;
	int fds[2];
	char *body;

	if (argc >= 5 && strcmp(argv[1], "--rusage-out") == 0 && strcmp(argv[3], "--") == 0)
		return rusage_out(argv[2], argv + 4);
	if (argc >= 4 && strcmp(argv[1], "--contain") == 0 && strcmp(argv[2], "--") == 0)
		return contain(argv + 3);
	if (argc != 2) {
		fprintf(stderr, "usage: perfab-exec FD | --rusage-out PATH -- ARGV... | --contain -- ARGV...\n");
		return 2;
	}
	control = atoi(argv[1]);
	setup();
	while (read_header(&len, fds)) {
		memset(&r, 0, sizeof(r));
		r.out = fds[0];
		r.err = fds[1];
		body = len <= MAX_REQUEST ? malloc((size_t)len + 1) : NULL;
		if (!body || read_full(body, len) < 0)
			return 1;
		if (parse(body, len, &r) == 0) {
			run(&r);
		} else {
			close(r.out);
			close(r.err);
			reply(0, FAILED, EINVAL, STAGE_FDS, 0, NULL);
		}
		free(r.argv);
		free(body);
	}
	return 0;
}
