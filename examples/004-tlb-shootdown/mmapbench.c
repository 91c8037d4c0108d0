/*
 * mmapbench: will-it-scale-like mmap / touch / munmap loops in N tasks.
 *
 * Each task maps 128 KiB of anonymous memory, writes one byte per page
 * (a page fault and a TLB entry per page) and unmaps it, for a fixed time.
 * With -t (threads, the default) the tasks share one address space: every
 * munmap must flush the TLB of each other CPU that runs the process, by
 * IPI (the TLB row of /proc/interrupts), and mmap and munmap take the
 * address space's mmap_lock for writing, so the threads also serialize.
 * With -p (processes) each task has its own address space: no shootdown
 * IPIs, no shared lock.
 *
 * Tasks are pinned round-robin to the CPUs the process may run on.
 *
 * Usage: mmapbench [-t|-p] TASKS SECONDS
 * Prints ops/s (all tasks), per_task_ops/s and the number of tasks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAP_BYTES (128 * 1024)
#define MAX_TASKS 256

struct task {
	int cpu;                /* the CPU this task is pinned to */
	long ops;               /* mmap/touch/munmap cycles done */
	char pad[48];           /* one cache line per task */
};

static struct task *tasks;      /* shared with child processes (MAP_SHARED) */
static volatile int *stop;      /* set by the parent when the time is up */
static long page;

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("mmapbench: sched_setaffinity");
		exit(1);
	}
}

static void *loop(void *arg)
{
	struct task *t = arg;
	pin(t->cpu);
	while (!*stop) {
		char *p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmapbench: mmap");
			exit(1);
		}
		for (long off = 0; off < MAP_BYTES; off += page)
			p[off] = 1;
		munmap(p, MAP_BYTES);
		__atomic_add_fetch(&t->ops, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The CPUs this process may run on, in order; returns their number. */
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

int main(int argc, char **argv)
{
	int threads = 1, opt, cpus[MAX_TASKS];
	while ((opt = getopt(argc, argv, "tp")) != -1)
		threads = opt == 't';
	if (argc - optind != 2) {
		fprintf(stderr, "usage: mmapbench [-t|-p] TASKS SECONDS\n");
		return 2;
	}
	int n = atoi(argv[optind]);
	double seconds = atof(argv[optind + 1]);
	int ncpu = allowed_cpus(cpus);
	if (n < 1 || n > MAX_TASKS || seconds <= 0) {
		fprintf(stderr, "mmapbench: TASKS must be 1..%d and SECONDS > 0\n", MAX_TASKS);
		return 2;
	}
	page = sysconf(_SC_PAGESIZE);
	void *shared = mmap(NULL, sizeof(struct task) * MAX_TASKS + 64, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		perror("mmapbench: mmap");
		return 1;
	}
	stop = shared;
	tasks = (struct task *)((char *)shared + 64);
	for (int i = 0; i < n; i++)
		tasks[i].cpu = cpus[i % ncpu];

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t tid[MAX_TASKS];
	pid_t pid[MAX_TASKS];
	for (int i = 0; i < n; i++) {
		if (threads) {
			int err = pthread_create(&tid[i], NULL, loop, &tasks[i]);
			if (err) {
				fprintf(stderr, "mmapbench: pthread_create: %s\n", strerror(err));
				exit(1);
			}
		} else if ((pid[i] = fork()) == 0) {
			loop(&tasks[i]);
			_exit(0);
		} else if (pid[i] < 0) {
			perror("mmapbench: fork");
			*stop = 1;
			exit(1);
		}
	}
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	*stop = 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (int i = 0; i < n; i++) {
		if (threads)
			pthread_join(tid[i], NULL);
		else
			waitpid(pid[i], NULL, 0);
	}
	long ops = 0;
	for (int i = 0; i < n; i++)
		ops += tasks[i].ops;
	printf("ops/s: %.0f\nper_task_ops/s: %.0f\ntasks: %d\n", ops / elapsed, ops / elapsed / n, n);
	return 0;
}
