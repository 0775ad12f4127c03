/* `rnicsim bench`: how fast is the simulator on this machine?
 *
 *   1. hold model: the event core alone with 100,000 pending events
 *      (sim_bench_hold in the core);
 *   2. a 64 B RDMA WRITE bandwidth stream between two hosts (perftest);
 *   3. a 64 KiB RDMA WRITE bandwidth stream between two hosts;
 *   4. the permutation of docs/performance.md (a 2-tier leaf-spine at
 *      100 Gb/s, 4 KiB MTU, PFC, every host WRITEs one flow to a distinct
 *      other host through the built-in traffic generator, payload: none)
 *      at 128 hosts x 1 MiB, 1024 x 64 KiB and 1024 x 1 MiB;
 *   5. the host model's cache-line map (sim/host/mem.c) alone: the NIC
 *      writes a 64 MiB window in 4 KiB pieces (one map update per page),
 *      a core reads it back (one per line); "events" are lines, so M ev/s
 *      is millions of lines per second.
 *
 * The permutations run in a child process each, so that their CPU time
 * (user + system) and peak RSS are theirs alone (wait4's rusage).
 * For each: wall time, events per wall second and simulated packets per
 * wall second (sum of NIC pkts_tx / wall), medians of --reps runs.
 * `--json FILE` writes the numbers (this file holds wall-clock values, so
 * it is not deterministic, unlike a run's results). */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/config/json.h"
#include "sim/host/mem.h"
#include "tools/rnicsim/rnicsim.h"

#define BENCH_HOLD_PENDING 100000u
#define BENCH_HOLD_OPS 5000000u
#define BENCH_MAX_REPS 101

/* Two hosts back to back, C default hardware (no profile lookup needed),
 * one perftest WRITE bandwidth pair at one message size. */
#define STREAM_SCENARIO(size, iters)                                                               \
    "name: bench-write-" size "\n"                                                                 \
    "stop_time: 100s\n"                                                                            \
    "topology: {kind: back-to-back, hosts: 2, link: {rate: 100Gbps, delay: 10ns}}\n"               \
    "programs:\n"                                                                                  \
    "  - {host: h1, program: perftest, args: [--server, --tests=write, --modes=bw, --sizes=" size  \
    ", --bw-iters=" iters ", --warmup=0]}\n"                                                       \
    "  - {host: h0, program: perftest, args: [--client, --tests=write, --modes=bw, --sizes=" size  \
    ", --bw-iters=" iters ", --warmup=0]}\n"

/* The permutation: L leaves x H hosts, H spines (no oversubscription). */
#define PERM_SCENARIO(leaves, hosts, size)                                                         \
    "name: bench-perm\n"                                                                           \
    "seed: 1\n"                                                                                    \
    "stop_time: 1s\n"                                                                              \
    "payload: none\n"                                                                              \
    "topology: {kind: leaf-spine, leaves: " leaves ", spines: " hosts ", hosts_per_leaf: " hosts   \
    ", link: {rate: 100Gbps, delay: 1us}, switch: {latency: 0ns, buffer: 1MiB}, pfc: {}}\n"        \
    "traffic: {pattern: permutation, size: " size "}\n"

struct bench_def {
    const char *name;
    const char *scenario; /* NULL: the hold model, or `linemap` */
    bool child;           /* run in a child process: CPU time and peak RSS of its own */
    bool linemap;         /* the host model's line map alone */
};

static const struct bench_def benches[] = {
    {"hold 100k pending", NULL, false, false},
    {"write 64B stream", STREAM_SCENARIO("64", "400000"), false, false},
    {"write 64KiB stream", STREAM_SCENARIO("65536", "30000"), false, false},
    {"perm 128 x 1MiB", PERM_SCENARIO("8", "16", "1MiB"), true, false},
    {"perm 1024 x 64KiB", PERM_SCENARIO("32", "32", "64KiB"), true, false},
    {"perm 1024 x 1MiB", PERM_SCENARIO("32", "32", "1MiB"), true, false},
    {"host line map", NULL, false, true},
};
#define N_BENCHES (sizeof(benches) / sizeof(benches[0]))

struct bench_sample {
    double wall_s;
    uint64_t events, pkts;
    double cpu_s;     /* child runs: user + system CPU */
    uint64_t rss_kib; /* child runs: peak resident set */
};

/* One stream run with the programs' stdout silenced. */
static int run_stream(const struct bench_def *b, struct bench_sample *out)
{
    struct cfg_error err = {{0}};
    struct scenario *s = scenario_load(b->name, b->scenario, NULL, &err);
    if (!s) {
        fprintf(stderr, "rnicsim bench: built-in scenario: %s\n", err.msg);
        return -1;
    }
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int null_fd = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null_fd >= 0)
        dup2(null_fd, STDOUT_FILENO);
    char why[256];
    struct run *r = run_scenario(s, false, why, sizeof(why));
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    if (null_fd >= 0)
        close(null_fd);
    if (!r) {
        fprintf(stderr, "rnicsim bench: %s\n", why);
        scenario_free(s);
        return -1;
    }
    int rc = r->result == RUN_DONE ? 0 : -1;
    if (rc)
        fprintf(stderr, "rnicsim bench: %s ended with %s\n", b->name, run_result_name(r->result));
    out->wall_s = r->wall_s;
    out->events = r->events;
    out->pkts = world_pkts_tx(r->world);
    run_free(r);
    scenario_free(s);
    return rc;
}

/* The scenario in a child process; its numbers come back through a pipe,
 * its CPU time and peak RSS from wait4. */
static int run_child(const struct bench_def *b, struct bench_sample *out)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        struct bench_sample s = {0};
        int rc = run_stream(b, &s);
        ssize_t w = write(fd[1], &s, sizeof(s));
        _exit(rc || w != (ssize_t)sizeof(s) ? 1 : 0);
    }
    close(fd[1]);
    struct bench_sample s = {0};
    ssize_t got = read(fd[0], &s, sizeof(s));
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
        got != (ssize_t)sizeof(s))
        return -1;
    s.cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    s.rss_kib = (uint64_t)ru.ru_maxrss;
    *out = s;
    return 0;
}

static int run_hold(struct bench_sample *out, uint64_t seed)
{
    double wall = 0;
    if (sim_bench_hold(BENCH_HOLD_PENDING, BENCH_HOLD_OPS, seed, &wall) != 0) {
        fprintf(stderr, "rnicsim bench: out of memory for the hold model\n");
        return -1;
    }
    out->wall_s = wall;
    out->events = BENCH_HOLD_OPS;
    out->pkts = 0;
    return 0;
}

/* The line map: 8 rounds of the NIC writing a 64 MiB window in 4 KiB
 * pieces and a core reading it back.  The addresses are only names: the
 * map never touches the memory they would be. */
#define LINEMAP_WINDOW (64u << 20)
#define LINEMAP_ROUNDS 8u
static int run_linemap(struct bench_sample *out)
{
    struct host_cpu_params p;
    host_cpu_params_default(&p);
    struct sim *sim = sim_create(1);
    struct host h;
    if (!sim || host_init(&h, sim, 0, "bench", &p) || !host_mem_get(&h)) {
        fprintf(stderr, "rnicsim bench: out of memory for the line map\n");
        sim_destroy(sim);
        return -1;
    }
    uintptr_t base = (uintptr_t)1 << 40;
    uint64_t lines = 0;
    sim_time_t cpu_ps = 0;
    double t0 = wall_seconds();
    for (unsigned r = 0; r < LINEMAP_ROUNDS; r++) {
        for (uintptr_t off = 0; off < LINEMAP_WINDOW; off += 4096)
            host_dma_wrote(&h, (const void *)(base + off), 4096);
        for (uintptr_t off = 0; off < LINEMAP_WINDOW; off += 4096)
            cpu_ps += host_mem_access(&h, r % 12, 0, base + off, 4096, false);
        lines += 2 * (LINEMAP_WINDOW / 64);
    }
    out->wall_s = wall_seconds() - t0;
    out->events = lines;
    out->pkts = cpu_ps ? 0 : 1; /* keeps the result used */
    host_fini(&h);
    sim_destroy(sim);
    return 0;
}

/* --only "a,b": the name contains one of the comma-separated words. */
static bool selected(const char *name, const char *only)
{
    if (!only)
        return true;
    char word[64];
    for (const char *w = only; *w;) {
        size_t n = strcspn(w, ",");
        if (n && n < sizeof(word)) {
            memcpy(word, w, n);
            word[n] = '\0';
            if (strstr(name, word))
                return true;
        }
        w += n + (w[n] == ',');
    }
    return false;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct bench_result {
    double wall_s, events_per_s, pkts_per_s;
    uint64_t events, pkts;
    double cpu_s, pkts_per_cpu_s; /* child runs */
    uint64_t rss_kib;
};

int bench_main(int argc, char **argv)
{
    unsigned long reps = 5;
    const char *json_path = NULL, *only = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            char *end;
            reps = strtoul(argv[++i], &end, 10);
            if (*end || reps < 1 || reps > BENCH_MAX_REPS) {
                fprintf(stderr, "rnicsim bench: --reps expects 1..%d\n", BENCH_MAX_REPS);
                return 2;
            }
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: rnicsim bench [--reps N] [--only A,B] [--json FILE]\n"
                    "  --only A,B    the benchmarks whose name contains A or B (e.g. perm)\n");
            return 2;
        }
    }
    struct bench_result res[N_BENCHES];
    bool ran[N_BENCHES] = {0};
    printf("%-20s %9s %11s %10s %10s %8s %12s %9s\n", "benchmark", "wall[s]", "events", "M ev/s",
           "sim pkts", "CPU[s]", "pkts/CPU-s", "RSS[MB]");
    for (size_t b = 0; b < N_BENCHES; b++) {
        if (!selected(benches[b].name, only))
            continue;
        double wall[BENCH_MAX_REPS], evs[BENCH_MAX_REPS], pps[BENCH_MAX_REPS];
        double cpu[BENCH_MAX_REPS], ppc[BENCH_MAX_REPS], rss[BENCH_MAX_REPS];
        struct bench_sample smp = {0};
        for (unsigned long k = 0; k < reps; k++) {
            int rc = benches[b].linemap     ? run_linemap(&smp)
                     : !benches[b].scenario ? run_hold(&smp, k + 1)
                     : benches[b].child     ? run_child(&benches[b], &smp)
                                            : run_stream(&benches[b], &smp);
            if (rc) {
                fprintf(stderr, "rnicsim bench: %s failed\n", benches[b].name);
                return 1;
            }
            double w = smp.wall_s > 0 ? smp.wall_s : 1e-9;
            wall[k] = smp.wall_s;
            evs[k] = (double)smp.events / w;
            pps[k] = (double)smp.pkts / w;
            cpu[k] = smp.cpu_s;
            ppc[k] = smp.cpu_s > 0 ? (double)smp.pkts / smp.cpu_s : 0;
            rss[k] = (double)smp.rss_kib;
        }
        ran[b] = true;
        res[b].wall_s = median(wall, reps);
        res[b].events_per_s = median(evs, reps);
        res[b].pkts_per_s = median(pps, reps);
        res[b].cpu_s = median(cpu, reps);
        res[b].pkts_per_cpu_s = median(ppc, reps);
        res[b].rss_kib = (uint64_t)median(rss, reps);
        res[b].events = smp.events;
        res[b].pkts = smp.pkts;
        if (benches[b].child)
            printf("%-20s %9.3f %11" PRIu64 " %10.2f %10" PRIu64 " %8.3f %12.0f %9.1f\n",
                   benches[b].name, res[b].wall_s, res[b].events, res[b].events_per_s / 1e6,
                   res[b].pkts, res[b].cpu_s, res[b].pkts_per_cpu_s,
                   (double)res[b].rss_kib / 1024.0);
        else
            printf("%-20s %9.3f %11" PRIu64 " %10.2f %10" PRIu64 " %8s %12s %9s\n", benches[b].name,
                   res[b].wall_s, res[b].events, res[b].events_per_s / 1e6, res[b].pkts, "-", "-",
                   "-");
        fflush(stdout);
    }
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f) {
            fprintf(stderr, "rnicsim bench: cannot write '%s'\n", json_path);
            return 5;
        }
        struct json_writer *w = json_new_file(f);
        json_object_begin(w);
        json_kv_str(w, "rnicsim", RNICSIM_VERSION);
        json_kv_u64(w, "reps", reps);
        json_kv_array_begin(w, "benchmarks");
        for (size_t b = 0; b < N_BENCHES; b++) {
            if (!ran[b])
                continue;
            json_object_begin(w);
            json_kv_str(w, "name", benches[b].name);
            json_kv_double(w, "wall_s", res[b].wall_s);
            json_kv_u64(w, "events", res[b].events);
            json_kv_double(w, "events_per_s", res[b].events_per_s);
            json_kv_u64(w, "sim_pkts", res[b].pkts);
            json_kv_double(w, "sim_pkts_per_s", res[b].pkts_per_s);
            if (benches[b].child) {
                json_kv_double(w, "cpu_s", res[b].cpu_s);
                json_kv_double(w, "sim_pkts_per_cpu_s", res[b].pkts_per_cpu_s);
                json_kv_u64(w, "peak_rss_kib", res[b].rss_kib);
            }
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
        int rc = json_finish(w);
        if (fclose(f) || rc) {
            fprintf(stderr, "rnicsim bench: error writing '%s'\n", json_path);
            return 5;
        }
    }
    return 0;
}
