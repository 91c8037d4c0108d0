/*
 * perfab-guestrun: runs the workload inside a perfab guest, between the
 * markers perfab's TCG plugin counts from and to.
 *
 *   perfab-guestrun DIR STDOUT STDERR
 *
 * DIR holds the request: `argv` and `env` (NUL-terminated strings) and
 * `cwd` (one path).  The workload runs with stdin from /dev/null, stdout
 * and stderr to the given files.  On exit, DIR/status gets two lines:
 * `status N` (exit code, or 128+signal) and `wall_s S` (CLOCK_MONOTONIC
 * from just before the start marker to just after the stop marker).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* nopl 0x42414650(%rax) and nopl 0x45414650(%rax): see perfab_tcg.c */
#define MARK_START() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x46,0x41,0x42" ::: "memory")
#define MARK_STOP() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x46,0x41,0x45" ::: "memory")

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "perfab-guestrun: cannot read %s: %s\n", path, strerror(errno));
        exit(126);
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
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

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: perfab-guestrun DIR STDOUT STDERR\n");
        return 126;
    }
    const char *dir = argv[1];
    size_t n_argv, n_env, n_cwd;
    char *argv_buf = slurp(dir, "argv", &n_argv);
    char *env_buf = slurp(dir, "env", &n_env);
    char *cwd = slurp(dir, "cwd", &n_cwd);
    char **wargv = split(argv_buf, n_argv);
    char **wenv = split(env_buf, n_env);
    if (!wargv[0]) {
        fprintf(stderr, "perfab-guestrun: empty argv\n");
        return 126;
    }
    double t0 = now_s();
    MARK_START();
    pid_t pid = fork();
    if (pid == 0) {
        redirect("/dev/null", 0, O_RDONLY);
        redirect(argv[2], 1, O_WRONLY | O_CREAT | O_TRUNC);
        redirect(argv[3], 2, O_WRONLY | O_CREAT | O_TRUNC);
        if (*cwd && chdir(cwd) != 0) {
            fprintf(stderr, "perfab-guestrun: cannot enter %s: %s\n", cwd, strerror(errno));
            _exit(126);
        }
        execvpe(wargv[0], wargv, wenv);
        fprintf(stderr, "perfab-guestrun: cannot run %s: %s\n", wargv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    MARK_STOP();
    double t1 = now_s();
    int code = pid < 0 ? 126 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char path[4096];
    snprintf(path, sizeof(path), "%s/status", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 126;
    fprintf(f, "status %d\nwall_s %.9f\n", code, t1 - t0);
    fclose(f);
    return 0;
}
