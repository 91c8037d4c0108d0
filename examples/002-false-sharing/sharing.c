/*
 * sharing: a lock word next to a read-mostly field, or padded apart.
 *
 * A writer thread takes and releases a spinlock in a loop (a locked xchg and
 * a release store: the lock word's cache line is written every iteration).
 * A reader thread on another CPU reads a field that never changes, a fixed
 * number of times; the writer keeps going until the reader is done.  When
 * the two share a cache line (the default build), every write of the lock
 * word invalidates the reader's copy and the next read must fetch the line
 * back: false sharing, as with optimistic_spin_node's `cpu` field read by
 * other CPUs while its owner writes `locked` and `next`.  With -DPADDED the
 * field sits on its own 64-byte line (alignas(64)) and the reader hits its
 * own cache.
 *
 * The threads are pinned with pthread_setaffinity_np: the writer to the
 * first CPU of the process's allowed set, the reader to the second.
 *
 * The reader times its reads in chunks and checks, per chunk, whether the
 * writer made progress meanwhile (a counter on a line of its own, bumped
 * every 64 lock/unlock pairs).  `reader ns/read` is the median chunk time of
 * the chunks that overlapped the writer, per read: what the reads cost while
 * both threads run, unmoved by either thread losing its CPU for a while on
 * a shared machine.  `reader ops/s` is the plain rate over the whole run.
 *
 * Usage: sharing READS   (READS a multiple of 4096; checksum = READS)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PADDED
#define LINE alignas(64)
#else
#define LINE
#endif

#define CHUNK 4096              /* reads timed together */

struct node {
	LINE int lock;          /* written by the writer on every iteration */
	long held;              /* the writer's own counter, under the lock */
	LINE long cpu;          /* read-mostly: set once, read by the reader */
};

static alignas(64) struct node node = { .cpu = 2 };
static alignas(64) long progress; /* bumped by the writer every 64 pairs */
static alignas(64) int started;   /* both threads pinned: start together */
static alignas(64) int done;      /* the reader finished its reads */
static long reads;
static int cpus[2];
static double writer_s, reader_s;
static long reader_sum;
static double *chunk_ns;          /* time of each chunk that overlapped the writer */
static long overlapped;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void pin_and_wait(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		fprintf(stderr, "sharing: cannot pin a thread to CPU %d: %s\n", cpu, strerror(err));
		exit(1);
	}
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < 2)
		;
}

static void *writer(void *arg)
{
	(void)arg;
	pin_and_wait(cpus[0]);
	double t0 = now();
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < 64; i++) {
			while (__atomic_exchange_n(&node.lock, 1, __ATOMIC_ACQUIRE))
				;
			node.held++;
			__atomic_store_n(&node.lock, 0, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&progress, progress + 1, __ATOMIC_RELAXED);
	}
	writer_s = now() - t0;
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	pin_and_wait(cpus[1]);
	long sum = 0;
	double t0 = now();
	for (long c = 0; c < reads / CHUNK; c++) {
		long p0 = __atomic_load_n(&progress, __ATOMIC_RELAXED);
		double c0 = now();
		for (int i = 0; i < CHUNK; i++)
			sum += __atomic_load_n(&node.cpu, __ATOMIC_RELAXED);
		double c1 = now();
		if (__atomic_load_n(&progress, __ATOMIC_RELAXED) != p0)
			chunk_ns[overlapped++] = (c1 - c0) * 1e9;
	}
	reader_s = now() - t0;
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	reader_sum = sum;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The first two CPUs this process may run on. */
static int two_cpus(void)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n == 2;
}

int main(int argc, char **argv)
{
	pthread_t w, r;

	reads = argc > 1 ? atol(argv[1]) : 100 * CHUNK * 1024;
	if (reads <= 0 || reads % CHUNK) {
		fprintf(stderr, "sharing: READS must be a positive multiple of %d\n", CHUNK);
		return 2;
	}
	if (!two_cpus()) {
		fprintf(stderr, "sharing: needs two CPUs in its affinity mask (taskset -c 0,1)\n");
		return 1;
	}
	chunk_ns = malloc(sizeof(double) * (reads / CHUNK));
	if (!chunk_ns) {
		perror("sharing: malloc");
		return 1;
	}
	pthread_create(&w, NULL, writer, NULL);
	pthread_create(&r, NULL, reader, NULL);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	if (overlapped == 0) {
		fprintf(stderr, "sharing: the writer never ran while the reader read: no contended time to report\n");
		return 1;
	}
	qsort(chunk_ns, overlapped, sizeof(double), by_value);
	printf("reader ns/read: %.4f\n", chunk_ns[overlapped / 2] / CHUNK);
	printf("overlapped chunks: %.1f %%\n", 100.0 * overlapped / (reads / CHUNK));
	printf("reader ops/s: %.0f\nwriter ops/s: %.0f\nchecksum: %ld\n",
	       reads / reader_s, node.held / writer_s, reader_sum / node.cpu);
	return 0;
}
