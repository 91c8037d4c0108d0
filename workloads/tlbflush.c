/*
 * tlbflush: TLB flushes of a private anonymous mapping, in will-it-scale's
 * manner and output format, per task.
 *
 *   tlbflush -t|-p TASKS [-s SECONDS | -n OPS]
 *
 * Each task maps 1 MiB of private anonymous memory and, page by page,
 * writes a byte and drops the page again with madvise(MADV_DONTNEED): one
 * operation.  Dropping a page flushes its TLB entry; with -t the tasks are
 * threads of one process, so every flush must also reach each other CPU
 * the mm is live on (a TLB shootdown IPI, unless that CPU is lazy), and the
 * mapping's creation and removal at each pass take the mmap_lock for
 * writing, which sends the other threads idle.  With -p the tasks are
 * processes with an address space each: no shootdowns.  Task i is pinned
 * to the i-th CPU the program may run on (round-robin).
 *
 * -s SECONDS (will-it-scale's own mode): prints, once a second, the ops of
 * the slowest and fastest task and their total, then "average:" the ops per
 * second over the measured seconds.  -n OPS: each task does OPS operations
 * and the program prints one line for the whole run and "average:" over
 * it, so the work is fixed (the counts of a guest repeat); the times are
 * the machine's clock (emulated under TCG).
 *
 *   testcase:TLB flush of anonymous memory private mapping
 *   measurement
 *   min:5210 max:5342 total:10552
 *   average:10552
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAP_BYTES (1024 * 1024)
#define MAX_TASKS 256

struct slot {
	volatile unsigned long ops;     /* operations done so far */
	char pad[56];                   /* one cache line per task: counters do not share lines */
};

static struct slot *slots;          /* shared with child processes (MAP_SHARED) */
static long limit;                  /* -n: operations per task; 0: run until killed */
static long page;

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("tlbflush: sched_setaffinity");
		exit(1);
	}
}

static void work(struct slot *s)
{
	for (;;) {
		char *p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("tlbflush: mmap");
			exit(1);
		}
		for (long off = 0; off < MAP_BYTES; off += page) {
			p[off] = 1;
			madvise(p + off, page, MADV_DONTNEED);
			s->ops++;
			if (limit && (long)s->ops >= limit) {
				munmap(p, MAP_BYTES);
				return;
			}
		}
		munmap(p, MAP_BYTES);
	}
}

struct start {
	int cpu;
	struct slot *slot;
};

static void *thread_main(void *arg)
{
	struct start *st = arg;
	pin(st->cpu);
	work(st->slot);
	return NULL;
}

static int allowed_cpus(int *cpus)
{
	cpu_set_t set;
	int n = 0;
	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < CPU_SETSIZE && n < MAX_TASKS; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(const unsigned long *prev, int tasks, unsigned long *min, unsigned long *max,
		   unsigned long *total)
{
	*min = ~0UL;
	*max = *total = 0;
	for (int i = 0; i < tasks; i++) {
		unsigned long d = slots[i].ops - prev[i];
		*min = d < *min ? d : *min;
		*max = d > *max ? d : *max;
		*total += d;
	}
}

int main(int argc, char **argv)
{
	int threads = -1, tasks = 0;
	long seconds = 5;
	if (argc >= 3 && (!strcmp(argv[1], "-t") || !strcmp(argv[1], "-p"))) {
		threads = argv[1][1] == 't';
		tasks = atoi(argv[2]);
	}
	if (argc == 5 && !strcmp(argv[3], "-s"))
		seconds = atol(argv[4]);
	else if (argc == 5 && !strcmp(argv[3], "-n"))
		limit = atol(argv[4]);
	else if (argc != 3)
		tasks = 0;
	if (threads < 0 || tasks < 1 || tasks > MAX_TASKS || seconds < 1 || limit < 0) {
		fprintf(stderr, "usage: tlbflush -t|-p TASKS [-s SECONDS | -n OPS]\n");
		return 2;
	}
	page = sysconf(_SC_PAGESIZE);
	slots = mmap(NULL, MAX_TASKS * sizeof(struct slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int cpus[MAX_TASKS], ncpu = allowed_cpus(cpus);
	pthread_t tid[MAX_TASKS];
	pid_t pid[MAX_TASKS];
	struct start st[MAX_TASKS];
	printf("testcase:TLB flush of anonymous memory private mapping\n");
	double t0 = now_s();
	for (int i = 0; i < tasks; i++) {
		st[i] = (struct start){cpus[i % ncpu], &slots[i]};
		if (threads) {
			pthread_create(&tid[i], NULL, thread_main, &st[i]);
		} else if ((pid[i] = fork()) == 0) {
			thread_main(&st[i]);
			_exit(0);
		}
	}
	unsigned long prev[MAX_TASKS] = {0}, min, max, total;
	if (limit) {
		for (int i = 0; i < tasks; i++)
			threads ? pthread_join(tid[i], NULL) : waitpid(pid[i], NULL, 0);
		double elapsed = now_s() - t0;
		report(prev, tasks, &min, &max, &total);
		printf("measurement\nmin:%lu max:%lu total:%lu\naverage:%.0f\n", min, max, total, total / elapsed);
		return 0;
	}
	printf("warmup\n");
	unsigned long sum = 0;
	for (long s = 0; s < seconds + 5; s++) {
		if (s == 5)
			printf("measurement\n");
		sleep(1);
		report(prev, tasks, &min, &max, &total);
		for (int i = 0; i < tasks; i++)
			prev[i] = slots[i].ops;
		printf("min:%lu max:%lu total:%lu\n", min, max, total);
		fflush(stdout);
		if (s >= 5)
			sum += total;
	}
	printf("average:%lu\n", sum / seconds);
	if (!threads)
		for (int i = 0; i < tasks; i++)
			kill(pid[i], SIGKILL);
	return 0;
}
