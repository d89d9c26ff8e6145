/*
 * Guest workload for the postcopy benchmark: it owns a working set of
 * 4 KiB pages with a verifiable pattern and keeps accessing them (read,
 * verify, write), timing every access.  A line on stdin (the serial
 * console: the benchmark sends one just before the switchover) starts a
 * new epoch.  In it, it keeps the latency of the first access to each
 * page, which is where postcopy stalls a vCPU, until the next line (the
 * benchmark sends it when postcopy is over) closes the epoch.  The epoch
 * starts before the switchover: the pause itself cannot be seen from
 * inside the guest (under TCG the guest's clocks stop with the VM), and
 * the source may run the guest on for a while after it was told to
 * switch.  So the closing line carries the cut: how long after the start
 * of the epoch the guest stopped on the source (the benchmark knows it
 * from the host's clock, which the guest's follows while it runs), and
 * the report of a closed epoch counts only the stalls and first touches
 * that ended after the cut: those of postcopy.  It reports JSON lines on
 * stdout (the serial console):
 *
 *   {"ready": ...}            after filling the working set
 *   {"epoch": E, ...}         every second: the first-touch latency
 *                             histogram of epoch E so far (log2 buckets
 *                             of microseconds, 24 of them as QEMU's
 *                             postcopy-latency-dist), accesses,
 *                             pages found corrupted, and the stalls:
 *                             every access of the epoch (not only first
 *                             touches) slower than STALL_US, their
 *                             number, summed time and the slowest
 *                             (and, once the epoch is closed with a
 *                             cut, "cut_us" and when after the cut the
 *                             slowest began, "stall_max_at_ms")
 *   {"tick": S, "accesses": N}  every TICK_US in between: the seconds
 *                             since the start (to the millisecond: the
 *                             console may deliver these late and in
 *                             bursts, so the benchmark takes intervals
 *                             from them) and the accesses so far, for
 *                             the benchmark's timeline
 *   {"done": ...}             at the end
 *
 * The lines in: an empty line arms an epoch; the next line, empty or a
 * number of microseconds (the cut), closes it.
 *
 * Usage: workload MIB MODE THREADS SECONDS
 *   MODE: random (uniform over all pages), seq (each thread walks its
 *   pages in order), hot (90 % of accesses to a tenth of the pages).
 *   Thread T owns the pages whose index is T modulo THREADS, so that the
 *   threads touch neighbouring 4 KiB pieces of the same huge pages.
 *
 * Copyright (c) 2026 The postcopy-ram-hgm authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define WORDS (PAGE / 8)
#define BUCKETS 24
/*
 * An access slower than this stalled: a 4 KiB read, check and write
 * takes a few microseconds, under TCG too (first touch p50 about 6 us)
 */
#define STALL_US 50
/* How often the accesses so far are reported (ten times a second) */
#define TICK_US 100000

static uint64_t *mem;
static uint32_t *version;               /* per page, owned by its thread */
static uint64_t npages;
static unsigned nthreads;
static enum { RANDOM, SEQ, HOT } mode;
static atomic_int epoch, closed;
static _Atomic uint8_t *touched_epoch;  /* per page: last epoch touched */
static atomic_uint_fast64_t hist[BUCKETS];
static atomic_uint_fast64_t first_touches, accesses, corrupt, max_ns;
static atomic_uint_fast64_t stalls, stall_ns, stall_max_ns;
/*
 * Every stall and every first touch of the epoch: the microsecond of the
 * epoch it ended in and how long it took, for the cut (written after the
 * access is timed; us 0: not written yet)
 */
struct event {
    uint32_t end_us, us;
};
#define STALL_LOG (1u << 18)
static struct event *stall_log, *touch_log;
static atomic_uint_fast64_t nstall_log, ntouch_log;
static atomic_uint_fast64_t epoch_t0_ns;
static int64_t cut_us = -1;             /* of the closed epoch; -1: none */
static atomic_int stop;
#define MAX_THREADS 64
static atomic_uint_fast64_t per_thread[MAX_THREADS];

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline uint64_t pattern(uint64_t page, unsigned w, uint32_t v)
{
    return ((page << 12 | w) * 0x9e3779b97f4a7c15ull) ^ v;
}

static unsigned bucket(uint64_t ns)
{
    uint64_t us = ns / 1000;
    unsigned b = 0;

    while (us > 1 && b < BUCKETS - 1) {
        us >>= 1;
        b++;
    }
    return b;
}

/* Note an event of the epoch ending at @t1 and taking @ns in @log[*@n] */
static void log_event(struct event *log, atomic_uint_fast64_t *n,
                      uint64_t max, uint64_t t1, uint64_t ns)
{
    uint64_t i = atomic_fetch_add(n, 1);

    if (i < max) {
        log[i].end_us = (t1 - atomic_load(&epoch_t0_ns)) / 1000;
        log[i].us = MAX(ns / 1000, 1);  /* 0 is "not written yet" */
    }
}

/* Read and check page @p, then write its next version */
static void access_page(uint64_t p)
{
    uint64_t *w = mem + p * WORDS;
    uint32_t v = version[p];
    int e0 = atomic_load(&epoch), bad = 0, e;
    uint64_t t0 = now_ns(), t1;

    for (unsigned i = 0; i < WORDS; i++) {
        bad |= w[i] != pattern(p, i, v);
    }
    for (unsigned i = 0; i < WORDS; i++) {
        w[i] = pattern(p, i, v + 1);
    }
    version[p] = v + 1;
    t1 = now_ns();

    e = atomic_load(&epoch);
    if (bad) {
        atomic_fetch_add(&corrupt, 1);
    }
    atomic_fetch_add(&accesses, 1);
    /* An access that spans the start of an epoch does not count in it */
    if (e == e0 && !atomic_load(&closed) && t1 - t0 > STALL_US * 1000) {
        uint64_t ns = t1 - t0, m = atomic_load(&stall_max_ns);

        atomic_fetch_add(&stalls, 1);
        atomic_fetch_add(&stall_ns, ns);
        log_event(stall_log, &nstall_log, STALL_LOG, t1, ns);
        while (ns > m && !atomic_compare_exchange_weak(&stall_max_ns, &m, ns)) {
        }
    }
    if (e == e0 && !atomic_load(&closed) &&
        atomic_exchange(&touched_epoch[p], (uint8_t)e) != (uint8_t)e) {
        uint64_t ns = t1 - t0, m = atomic_load(&max_ns);

        atomic_fetch_add(&hist[bucket(ns)], 1);
        atomic_fetch_add(&first_touches, 1);
        log_event(touch_log, &ntouch_log, npages, t1, ns);
        while (ns > m && !atomic_compare_exchange_weak(&max_ns, &m, ns)) {
        }
    }
}

static void *worker(void *opaque)
{
    unsigned t = (uintptr_t)opaque;
    uint64_t mine = (npages - t + nthreads - 1) / nthreads;
    uint64_t x = 0x12345678u + t * 7919, i = 0;

    while (!atomic_load(&stop)) {
        uint64_t k;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        switch (mode) {
        case SEQ:
            k = i++ % mine;
            break;
        case HOT:
            k = (x % 10) ? (x >> 8) % (mine / 10 + 1) : (x >> 8) % mine;
            break;
        default:
            k = (x >> 8) % mine;
        }
        access_page(k * nthreads + t);
        atomic_fetch_add(&per_thread[t], 1);
    }
    return NULL;
}

/* A line on stdin starts an epoch, the next one closes it */
static void *epoch_reader(void *opaque)
{
    int64_t num = -1;
    char c;

    while (read(0, &c, 1) == 1) {
        if (c >= '0' && c <= '9') {
            num = (num < 0 ? 0 : num * 10) + c - '0';
            continue;
        }
        if (c != '\n') {
            continue;
        }
        flockfile(stdout);
        if (atomic_load(&epoch) && !atomic_load(&closed)) {
            cut_us = num;
            atomic_store(&closed, 1);
            printf("{\"closed\": %d, \"cut_us\": %lld}\n",
                   atomic_load(&epoch), (long long)cut_us);
        } else {
            for (int b = 0; b < BUCKETS; b++) {
                atomic_store(&hist[b], 0);
            }
            atomic_store(&first_touches, 0);
            atomic_store(&max_ns, 0);
            atomic_store(&stalls, 0);
            atomic_store(&stall_ns, 0);
            atomic_store(&stall_max_ns, 0);
            atomic_store(&nstall_log, 0);
            atomic_store(&ntouch_log, 0);
            cut_us = -1;
            atomic_store(&epoch_t0_ns, now_ns());
            atomic_store(&closed, 0);
            atomic_fetch_add(&epoch, 1);
            printf("{\"armed\": %d}\n", atomic_load(&epoch));
        }
        num = -1;
        fflush(stdout);
        funlockfile(stdout);
    }
    return NULL;
}

/*
 * One line of JSON, written whole: the reader thread's lines must not land
 * in the middle of it (the benchmark would miss both).  The stdio lock is
 * recursive, so printf() may take it again inside.
 */
static void report(const char *kind, double secs)
{
    uint64_t ft = atomic_load(&first_touches), max_us = atomic_load(&max_ns);
    uint64_t st = atomic_load(&stalls), st_us = atomic_load(&stall_ns);
    uint64_t st_max_us = atomic_load(&stall_max_ns), st_max_end = 0;
    uint64_t h[BUCKETS];
    bool cut;

    flockfile(stdout);
    /* Read under the stdio lock: the reader thread closes under it too */
    cut = atomic_load(&closed) && cut_us >= 0;
    for (int b = 0; b < BUCKETS; b++) {
        h[b] = atomic_load(&hist[b]);
    }
    max_us /= 1000;
    st_us /= 1000;
    st_max_us /= 1000;
    if (cut) {
        /* The closed epoch from its cut on: from the logs */
        uint64_t n = MIN(atomic_load(&nstall_log), STALL_LOG);

        st = st_us = st_max_us = 0;
        for (uint64_t i = 0; i < n; i++) {
            /* Of a stall that began before the cut, the part after it */
            int64_t us = MIN((int64_t)stall_log[i].us,
                             (int64_t)stall_log[i].end_us - cut_us);

            if (stall_log[i].us && us > 0) {
                st++;
                st_us += us;
                if ((uint64_t)us > st_max_us) {
                    st_max_us = us;
                    st_max_end = stall_log[i].end_us;
                }
            }
        }
        n = MIN(atomic_load(&ntouch_log), npages);
        ft = max_us = 0;
        memset(h, 0, sizeof(h));
        for (uint64_t i = 0; i < n; i++) {
            if (touch_log[i].us && touch_log[i].end_us >= cut_us) {
                ft++;
                h[bucket(touch_log[i].us * 1000ull)]++;
                max_us = MAX(max_us, touch_log[i].us);
            }
        }
    }
    printf("{\"%s\": %.1f, \"epoch\": %d, \"accesses\": %llu,"
           " \"first_touches\": %llu, \"corrupt\": %llu, \"max_us\": %llu,"
           " \"stalls\": %llu, \"stall_us\": %llu, \"stall_max_us\": %llu,",
           kind, secs, atomic_load(&epoch),
           (unsigned long long)atomic_load(&accesses),
           (unsigned long long)ft,
           (unsigned long long)atomic_load(&corrupt),
           (unsigned long long)max_us,
           (unsigned long long)st, (unsigned long long)st_us,
           (unsigned long long)st_max_us);
    if (cut) {
        printf(" \"cut_us\": %lld, \"stall_max_at_ms\": %lld,"
               " \"stall_log_full\": %d,", (long long)cut_us,
               st_max_us ? (long long)(st_max_end - st_max_us - cut_us) /
               1000 : -1, atomic_load(&nstall_log) > STALL_LOG);
    }
    printf(" \"hist_us_log2\": [");
    for (int b = 0; b < BUCKETS; b++) {
        printf("%s%llu", b ? ", " : "", (unsigned long long)h[b]);
    }
    printf("], \"per_thread\": [");
    for (unsigned t = 0; t < nthreads; t++) {
        printf("%s%llu", t ? ", " : "",
               (unsigned long long)atomic_load(&per_thread[t]));
    }
    printf("]}\n");
    fflush(stdout);
    funlockfile(stdout);
}

/* The accesses so far: a short line, so that it costs the guest little */
static void tick(double secs)
{
    flockfile(stdout);
    printf("{\"tick\": %.3f, \"accesses\": %llu}\n", secs,
           (unsigned long long)atomic_load(&accesses));
    fflush(stdout);
    funlockfile(stdout);
}

int main(int argc, char **argv)
{
    uint64_t mib, t0;
    unsigned seconds;
    pthread_t *th, reader;

    if (argc != 5) {
        fprintf(stderr, "usage: %s MIB random|seq|hot THREADS SECONDS\n",
                argv[0]);
        return 2;
    }
    mib = strtoull(argv[1], NULL, 0);
    mode = !strcmp(argv[2], "seq") ? SEQ : !strcmp(argv[2], "hot") ? HOT
                                                                  : RANDOM;
    nthreads = atoi(argv[3]);
    seconds = atoi(argv[4]);
    npages = mib * 1024 * 1024 / PAGE;
    if (!npages || !nthreads || nthreads > MAX_THREADS ||
        npages < nthreads * 10) {
        fprintf(stderr, "workload: working set too small\n");
        return 2;
    }
    mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    version = calloc(npages, sizeof(*version));
    touched_epoch = calloc(npages, 1);
    th = calloc(nthreads, sizeof(*th));
    /* Populated now, so that they are the guest's before the epoch */
    stall_log = mmap(NULL, STALL_LOG * sizeof(*stall_log),
                     PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    touch_log = mmap(NULL, npages * sizeof(*touch_log),
                     PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (mem == MAP_FAILED || !version || !touched_epoch || !th ||
        stall_log == MAP_FAILED || touch_log == MAP_FAILED) {
        perror("workload: allocation");
        return 1;
    }
    t0 = now_ns();
    for (uint64_t p = 0; p < npages; p++) {
        for (unsigned i = 0; i < WORDS; i++) {
            mem[p * WORDS + i] = pattern(p, i, 0);
        }
    }
    printf("{\"ready\": %.1f, \"pages\": %llu, \"threads\": %u,"
           " \"mode\": \"%s\"}\n", (now_ns() - t0) / 1e9,
           (unsigned long long)npages, nthreads, argv[2]);
    fflush(stdout);

    pthread_create(&reader, NULL, epoch_reader, NULL);
    t0 = now_ns();
    for (unsigned t = 0; t < nthreads; t++) {
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    }
    for (unsigned n = 1; (now_ns() - t0) / 1000000000ull < seconds; n++) {
        usleep(TICK_US);
        if (n % (1000000 / TICK_US)) {
            tick((now_ns() - t0) / 1e9);
        } else {
            report("t", (now_ns() - t0) / 1e9);
        }
    }
    atomic_store(&stop, 1);
    for (unsigned t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
    }
    report("done", (now_ns() - t0) / 1e9);
    return 0;
}
