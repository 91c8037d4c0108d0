/*
 * perfab-guestrun --snapshot-point: where a perfab guest waits for its run.
 *
 * A guest that starts from a snapshot (perfab.kernel.snapshot) is booted once
 * to this point and saved; every run then restores it.  What differs between
 * runs (the command, its environment, its directory) cannot be in the saved
 * guest, so the host writes it into this process's memory while the guest is
 * stopped, and this process unpacks it at / when the guest goes on.
 *
 * The guest stops itself at one exact instruction, the same in every boot:
 * the 1 written to the pvpanic device's port (QEMU runs with
 * `-device pvpanic -action panic=pause`), through /dev/port so that kernels
 * without ioperm() stop too.  Before that the process moves to CPU 0 (the
 * host writes through vCPU 0's page tables), writes every page of its buffer
 * (so each is present and its own, never the shared zero page) and prints
 * the buffer's address on the console, waiting until the line is sent.
 *
 * The host writes "PERFAB-REQUEST LEN\n" and LEN bytes (a newc cpio of the
 * run's request) at the start of the buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define REQUEST_MAX (1 << 20)
#define PVPANIC_PORT 0x505
#define HEADER "PERFAB-REQUEST "

static char request[REQUEST_MAX];

/* One field of a newc header: 8 hex digits. */
static unsigned long hex8(const char *p)
{
    char field[9];
    memcpy(field, p, 8);
    field[8] = 0;
    return strtoul(field, NULL, 16);
}

/* Create the directories and regular files of the newc cpio at `p` (`len` bytes) under /; -1 on a bad archive. */
static int unpack(const char *p, size_t len)
{
    size_t at = 0;
    while (at + 110 <= len && memcmp(p + at, "070701", 6) == 0) {
        unsigned long mode = hex8(p + at + 14), size = hex8(p + at + 54), namesize = hex8(p + at + 94);
        const char *name = p + at + 110;
        size_t data = (at + 110 + namesize + 3) & ~(size_t)3;
        if (namesize == 0 || data + size > len || name[namesize - 1])
            return -1;
        if (strcmp(name, "TRAILER!!!") == 0)
            return 0;
        char path[4096];
        snprintf(path, sizeof(path), "/%s", name);
        if (S_ISDIR(mode) && mkdir(path, mode & 07777) != 0 && errno != EEXIST)
            return -1;
        if (S_ISREG(mode)) {
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(p + data, 1, size, f) != size || fclose(f))
                return -1;
        }
        at = (data + size + 3) & ~(size_t)3;
    }
    return -1;
}

int snapshot_point(void)
{
    cpu_set_t cpu0;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    sched_setaffinity(0, sizeof(cpu0), &cpu0);
    memset(request, 0, sizeof(request));
    int port = open("/dev/port", O_WRONLY);
    if (port < 0) {
        fprintf(stderr, "the guest cannot stop at the snapshot point: /dev/port: %s (its kernel needs CONFIG_DEVPORT); "
                "set measure.snapshot = false\n", strerror(errno));
        return 1;
    }
    printf("perfab: snapshot point %p %d\n", (void *)request, REQUEST_MAX);
    fflush(stdout);
    tcdrain(STDOUT_FILENO);
    char panicked = 1;
    if (pwrite(port, &panicked, 1, PVPANIC_PORT) != 1) {
        fprintf(stderr, "the guest cannot stop at the snapshot point: writing port %#x: %s\n", PVPANIC_PORT,
                strerror(errno));
        return 1;
    }
    close(port);
    char *end;
    long len = strncmp(request, HEADER, strlen(HEADER)) ? -1 : strtol(request + strlen(HEADER), &end, 10);
    if (len < 0 || *end != '\n' || end + 1 + len > request + REQUEST_MAX) {
        fprintf(stderr, "the host gave the guest no request at the snapshot point\n");
        return 1;
    }
    if (unpack(end + 1, (size_t)len) != 0) {
        fprintf(stderr, "cannot unpack the run's request in the guest: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
