/* cacheline.c: the hardware floor under small-message latency on this host. Two threads,
 * pinned to two CPUs, bounce one 64-byte line: each waits for the other's increment and then
 * increments. Prints the median and minimum one-way latency (half a round trip) over batches,
 * and the single-core memcpy bandwidth of a 64 MiB copy (the floor of large-message work).
 * Built and run by bench/run_bench.py; by hand: cc -O2 -pthread bench/cacheline.c && ./a.out */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 20000
#define BATCHES 25

static _Alignas(64) volatile uint64_t line[8];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *responder(void *arg) {
    pin(*(int *)arg);
    for (uint64_t v = 1; v < 2ull * ROUNDS * BATCHES; v += 2) {
        while (line[0] != v) __builtin_ia32_pause();
        line[0] = v + 1;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    int cpus[2] = {0, 1};
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2) {
        int k = 0;
        for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &set)) cpus[k++] = c;
    } else {
        printf("{\"error\": \"fewer than 2 CPUs\"}\n");
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, responder, &cpus[1]);
    pin(cpus[0]);
    double one_way[BATCHES];
    uint64_t v = 0;
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < ROUNDS; i++) {
            line[0] = ++v;
            while (line[0] != v + 1) __builtin_ia32_pause();
            v++;
        }
        one_way[b] = (double)(now_ns() - t0) / ROUNDS / 2.0;
    }
    pthread_join(t, NULL);
    qsort(one_way, BATCHES, sizeof one_way[0], cmp);
    size_t bytes = 64u << 20;
    char *a = malloc(bytes), *c = malloc(bytes);
    memset(a, 1, bytes);
    memset(c, 2, bytes);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = now_ns();
        memcpy(c, a, bytes);
        double s = (double)(now_ns() - t0) / 1e9;
        if (s < best) best = s;
    }
    printf("{\"cpus\": [%d, %d], \"one_way_ns_p50\": %.1f, \"one_way_ns_min\": %.1f, "
           "\"memcpy_gbs\": %.2f, \"check\": %d}\n",
           cpus[0], cpus[1], one_way[BATCHES / 2], one_way[0], (double)bytes / best / 1e9,
           c[bytes - 1]);
    free(a);
    free(c);
    return 0;
}
