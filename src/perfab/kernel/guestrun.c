/*
 * perfab-guestrun: runs the workload inside a perfab guest, between the
 * markers perfab's TCG plugin counts from and to, with its server beside it.
 *
 *   perfab-guestrun REQ OUT
 *   perfab-guestrun --snapshot-point   (guestpoint.c)
 *   perfab-guestrun --send DIR TTY NAME...   (guestresult.c)
 *
 * REQ holds the request: `argv` and `env` (NUL-terminated strings), `cwd`
 * (one path) and, when the workload talks to a server, `svc_argv` and
 * `svc_cwd`, `svc_port` (wait until 127.0.0.1:port accepts), `svc_ready_s`
 * (how long to wait) and `svc_cpus` (a CPU list the server is pinned to; the
 * workload then runs on the other CPUs).  OUT receives `stdout`, `stderr`,
 * `status` (`status N`: exit code or 128+signal; `wall_s S`: CLOCK_MONOTONIC
 * from just before the start marker to just after the stop marker), and with
 * a server `service.log` (its output) and `service` (the server's usage
 * before and after the workload: `before|after user_s S sys_s S run_ns N
 * syscr N syscw N procs N`).  A setup failure writes one line to OUT/error.
 * OUT also receives `cpus` (processors /proc/cpuinfo lists) and copies of
 * /proc/interrupts and /proc/vmstat from just before the start marker
 * (`irq0`, `vm0`) and just after the stop marker (`irq1`, `vm1`).
 * REQ/prefetch lists files read once before anything starts (see prefetch).  REQ/perturb, when
 * present, is the run's seeded perturbation (perfab.replication): bytes for the random pool and a
 * number of iterations to spin before the start marker.
 *
 * The kernel's random pool is credited with fixed (or the run's seeded) bytes first (an emulated
 * machine has no entropy source: getrandom() would block), and the loopback
 * interface is brought up, so a server and its client talk over 127.0.0.1
 * inside the guest.  The server is started in a session
 * of its own before the start marker; the workload in another, so every user
 * process that is neither init, this launcher nor in the workload's session
 * is the server's (a server that daemonises itself stays counted).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* nopl 0x42414650(%rax) and nopl 0x45414650(%rax): see perfab_tcg.c */
#define MARK_START() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x46,0x41,0x42" ::: "memory")
#define MARK_STOP() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x46,0x41,0x45" ::: "memory")

#define PF_KTHREAD 0x00200000

static const char *out_dir;

static void out_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", out_dir, name);
}

/* One line to OUT/error, then exit: the host names it as the run's failure. */
static void fail(const char *fmt, ...)
{
    char path[4096];
    out_path(path, sizeof(path), "error");
    FILE *f = fopen(path, "w");
    va_list ap;
    va_start(ap, fmt);
    if (f) {
        vfprintf(f, fmt, ap);
        fputc('\n', f);
        fclose(f);
    }
    va_end(ap);
    exit(126);
}

/* The whole file REQ/name, NUL-terminated; NULL (and *len 0) when absent and optional. */
static char *slurp(const char *dir, const char *name, size_t *len, int optional)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional && errno == ENOENT)
            return NULL;
        fail("perfab-guestrun: cannot read %s: %s", path, strerror(errno));
    }
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (!buf)
        exit(126);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Split NUL-terminated strings into a NULL-terminated vector. */
static char **split(char *buf, size_t len)
{
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += buf[i] == 0;
    char **v = calloc(count + 1, sizeof(char *));
    if (!v)
        exit(126);
    size_t k = 0;
    for (size_t i = 0; i < len && k < count; i += strlen(buf + i) + 1)
        v[k++] = buf + i;
    return v;
}

static void redirect(const char *path, int fd, int flags)
{
    int f = open(path, flags, 0644);
    if (f < 0 || dup2(f, fd) < 0) {
        fprintf(stderr, "perfab-guestrun: cannot open %s: %s\n", path, strerror(errno));
        _exit(126);
    }
    close(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The run's perturbation, REQ/perturb ("spin N" and "entropy HEX" lines), when the request has one. */
struct perturb {
    unsigned long spin;  /* iterations to spin before the start marker */
    unsigned char entropy[64];  /* bytes credited to the random pool */
    int has_entropy;
};

static struct perturb read_perturb(const char *req)
{
    struct perturb p = {0};
    size_t n;
    char *text = slurp(req, "perturb", &n, 1);
    if (!text)
        return p;
    char *spin = strstr(text, "spin "), *hex = strstr(text, "entropy ");
    if (spin)
        p.spin = strtoul(spin + 5, NULL, 10);
    if (hex) {
        hex += 8;
        unsigned i = 0;
        for (; i < sizeof(p.entropy) && isxdigit((unsigned char)hex[2 * i]) && isxdigit((unsigned char)hex[2 * i + 1]);
             i++) {
            char two[3] = {hex[2 * i], hex[2 * i + 1], 0};
            p.entropy[i] = (unsigned char)strtoul(two, NULL, 16);
        }
        p.has_entropy = i == sizeof(p.entropy);
    }
    free(text);
    return p;
}

/* Spin `n` iterations: under icount guest time follows instructions, so the spin moves the phase of
 * the timer tick at which the workload starts.  The loop is outside the plugin's window. */
static void spin(unsigned long n)
{
    for (volatile unsigned long i = 0; i < n; i++)
        ;
}

/* Credit the kernel's random pool with the run's seeded bytes (or fixed bytes), so its CRNG is ready
 * before the workload: an emulated machine has no entropy source, and getrandom() (OpenSSL, APR,
 * nginx) would block and spin in try_to_generate_entropy() inside the measured window.  The CRNG is
 * reseeded from the pool then, so what the kernel draws for the workload (its address-space layout,
 * stack canaries) follows the bytes: fixed bytes keep identical boots identical, seeded bytes give
 * each run its own draw. */
static void seed_random(const struct perturb *p)
{
    struct {
        struct rand_pool_info info;
        unsigned char bytes[64];
    } seed;
    int fd = open("/dev/urandom", O_WRONLY);
    if (fd < 0)
        return;
    for (unsigned i = 0; i < sizeof(seed.bytes); i++)
        seed.bytes[i] = p->has_entropy ? p->entropy[i] : (unsigned char)(i * 167 + 13);
    seed.info.entropy_count = 8 * sizeof(seed.bytes);
    seed.info.buf_size = sizeof(seed.bytes);
    ioctl(fd, RNDADDENTROPY, &seed);
    close(fd);
}

/* Bring up `lo`; returns 0, or -1 when the kernel has no IPv4 sockets. */
static int loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
    return 0;
}

/* Parse a CPU list such as "1" or "0-1,3" into `set`; returns the count, -1 on bad text. */
static int parse_cpus(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    int count = 0;
    const char *p = text;
    while (*p && *p != '\n') {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0 || lo >= CPU_SETSIZE)
            return -1;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE)
                return -1;
            p = end;
        }
        for (long c = lo; c <= hi; c++, count++)
            CPU_SET(c, set);
        if (*p == ',')
            p++;
    }
    return count;
}

/* Start the command in a session of its own, output to `log` (stdout, stderr) or the given files. */
static pid_t start(char **argv, char **env, const char *cwd, const cpu_set_t *cpus, const char *out, const char *err)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setsid();
    redirect("/dev/null", 0, O_RDONLY);
    redirect(out, 1, O_WRONLY | O_CREAT | O_TRUNC);
    redirect(err, 2, O_WRONLY | O_CREAT | O_APPEND);
    if (cpus && sched_setaffinity(0, sizeof(*cpus), cpus) != 0) {
        fprintf(stderr, "perfab-guestrun: cannot pin to the asked CPUs: %s\n", strerror(errno));
        _exit(126);
    }
    if (cwd && *cwd && chdir(cwd) != 0) {
        fprintf(stderr, "perfab-guestrun: cannot enter %s: %s\n", cwd, strerror(errno));
        _exit(126);
    }
    execvpe(argv[0], argv, env);
    fprintf(stderr, "perfab-guestrun: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

/* Read every file of REQ/prefetch (NUL-separated paths) once, so the programs and libraries the
 * workload and its server load are in the page cache before the window: under root = "host" each
 * first read goes over 9p, and an emulated machine waiting for the host counts an idle loop whose
 * length depends on the host. */
static void prefetch(const char *req)
{
    size_t n;
    char *list = slurp(req, "prefetch", &n, 1);
    char buf[65536];
    for (size_t i = 0; list && i < n; i += strlen(list + i) + 1) {
        int fd = open(list + i, O_RDONLY);
        if (fd < 0)
            continue;
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
        close(fd);
    }
}

/* ---- the server's usage: every user process outside init, us and the workload's session ---- */

struct usage {
    unsigned long long utime, stime, run_ns, syscr, syscw;
    int procs;
};

static int read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got < 0)
        return -1;
    buf[got] = 0;
    return 0;
}

/* Add /proc/PID's usage to `u` when it is a server process. */
static void add_process(long pid, pid_t skip_sid, struct usage *u)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (read_small(path, buf, sizeof(buf)))
        return;
    char *close_paren = strrchr(buf, ')');
    if (!close_paren)
        return;
    /* fields after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    char state;
    long ppid, pgrp, session, tty, tpgid;
    unsigned long flags, minflt, cminflt, majflt, cmajflt, utime, stime;
    if (sscanf(close_paren + 2, "%c %ld %ld %ld %ld %ld %lu %lu %lu %lu %lu %lu %lu", &state, &ppid, &pgrp,
               &session, &tty, &tpgid, &flags, &minflt, &cminflt, &majflt, &cmajflt, &utime, &stime) != 13)
        return;
    if ((flags & PF_KTHREAD) || pid == 1 || pid == getpid() || session == skip_sid)
        return;
    u->utime += utime;
    u->stime += stime;
    u->procs++;
    snprintf(path, sizeof(path), "/proc/%ld/schedstat", pid);
    if (!read_small(path, buf, sizeof(buf)))
        u->run_ns += strtoull(buf, NULL, 10);
    snprintf(path, sizeof(path), "/proc/%ld/io", pid);
    if (!read_small(path, buf, sizeof(buf))) {
        char *p = strstr(buf, "syscr:"), *q = strstr(buf, "syscw:");
        if (p)
            u->syscr += strtoull(p + 6, NULL, 10);
        if (q)
            u->syscw += strtoull(q + 6, NULL, 10);
    }
}

static struct usage server_usage(pid_t skip_sid)
{
    struct usage u = {0};
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (isdigit((unsigned char)e->d_name[0]))
            add_process(strtol(e->d_name, NULL, 10), skip_sid, &u);
    if (d)
        closedir(d);
    return u;
}

static void write_usage(FILE *f, const char *when, const struct usage *u)
{
    double tick = (double)sysconf(_SC_CLK_TCK);
    fprintf(f, "%s user_s %.6f sys_s %.6f run_ns %llu syscr %llu syscw %llu procs %d\n", when, u->utime / tick,
            u->stime / tick, u->run_ns, u->syscr, u->syscw, u->procs);
}

/* ---- the server: started, waited for, checked ---- */

struct server {
    pid_t pid;            /* the started process (it may have forked a daemon and exited) */
    int port;             /* 0: no port to wait for */
    cpu_set_t cpus;       /* the CPUs it is pinned to */
    int pinned;           /* svc_cpus was given */
};

static int accepts(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(s);
    return ok;
}

static void wait_ready(const struct server *srv, double ready_s)
{
    double deadline = now_s() + ready_s;
    while (srv->port && !accepts(srv->port)) {
        int status;
        if (waitpid(srv->pid, &status, WNOHANG) == srv->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            fail("the service exited (%s %d) before it accepted connections on 127.0.0.1:%d in the guest",
                 WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), srv->port);
        if (now_s() > deadline)
            fail("the service did not accept connections on 127.0.0.1:%d in the guest within %g s; check "
                 "service.port, or raise service.ready_timeout", srv->port, ready_s);
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

static void start_server(const char *req, struct server *srv, char **env)
{
    size_t n;
    char *argv_buf = slurp(req, "svc_argv", &n, 1);
    srv->pid = 0;
    if (!argv_buf)
        return;
    char **argv = split(argv_buf, n);
    size_t m;
    char *cwd = slurp(req, "svc_cwd", &m, 1);
    char *port = slurp(req, "svc_port", &m, 1);
    char *ready = slurp(req, "svc_ready_s", &m, 1);
    char *cpus = slurp(req, "svc_cpus", &m, 1);
    srv->port = port ? atoi(port) : 0;
    srv->pinned = cpus != NULL;
    if (cpus && parse_cpus(cpus, &srv->cpus) <= 0)
        fail("service.cpus %s is not a CPU list of this guest", cpus);
    if (srv->port && accepts(srv->port))
        fail("something in the guest already accepts connections on port %d before the service starts", srv->port);
    char log[4096];
    out_path(log, sizeof(log), "service.log");
    srv->pid = start(argv, env, cwd, srv->pinned ? &srv->cpus : NULL, log, log);
    wait_ready(srv, ready ? atof(ready) : 10.0);
}

/* The workload's CPUs: the ones the server is not pinned to (all when it is not pinned). */
static int workload_cpus(const struct server *srv, cpu_set_t *set)
{
    if (!srv->pid || !srv->pinned)
        return 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(set);
    for (long c = 0; c < online; c++)
        if (!CPU_ISSET(c, &srv->cpus))
            CPU_SET(c, set);
    if (CPU_COUNT(set) == 0)
        fail("service.cpus leaves no CPU of the guest's %ld for the workload: raise measure.vcpus", online);
    return 1;
}

int snapshot_point(void);
int send_result(const char *dir, const char *tty_path, char **names, int count);
void read_proc(const char *from, const char *to);
void count_cpus(const char *to);

/* Copy /proc/NAME to OUT/as. */
static void proc_to_out(const char *name, const char *as)
{
    char from[256], to[4096];
    snprintf(from, sizeof(from), "/proc/%s", name);
    out_path(to, sizeof(to), as);
    read_proc(from, to);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--snapshot-point") == 0)
        return snapshot_point();
    if (argc >= 4 && strcmp(argv[1], "--send") == 0)
        return send_result(argv[2], argv[3], argv + 4, argc - 4);
    if (argc != 3) {
        fprintf(stderr, "usage: perfab-guestrun REQ OUT\n");
        return 126;
    }
    const char *req = argv[1];
    out_dir = argv[2];
    char path_cpus[4096];
    out_path(path_cpus, sizeof(path_cpus), "cpus");
    count_cpus(path_cpus);
    size_t n_argv, n_env, n_cwd;
    char *argv_buf = slurp(req, "argv", &n_argv, 0);
    char *env_buf = slurp(req, "env", &n_env, 0);
    char *cwd = slurp(req, "cwd", &n_cwd, 0);
    char **wargv = split(argv_buf, n_argv);
    char **wenv = split(env_buf, n_env);
    if (!wargv[0])
        fail("perfab-guestrun: empty argv");
    struct perturb perturbation = read_perturb(req);
    seed_random(&perturbation);
    prefetch(req);
    struct server srv = {0};
    size_t n_port;
    char *port = slurp(req, "svc_port", &n_port, 1);
    if (loopback_up() < 0 && port)
        fail("the guest kernel has no IPv4 sockets (CONFIG_INET): the service cannot listen on port %s", port);
    start_server(req, &srv, wenv);
    cpu_set_t wcpus;
    int pin = workload_cpus(&srv, &wcpus);
    char path_out[4096], path_err[4096], path_usage[4096];
    out_path(path_out, sizeof(path_out), "stdout");
    out_path(path_err, sizeof(path_err), "stderr");
    spin(perturbation.spin);
    struct usage before = srv.pid ? server_usage(-1) : (struct usage){0};
    proc_to_out("interrupts", "irq0");
    proc_to_out("vmstat", "vm0");
    double t0 = now_s();
    MARK_START();
    pid_t pid = start(wargv, wenv, cwd, pin ? &wcpus : NULL, path_out, path_err);
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    MARK_STOP();
    double t1 = now_s();
    proc_to_out("interrupts", "irq1");
    proc_to_out("vmstat", "vm1");
    if (srv.pid) {
        struct usage after = server_usage(pid);  /* the workload's session is its own: left out */
        out_path(path_usage, sizeof(path_usage), "service");
        FILE *f = fopen(path_usage, "w");
        if (f) {
            write_usage(f, "before", &before);
            write_usage(f, "after", &after);
            fclose(f);
        }
        if (after.procs == 0) {
            out_path(path_usage, sizeof(path_usage), "error");
            if ((f = fopen(path_usage, "w")) != NULL) {
                fputs("the service exited before the workload ended\n", f);
                fclose(f);
            }
        }
    }
    int code = pid < 0 ? 126 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char path[4096];
    out_path(path, sizeof(path), "status");
    FILE *f = fopen(path, "w");
    if (!f)
        return 126;
    fprintf(f, "status %d\nwall_s %.9f\n", code, t1 - t0);
    fclose(f);
    return 0;
}
