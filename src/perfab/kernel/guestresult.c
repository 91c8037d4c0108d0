/*
 * What a perfab guest sends back, written in the guest (perfab.kernel.guestresult reads it on the host).
 *
 * read_proc copies a /proc file into the launcher's OUT folder (the
 * launcher reads /proc/interrupts and /proc/vmstat just before the start
 * marker and just after the stop marker) and count_cpus writes the number of
 * processors /proc/cpuinfo lists.
 *
 * perfab-guestrun --send DIR TTY NAME... writes each file DIR/NAME (empty
 * when absent) to TTY, the second serial port in raw mode, framed as
 * `PERFAB-SECTION NAME LEN\n`, LEN bytes and a newline, then `PERFAB-END\n`,
 * and waits until the port has sent it all.
 *
 * These are the launcher's rather than shell commands (`cat`, `grep -c`, a
 * loop of `wc` and `cat`): every process a guest starts costs emulated time,
 * and a guest restored from a snapshot translates each one's code again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

/* Copy the file `from` to `to` (created or emptied); nothing when `from` cannot be read. */
void read_proc(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY);
    int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t got;
    while (out >= 0 && (got = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)got) != got)
            break;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
}

/* Write to `to` the number of processors /proc/cpuinfo lists ("processor" lines). */
void count_cpus(const char *to)
{
    FILE *in = fopen("/proc/cpuinfo", "r");
    if (!in)
        return;
    char line[1024];
    int count = 0;
    while (fgets(line, sizeof(line), in))
        count += strncmp(line, "processor", 9) == 0;
    fclose(in);
    FILE *out = fopen(to, "w");
    if (out) {
        fprintf(out, "%d\n", count);
        fclose(out);
    }
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, p, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return -1;
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

/* One section: header, the file's bytes (none when it is absent), a newline. */
static int send_section(int tty, const char *dir, const char *name)
{
    char path[4096], head[512], buf[65536];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    struct stat st;
    long long size = fd >= 0 && fstat(fd, &st) == 0 ? (long long)st.st_size : 0;
    int n = snprintf(head, sizeof(head), "PERFAB-SECTION %s %lld\n", name, size);
    int bad = write_all(tty, head, (size_t)n);
    long long left = size;
    while (!bad && fd >= 0 && left > 0) {
        ssize_t got = read(fd, buf, sizeof(buf) < (size_t)left ? sizeof(buf) : (size_t)left);
        if (got <= 0)
            break;
        bad = write_all(tty, buf, (size_t)got);
        left -= got;
    }
    while (!bad && left-- > 0)  /* a file that shrank: keep the frame's length */
        bad = write_all(tty, "\n", 1);
    if (fd >= 0)
        close(fd);
    return bad ? -1 : write_all(tty, "\n", 1);
}

int send_result(const char *dir, const char *tty_path, char **names, int count)
{
    int tty = open(tty_path, O_WRONLY | O_NOCTTY);
    struct termios t;
    if (tty < 0) {
        fprintf(stderr, "perfab-guestrun: cannot open %s: %s\n", tty_path, strerror(errno));
        return 1;
    }
    if (tcgetattr(tty, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(tty, TCSANOW, &t);
    }
    for (int i = 0; i < count; i++)
        if (send_section(tty, dir, names[i]) != 0) {
            fprintf(stderr, "perfab-guestrun: cannot write to %s: %s\n", tty_path, strerror(errno));
            return 1;
        }
    int bad = write_all(tty, "PERFAB-END\n", 11);
    tcdrain(tty);
    close(tty);
    return bad ? 1 : 0;
}
