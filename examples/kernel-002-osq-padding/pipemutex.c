/*
 * pipemutex: threads contending for one kernel mutex, for kernel study 002.
 *
 * N threads, pinned round-robin to the CPUs the program may use, each
 * write one byte into a shared pipe and read one byte back, OPS times.
 * pipe_write() and pipe_read() both take the pipe's mutex, so the threads
 * contend for it: a thread that finds it held by a thread running on
 * another CPU spins (mutex_optimistic_spin(), queued on the mutex's
 * osq_lock) instead of sleeping.  Every byte written is read back, so all
 * threads finish; a read may sleep until another thread writes.
 *
 * Usage: pipemutex THREADS OPS
 * Prints ops (all threads), per_thread_ops/s (the guest's clock) and
 * elapsed_s.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

struct worker {
	int cpu;                /* the CPU this thread is pinned to */
	long ops;               /* write+read pairs to do */
	long done;              /* pairs done */
	char pad[40];           /* one cache line per worker */
};

static int pipefd[2];

static void *loop(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("pipemutex: sched_setaffinity");
		exit(1);
	}
	char c = 'x';
	for (long i = 0; i < w->ops; i++) {
		if (write(pipefd[1], &c, 1) != 1 || read(pipefd[0], &c, 1) != 1) {
			perror("pipemutex: pipe");
			exit(1);
		}
		w->done++;
	}
	return NULL;
}

/* The CPUs this process may run on, in order; returns their number. */
static int allowed_cpus(int *cpus)
{
	cpu_set_t set;
	int n = 0;
	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < CPU_SETSIZE && n < MAX_THREADS; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: pipemutex THREADS OPS\n");
		return 2;
	}
	int n = atoi(argv[1]);
	long ops = atol(argv[2]);
	if (n < 1 || n > MAX_THREADS || ops < 1) {
		fprintf(stderr, "pipemutex: THREADS must be 1..%d and OPS at least 1\n", MAX_THREADS);
		return 2;
	}
	if (pipe(pipefd)) {
		perror("pipemutex: pipe");
		return 1;
	}
	int cpus[MAX_THREADS], ncpu = allowed_cpus(cpus);
	static struct worker workers[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		workers[i].cpu = cpus[i % ncpu];
		workers[i].ops = ops;
		int err = pthread_create(&tid[i], NULL, loop, &workers[i]);
		if (err) {
			fprintf(stderr, "pipemutex: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double elapsed = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	long done = 0;
	for (int i = 0; i < n; i++)
		done += workers[i].done;
	printf("ops: %ld\nper_thread_ops/s: %.1f\nelapsed_s: %.4f\n", done, done / elapsed / n, elapsed);
	return 0;
}
