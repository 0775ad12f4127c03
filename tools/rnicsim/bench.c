/* `rnicsim bench`: how fast is the simulator on this machine?
 *
 *   1. hold model: the event core alone with 100,000 pending events
 *      (sim_bench_hold in the core);
 *   2. a 64 B RDMA WRITE bandwidth stream between two hosts (perftest);
 *   3. a 64 KiB RDMA WRITE bandwidth stream between two hosts.
 *
 * For each: wall time, events per wall second and simulated packets per
 * wall second (sum of NIC pkts_tx / wall), medians of --reps runs.
 * `--json FILE` writes the numbers (this file holds wall-clock values, so
 * it is not deterministic, unlike a run's results). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/config/json.h"
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

struct bench_def {
    const char *name;
    const char *scenario; /* NULL: the hold model */
};

static const struct bench_def benches[] = {
    {"hold 100k pending", NULL},
    {"write 64B stream", STREAM_SCENARIO("64", "400000")},
    {"write 64KiB stream", STREAM_SCENARIO("65536", "30000")},
};
#define N_BENCHES (sizeof(benches) / sizeof(benches[0]))

struct bench_sample {
    double wall_s;
    uint64_t events, pkts;
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
};

int bench_main(int argc, char **argv)
{
    unsigned long reps = 5;
    const char *json_path = NULL;
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
        } else {
            fprintf(stderr, "usage: rnicsim bench [--reps N] [--json FILE]\n");
            return 2;
        }
    }
    struct bench_result res[N_BENCHES];
    printf("%-20s %10s %12s %12s %14s\n", "benchmark", "wall[s]", "events", "M events/s",
           "M sim pkts/s");
    for (size_t b = 0; b < N_BENCHES; b++) {
        double wall[BENCH_MAX_REPS], evs[BENCH_MAX_REPS], pps[BENCH_MAX_REPS];
        struct bench_sample smp = {0};
        for (unsigned long k = 0; k < reps; k++) {
            int rc = benches[b].scenario ? run_stream(&benches[b], &smp) : run_hold(&smp, k + 1);
            if (rc)
                return 1;
            double w = smp.wall_s > 0 ? smp.wall_s : 1e-9;
            wall[k] = smp.wall_s;
            evs[k] = (double)smp.events / w;
            pps[k] = (double)smp.pkts / w;
        }
        res[b].wall_s = median(wall, reps);
        res[b].events_per_s = median(evs, reps);
        res[b].pkts_per_s = median(pps, reps);
        res[b].events = smp.events;
        res[b].pkts = smp.pkts;
        printf("%-20s %10.3f %12" PRIu64 " %12.2f %14.3f\n", benches[b].name, res[b].wall_s,
               res[b].events, res[b].events_per_s / 1e6, res[b].pkts_per_s / 1e6);
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
            json_object_begin(w);
            json_kv_str(w, "name", benches[b].name);
            json_kv_double(w, "wall_s", res[b].wall_s);
            json_kv_u64(w, "events", res[b].events);
            json_kv_double(w, "events_per_s", res[b].events_per_s);
            json_kv_u64(w, "sim_pkts", res[b].pkts);
            json_kv_double(w, "sim_pkts_per_s", res[b].pkts_per_s);
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
