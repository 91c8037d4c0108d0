/*
 * locksys: a fixed number of rounds of system calls that take and release
 * kernel spinlocks, for the kernel studies (000, 003).
 *
 * One round:
 *   write + read one byte through a pipe   pipe mutex, wait-queue lock (irqsave)
 *   dup + close                            files->file_lock
 *   fcntl(F_SETFL)                         file->f_lock
 *   open + fstat + close of a tmpfs file   dentry and inode locks, file_lock
 *   kill(self, an ignored signal)          sighand->siglock (irqsave)
 *   sched_yield                            runqueue lock (irq)
 *   mmap + touch + munmap of one page      page-table lock, mm and VMA locks
 *
 * The work is the same on every kernel, so instruction counts compare
 * directly; it reads no clock and its output depends only on the count.
 *
 * Usage: locksys ROUNDS [DIR]   (DIR: where the tmpfs file goes, default /tmp)
 * Prints rounds, syscalls/round and a checksum of the bytes read.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SYSCALLS_PER_ROUND 13

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* One round of the calls above; returns the byte read back from the pipe. */
static unsigned char round_once(int rd, int wr, const char *path, long i, long page)
{
	unsigned char out = (unsigned char)i, in = 0;
	struct stat st;

	if (write(wr, &out, 1) != 1 || read(rd, &in, 1) != 1)
		die("locksys: pipe");
	int fd = dup(rd);
	if (fd < 0 || close(fd))
		die("locksys: dup/close");
	if (fcntl(wr, F_SETFL, (i & 1) ? O_NONBLOCK : 0))
		die("locksys: fcntl");
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) || close(fd))
		die("locksys: open/fstat/close");
	if (kill(getpid(), SIGUSR1))
		die("locksys: kill");
	sched_yield();
	char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("locksys: mmap");
	p[0] = 1;
	if (munmap(p, page))
		die("locksys: munmap");
	return in;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: locksys ROUNDS [DIR]\n");
		return 2;
	}
	long rounds = atol(argv[1]);
	if (rounds < 1) {
		fprintf(stderr, "locksys: ROUNDS must be at least 1\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/locksys.file", argc == 3 ? argv[2] : "/tmp");
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "locksys\n", 8) != 8 || close(fd))
		die("locksys: create");
	int pipefd[2];
	if (pipe(pipefd))
		die("locksys: pipe");
	signal(SIGUSR1, SIG_IGN);
	long page = sysconf(_SC_PAGESIZE);

	unsigned long sum = 0;
	for (long i = 0; i < rounds; i++)
		sum = sum * 31 + round_once(pipefd[0], pipefd[1], path, i, page);
	unlink(path);
	printf("rounds: %ld\nsyscalls/round: %d\nchecksum: %lu\n", rounds, SYSCALLS_PER_ROUND, sum % 1000000007UL);
	return 0;
}
