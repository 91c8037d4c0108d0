/*
 * mprotect: threads of one process contending for its mmap_lock, for
 * kernel study 002.
 *
 * N threads, pinned round-robin to the CPUs the program may use, each own
 * a few pages of one shared mapping and, OPS times, make them read-only,
 * writable again, and write to each.  mprotect() takes the mm's mmap_lock
 * for writing and, while holding it, flushes the TLBs of the other CPUs
 * running the mm by IPI and waits for them; a thread that finds the lock
 * held spins on its owner (rwsem_optimistic_spin()), queued behind the
 * other spinners on the lock's osq_lock, as mutex_optimistic_spin() queues
 * on a mutex's.  The queued spinners poll their predecessor's per-CPU
 * osq_node: its `cpu`, on the line their neighbours write.
 *
 * Usage: mprotect THREADS OPS
 * Prints ops (all threads), per_thread_ops/s (the guest's clock) and
 * elapsed_s.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define PAGES 4                 /* pages each thread owns */

struct worker {
	int cpu;                /* the CPU this thread is pinned to */
	long ops;               /* protect/unprotect/write rounds to do */
	long done;              /* rounds done */
	char *mem;              /* its PAGES pages */
	char pad[32];           /* one cache line per worker */
};

static long page;

static void *loop(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("mprotect: sched_setaffinity");
		exit(1);
	}
	for (long i = 0; i < w->ops; i++) {
		if (mprotect(w->mem, PAGES * page, PROT_READ) ||
		    mprotect(w->mem, PAGES * page, PROT_READ | PROT_WRITE)) {
			perror("mprotect: mprotect");
			exit(1);
		}
		for (int p = 0; p < PAGES; p++)
			w->mem[p * page]++;
		w->done++;
	}
	return NULL;
}

/* The CPUs this process may run on, in order; returns their number. */
static int allowed_cpus(int *cpus)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set)) {
		perror("mprotect: sched_getaffinity");
		exit(1);
	}
	int n = 0;
	for (int c = 0; c < CPU_SETSIZE && n < MAX_THREADS; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mprotect THREADS OPS\n");
		return 2;
	}
	int n = atoi(argv[1]);
	long ops = atol(argv[2]);
	if (n < 1 || n > MAX_THREADS || ops < 1) {
		fprintf(stderr, "mprotect: THREADS must be 1..%d and OPS at least 1\n", MAX_THREADS);
		return 2;
	}
	page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, (size_t)n * PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mprotect: mmap");
		return 1;
	}
	int cpus[MAX_THREADS];
	int ncpus = allowed_cpus(cpus);
	static struct worker workers[MAX_THREADS];
	pthread_t threads[MAX_THREADS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		workers[i].cpu = cpus[i % ncpus];
		workers[i].ops = ops;
		workers[i].mem = mem + (size_t)i * PAGES * page;
		int err = pthread_create(&threads[i], NULL, loop, &workers[i]);
		if (err) {
			fprintf(stderr, "mprotect: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	long done = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		done += workers[i].done;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("ops: %ld\nper_thread_ops/s: %.1f\nelapsed_s: %.4f\n", done, done / elapsed / n, elapsed);
	return 0;
}
