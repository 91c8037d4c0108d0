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
 * A run is one request and one reply, native byte order:
 *
 *   request  u32 length, then length bytes: u32 argc, u32 envc,
 *            u32 mask_bytes, u32 cap_bytes, u32 tail_bytes, u32 0,
 *            i64 timeout_ns (0: none), i64 grace_ns, the CPU mask (empty:
 *            no pinning), then NUL-terminated strings: cwd (empty: the
 *            server's), argv[argc], env[envc].
 *   kill     u32 0xffffffff alone: kill the run in flight (perfab's second
 *            ^C); one that arrives between runs is skipped.
 *   reply    REPLY_FIELDS int64, then the bytes three of them count:
 *            kind, value, detail     FAILED errno stage: nothing ran (chdir,
 *                                    affinity or exec failed); DONE status
 *                                    (the raw wait status), detail 0;
 *            wall_ns, utime_us, stime_us, maxrss_kb, nvcsw, nivcsw;
 *            timed_out               killed at timeout_ns;
 *            out_total, err_total    bytes the workload wrote to each;
 *            out_kept, err_kept      the first cap_bytes of each, following;
 *            err_tail                stderr's last tail_bytes, following,
 *                                    sent only when stderr was cut;
 *            harness_ns              CPU time of perfab and this server over
 *                                    the window (-1: perfab's unreadable);
 *            stat_before[8], stat_after[8]  /proc/stat's aggregate cpu line
 *                                    (user nice system idle iowait irq
 *                                    softirq steal, ticks) at the window's
 *                                    ends: before the vfork and after the
 *                                    reap (-1: unreadable).
 *
 * The child: setsid, chdir, sched_setaffinity, stdout and stderr on pipes
 * the server reads (stdin stays /dev/null), execvpe with PATH taken from
 * the request's environment.  While it runs the server keeps the first
 * cap_bytes of each stream and counts the rest, and kills its process
 * group at the timeout; perfab sleeps in one recv.  The server is a child
 * subreaper (PR_SET_CHILD_SUBREAPER): whatever the workload leaves behind,
 * even in another session, becomes the server's child when its parent
 * dies.  When the workload ends, its process group is killed, the workload
 * is reaped, then every process left below the server is killed and
 * reaped; the pipes are read for at most grace_ns more (a writer that
 * escaped cannot hold the reply) before DONE is sent.  At EOF on the
 * socket (perfab closed it or died) the server kills the run in flight and
 * all it started, and exits.
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
#define KILL_RUN 0xffffffffu
#define STAT_FIELDS 8

static int control = -1;
static int stat_fd = -1;		/* /proc/stat, kept open: one pread per reading */
static clockid_t perfab_clock;		/* perfab's CPU-time clock (it started this server) */
static int perfab_clock_ok;

enum { FAILED = 2, DONE = 3 };
enum { STAGE_EXEC = 1, STAGE_CHDIR = 2, STAGE_AFFINITY = 3, STAGE_FDS = 4 };
enum { R_KIND, R_VALUE, R_DETAIL, R_WALL, R_UTIME, R_STIME, R_MAXRSS, R_NVCSW, R_NIVCSW, R_TIMED_OUT,
       R_OUT_TOTAL, R_ERR_TOTAL, R_OUT_KEPT, R_ERR_KEPT, R_ERR_TAIL, R_HARNESS, R_STAT_BEFORE,
       R_STAT_AFTER = R_STAT_BEFORE + STAT_FIELDS, REPLY_FIELDS = R_STAT_AFTER + STAT_FIELDS };

struct run {
	char *cwd;		/* "" keeps the server's */
	char **argv;
	char **envp;
	void *mask;		/* NULL: no pinning */
	size_t mask_bytes;
	uint32_t cap;		/* bytes of each stream kept */
	uint32_t tail;		/* bytes of stderr's end kept */
	long long timeout_ns;	/* 0: none */
	long long grace_ns;	/* how long the pipes are read after the reap */
};

/* One of the workload's output pipes as the server reads it. */
struct stream {
	int fd;			/* the read end; -1 at its end */
	char *kept;		/* the first `cap` bytes */
	uint32_t kept_len, kept_room, cap;
	long long total;	/* every byte read */
	char *ring;		/* the last `tail` bytes, a ring from ring_at */
	uint32_t ring_len, ring_at, tail;
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
	pid_t *below, *parent, self;
	int i, n, killed;

	if (reap(-1, WNOHANG) < 0 && errno == ECHILD)
		return;
	self = getpid();
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

/* perfab is gone: so is the run in flight (pid, 0 for none) and all it started. */
static void orphaned(pid_t running)
{
	if (running > 0)
		killpg(running, SIGKILL);
	kill_tree();
	_exit(0);
}

/* Send len bytes of buf; at a failure perfab is gone. */
static void send_all(pid_t running, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(control, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			orphaned(running);
		buf += n;
		len -= (size_t)n;
	}
}

static void reply_failed(int64_t err, int64_t stage)
{
	int64_t r[REPLY_FIELDS] = { FAILED, err, stage };

	send_all(0, (const char *)r, sizeof(r));
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

/* The next request's length; kill words that came after their run ended are skipped.  0 at EOF. */
static int read_header(uint32_t *len)
{
	do
		if (read_full((char *)len, sizeof(*len)) < 0)
			return 0;
	while (*len == KILL_RUN);
	return 1;
}

/* Split the request body into r's fields; pointers into body.  -1 if malformed. */
static int parse(char *body, uint32_t len, struct run *r)
{
	uint32_t head[6], i, count;
	int64_t limits[2];
	char *p = body + sizeof(head) + sizeof(limits), *end = body + len;

	if (len < sizeof(head) + sizeof(limits))
		return -1;
	memcpy(head, body, sizeof(head));
	memcpy(limits, body + sizeof(head), sizeof(limits));
	if (head[0] == 0 || head[0] > len || head[1] > len || head[2] > (uint32_t)(end - p))
		return -1;
	r->mask_bytes = head[2];
	r->mask = head[2] ? p : NULL;
	r->cap = head[3];
	r->tail = head[4];
	r->timeout_ns = limits[0];
	r->grace_ns = limits[1];
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

/*
 * The vforked child shares the server's memory until it execs or exits, and the
 * server waits that long: a failure is written into `failed` (errno, stage),
 * where the server reads it, with no pipe to make and close for every run.
 */
static void fail(volatile int *failed, int stage)
{
	failed[0] = errno;
	failed[1] = stage;
	_exit(127);
}

/* In the vforked child: only system calls, then exec or _exit. */
static void child(const struct run *r, volatile int *failed, int out_w, int err_w)
{
	if (setsid() < 0)
		fail(failed, STAGE_FDS);
	if (r->cwd[0] && chdir(r->cwd) < 0)
		fail(failed, STAGE_CHDIR);
	if (r->mask && sched_setaffinity(0, r->mask_bytes, r->mask) < 0)
		fail(failed, STAGE_AFFINITY);
	if (dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		fail(failed, STAGE_FDS);
	execvpe(r->argv[0], r->argv, r->envp);
	fail(failed, STAGE_EXEC);
}

/* The aggregate cpu line of /proc/stat: its first STAT_FIELDS counters into f, or -1s. */
static void read_cpu_stat(int64_t *f)
{
	char buf[256], *p = buf + 4, *end;
	ssize_t n = stat_fd < 0 ? -1 : pread(stat_fd, buf, sizeof(buf) - 1, 0);
	int i;

	for (i = 0; i < STAT_FIELDS; i++)
		f[i] = -1;
	if (n < 4 || memcmp(buf, "cpu ", 4) != 0)
		return;
	buf[n] = 0;
	for (i = 0; i < STAT_FIELDS; i++, p = end) {
		long long v = strtoll(p, &end, 10);

		if (end == p)
			return;
		f[i] = v;
	}
}

static long long ts_ns(struct timespec t)
{
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* CPU time of perfab and this server so far; -1 when perfab's cannot be read. */
static long long harness_cpu_ns(void)
{
	struct timespec mine, theirs;

	if (!perfab_clock_ok || clock_gettime(perfab_clock, &theirs) < 0)
		return -1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mine);
	return ts_ns(mine) + ts_ns(theirs);
}

static char chunk[1 << 16];

/* Keep the first s->cap bytes of what was read (growing the buffer as they come) and the last s->tail. */
static void keep(struct stream *s, const char *data, uint32_t n)
{
	uint32_t k = s->cap - s->kept_len < n ? s->cap - s->kept_len : n, i;

	if (k > 0 && s->kept_len + k > s->kept_room) {
		uint32_t room = s->kept_room ? s->kept_room : (s->cap < 4096 ? s->cap : 4096);
		char *grown;

		while (room < s->kept_len + k)
			room = room > s->cap / 2 ? s->cap : 2 * room;
		if ((grown = realloc(s->kept, room)) == NULL)
			k = 0;
		else
			s->kept = grown, s->kept_room = room;
	}
	memcpy(s->kept + s->kept_len, data, k);
	s->kept_len += k;
	if (s->tail == 0)
		return;
	if (n >= s->tail) {
		memcpy(s->ring, data + n - s->tail, s->tail);
		s->ring_at = 0, s->ring_len = s->tail;
		return;
	}
	for (i = 0; i < n; i++)
		s->ring[(s->ring_at + s->ring_len + i) % s->tail] = data[i];
	if (s->ring_len + n > s->tail) {
		s->ring_at = (s->ring_at + s->ring_len + n) % s->tail;
		s->ring_len = s->tail;
	} else {
		s->ring_len += n;
	}
}

/*
 * Read what the pipe holds (poll said `revents`); at its end (or an error) close it.
 * A pipe polls readable whenever it holds data, so a hang-up alone is its end:
 * closed without the read that would return 0.
 */
static void take(struct stream *s, short revents)
{
	ssize_t n = revents & POLLIN ? read(s->fd, chunk, sizeof(chunk)) : 0;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	s->total += n;
	keep(s, chunk, (uint32_t)n);
}

/* A word from perfab during the run: a kill (the group dies, the run is reaped as usual); EOF: perfab is gone. */
static void from_perfab(pid_t pid)
{
	uint32_t word;

	if (read_full((char *)&word, sizeof(word)) < 0 || word != KILL_RUN)
		orphaned(pid);
	killpg(pid, SIGKILL);
}

static int exited(pid_t pid)
{
	siginfo_t info;

	info.si_pid = 0;
	return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/*
 * Until the workload exits: read its output, kill its group at the deadline
 * (0: none) or when perfab asks.  Without a pidfd, look every 10 ms.  The
 * child is left a zombie, so its process group can still be killed by its
 * id.  1 if it was killed at the deadline.
 */
static int watch(pid_t pid, int pidfd, struct stream *out, struct stream *err, long long deadline)
{
	siginfo_t info;
	int timed_out = 0;

	for (;;) {
		struct pollfd p[4] = { { pidfd, POLLIN, 0 }, { out->fd, POLLIN, 0 }, { err->fd, POLLIN, 0 },
				       { control, POLLIN | POLLRDHUP, 0 } };
		int wait_ms = -1;

		if (deadline && !timed_out) {
			long long left = deadline - now_ns();

			if (left <= 0) {
				killpg(pid, SIGKILL);
				timed_out = 1;
				continue;
			}
			wait_ms = (int)((left + 999999) / 1000000);
		}
		if (pidfd < 0 && (wait_ms < 0 || wait_ms > 10))
			wait_ms = 10;
		if (poll(p, 4, wait_ms) < 0 && errno != EINTR)
			break;
		if (p[3].revents)
			from_perfab(pid);
		if (p[1].revents)
			take(out, p[1].revents);
		if (p[2].revents)
			take(err, p[2].revents);
		if (pidfd >= 0 ? p[0].revents != 0 : exited(pid))
			return timed_out;
	}
	while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;	/* poll failed: wait for the exit alone */
	return timed_out;
}

/* After the reap: read the pipes to their end for at most grace_ns, then close them. */
static void drain(struct stream *out, struct stream *err, long long grace_ns)
{
	long long end = now_ns() + grace_ns;

	while (out->fd >= 0 || err->fd >= 0) {
		struct pollfd p[2] = { { out->fd, POLLIN, 0 }, { err->fd, POLLIN, 0 } };
		long long left = end - now_ns();
		int n;

		if (left <= 0)
			break;
		n = poll(p, 2, (int)((left + 999999) / 1000000));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (p[0].revents)
			take(out, p[0].revents);
		if (p[1].revents)
			take(err, p[1].revents);
	}
	if (out->fd >= 0)
		close(out->fd);
	if (err->fd >= 0)
		close(err->fd);
	out->fd = err->fd = -1;
}

/* DONE, with the rusage, the streams' counts and the bytes kept; the buffers are freed. */
static void reply_done(int64_t *r, const struct rusage *ru, struct stream *out, struct stream *err)
{
	r[R_KIND] = DONE;
	r[R_UTIME] = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
	r[R_STIME] = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
	r[R_MAXRSS] = ru->ru_maxrss;
	r[R_NVCSW] = ru->ru_nvcsw;
	r[R_NIVCSW] = ru->ru_nivcsw;
	r[R_OUT_TOTAL] = out->total;
	r[R_ERR_TOTAL] = err->total;
	r[R_OUT_KEPT] = out->kept_len;
	r[R_ERR_KEPT] = err->kept_len;
	r[R_ERR_TAIL] = err->total > err->kept_len ? err->ring_len : 0;
	send_all(0, (const char *)r, REPLY_FIELDS * sizeof(int64_t));
	send_all(0, out->kept, out->kept_len);
	send_all(0, err->kept, err->kept_len);
	if (r[R_ERR_TAIL]) {	/* the ring from its oldest byte */
		uint32_t first = err->tail - err->ring_at < err->ring_len ? err->tail - err->ring_at : err->ring_len;

		send_all(0, err->ring + err->ring_at, first);
		send_all(0, err->ring, err->ring_len - first);
	}
	free(out->kept);
	free(err->kept);
	free(err->ring);
}

/* The workload's stdout and stderr pipes, both or none; -1 with errno. */
static int pipes(int p[2][2])
{
	int e;

	if (pipe2(p[0], O_CLOEXEC) < 0)
		return -1;
	if (pipe2(p[1], O_CLOEXEC) < 0) {
		e = errno;
		close(p[0][0]), close(p[0][1]);
		errno = e;
		return -1;
	}
	return 0;
}

/* Start the child with its output on two pipes; its pid, or 0 after a FAILED reply. */
static pid_t start(struct run *r, struct stream *out, struct stream *err)
{
	int p[2][2], *outp = p[0], *errp = p[1], e[2];
	volatile int failed[2] = { 0, 0 };	/* errno and stage, written by a child that could not exec */
	pid_t pid;

	if (pipes(p) < 0) {
		reply_failed(errno, STAGE_FDS);
		return 0;
	}
	use_path_of(r->envp);
	pid = vfork();
	if (pid == 0)
		child(r, failed, outp[1], errp[1]);
	e[0] = errno, e[1] = STAGE_FDS;
	close(outp[1]);	/* the child has its own copies, or is gone: closed before any reply */
	close(errp[1]);
	out->fd = outp[0];
	err->fd = errp[0];
	if (pid > 0 && failed[1] != 0) {	/* it exited without exec */
		e[0] = failed[0], e[1] = failed[1];
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	if (pid > 0)
		return pid;
	close(out->fd);
	close(err->fd);
	reply_failed(e[0], e[1]);
	return 0;
}

static void run(struct run *r)
{
	struct stream out = { .cap = r->cap }, err = { .cap = r->cap, .tail = r->tail };
	int64_t reply[REPLY_FIELDS] = { 0 };
	struct rusage ru;
	long long started, cpu;
	int status, pidfd = -1;
	pid_t pid;

	if (r->tail && (err.ring = malloc(r->tail)) == NULL)
		err.tail = 0;
	read_cpu_stat(reply + R_STAT_BEFORE);
	cpu = harness_cpu_ns();
	started = now_ns();
	if ((pid = start(r, &out, &err)) == 0) {
		free(err.ring);
		return;
	}
#ifdef SYS_pidfd_open
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);	/* Linux 5.3 */
#endif
	reply[R_TIMED_OUT] = watch(pid, pidfd, &out, &err, r->timeout_ns > 0 ? started + r->timeout_ns : 0);
	reply[R_WALL] = now_ns() - started;
	if (pidfd >= 0)
		close(pidfd);
	killpg(pid, SIGKILL);	/* leftovers would disturb the next run and hold its pipes */
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			_exit(125);
	kill_tree();		/* and those that left the process group */
	read_cpu_stat(reply + R_STAT_AFTER);
	reply[R_HARNESS] = cpu < 0 ? -1 : harness_cpu_ns() - cpu;
	reply[R_VALUE] = status;
	drain(&out, &err, r->grace_ns);
	reply_done(reply, &ru, &out, &err);
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
		;	/* 0, 1 and 2 open: the workloads' pipes never land on them */
	if (fd > 2)
		close(fd);
	stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	perfab_clock_ok = clock_getcpuclockid(getppid(), &perfab_clock) == 0;
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
	while (read_header(&len)) {
		memset(&r, 0, sizeof(r));
		body = len <= MAX_REQUEST ? malloc((size_t)len + 1) : NULL;
		if (!body || read_full(body, len) < 0)
			return 1;
		if (parse(body, len, &r) == 0)
			run(&r);
		else
			reply_failed(EINVAL, STAGE_FDS);
		free(r.argv);
		free(body);
	}
	return 0;
}
