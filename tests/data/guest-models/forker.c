/* Two threads pinned to vCPUs 0 and 1 each fork and reap a child that exits at once, N times: the kernel
 * data both vCPUs write (tasklist_lock, the parent's mm and signal state) bounces between them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long n;

static void *forker(void *arg)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((long)arg, &set);
    sched_setaffinity(0, sizeof(set), &set);
    for (long i = 0; i < n; i++) {
        pid_t child = fork();
        if (child == 0)
            _exit(0);
        waitpid(child, NULL, 0);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t[2];
    n = atol(argv[1]);
    for (long c = 0; c < 2; c++)
        pthread_create(&t[c], NULL, forker, (void *)c);
    for (int c = 0; c < 2; c++)
        pthread_join(t[c], NULL);
    return 0;
}
