/*
 * tlbflush: mmap / touch / munmap in N tasks, a fixed count per task, for
 * kernel study 004 (the fixed-count twin of examples/004-tlb-shootdown's
 * timed mmapbench).
 *
 * Each task maps 128 KiB of anonymous memory, writes one byte per page and
 * unmaps it, OPS times.  With -t the tasks are threads of one process: each
 * munmap must flush the TLB of every other CPU the mm is live on, by IPI
 * (the TLB row of /proc/interrupts), unless that CPU is lazy; mmap and
 * munmap serialize on the mmap_lock.  With -p they are processes with an
 * address space each: no shootdowns.
 *
 * Task i is pinned to the i-th CPU the program may run on (round-robin).
 * The count of operations is fixed, so interrupts per operation compare
 * directly; per_task_ops/s is in the guest's clock (emulated time under
 * TCG).
 *
 * Usage: tlbflush -t|-p TASKS OPS
 * Prints ops (all tasks), per_task_ops/s, elapsed_s and tasks.
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
#define MAX_TASKS 64

struct task {
	int cpu;                /* the CPU this task is pinned to */
	long ops;               /* operations to do */
	long done;              /* operations done */
	char pad[40];           /* one cache line per task */
};

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

static void *loop(void *arg)
{
	struct task *t = arg;
	pin(t->cpu);
	for (long i = 0; i < t->ops; i++) {
		char *p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("tlbflush: mmap");
			exit(1);
		}
		for (long off = 0; off < MAP_BYTES; off += page)
			p[off] = 1;
		munmap(p, MAP_BYTES);
		t->done++;
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

/* Start every task (threads or processes) and wait for all of them. */
static void run(struct task *tasks, int n, int threads)
{
	pthread_t tid[MAX_TASKS];
	pid_t pid[MAX_TASKS];
	for (int i = 0; i < n; i++) {
		if (threads) {
			int err = pthread_create(&tid[i], NULL, loop, &tasks[i]);
			if (err) {
				fprintf(stderr, "tlbflush: pthread_create: %s\n", strerror(err));
				exit(1);
			}
		} else if ((pid[i] = fork()) == 0) {
			loop(&tasks[i]);
			_exit(0);
		} else if (pid[i] < 0) {
			perror("tlbflush: fork");
			exit(1);
		}
	}
	for (int i = 0; i < n; i++) {
		int status = 0;
		if (threads)
			pthread_join(tid[i], NULL);
		else if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "tlbflush: task %d failed\n", i);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	int threads = -1, opt, cpus[MAX_TASKS];
	while ((opt = getopt(argc, argv, "tp")) != -1) {
		if (opt == '?')
			return 2;
		threads = opt == 't';
	}
	if (threads < 0 || argc - optind != 2) {
		fprintf(stderr, "usage: tlbflush -t|-p TASKS OPS\n");
		return 2;
	}
	int n = atoi(argv[optind]);
	long ops = atol(argv[optind + 1]);
	if (n < 1 || n > MAX_TASKS || ops < 1) {
		fprintf(stderr, "tlbflush: TASKS must be 1..%d and OPS at least 1\n", MAX_TASKS);
		return 2;
	}
	int ncpu = allowed_cpus(cpus);
	page = sysconf(_SC_PAGESIZE);
	struct task *tasks = mmap(NULL, sizeof(struct task) * MAX_TASKS, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tasks == MAP_FAILED) {
		perror("tlbflush: mmap");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		tasks[i].cpu = cpus[i % ncpu];
		tasks[i].ops = ops;
	}

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run(tasks, n, threads);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	long done = 0;
	for (int i = 0; i < n; i++)
		done += tasks[i].done;
	printf("ops: %ld\nper_task_ops/s: %.1f\nelapsed_s: %.4f\ntasks: %d\n", done, done / elapsed / n, elapsed, n);
	return 0;
}
