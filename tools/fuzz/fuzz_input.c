/* Fuzz targets for everything rnicsim reads from a user (docs/robustness.md
 * "Fuzzing"): one source, three targets chosen by FUZZ_TARGET at compile
 * time, each an LLVMFuzzerTestOneInput (libFuzzer's entry point):
 *
 *   FUZZ_SCENARIO  the input is a scenario file: scenario_load(), and, if it
 *                  loads, the world is built and run for a bounded time
 *   FUZZ_SET       the input is up to 16 lines, each a --set assignment,
 *                  applied to a small fixed scenario (set_base below), then
 *                  the same as FUZZ_SCENARIO
 *   FUZZ_JSON      the input is a JSON text for jv_parse() (the reader of
 *                  `rnicsim sweep`)
 *
 * What counts as a finding, besides a crash, a hang or a sanitizer report:
 *  - a refused input whose error is not positioned: a scenario error must
 *    read "FILE:LINE:COL: ...", a JSON error "JSON error at byte N: ...";
 *  - a scenario that loads but whose world cannot be built (the loader
 *    must refuse what the models cannot take; exit status 5 is for the
 *    machine failing, not for input).
 * Both abort(), which libFuzzer records as a crash with the input.
 *
 * Built two ways (CMakeLists.txt): with clang's -fsanitize=fuzzer for
 * fuzzing (tools/fuzz.sh), and as a plain program with its own main()
 * (FUZZ_REPLAY) that feeds every file named on its command line to the
 * target: that is how the regression inputs under test/fuzz/ run in the
 * normal test suite, with and without ASan.
 *
 * A run is bounded so that one input costs milliseconds: simulated time
 * at most FUZZ_STOP_PS, at most FUZZ_MAX_EVENTS events, capture files are
 * not written (their paths are still checked by the loader) and shared
 * objects are not loaded (programs_load.c, RNICSIM_FUZZ). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/rnicsim/rnicsim.h"

#if !defined(FUZZ_SCENARIO) && !defined(FUZZ_SET) && !defined(FUZZ_JSON)
#error "define one of FUZZ_SCENARIO, FUZZ_SET, FUZZ_JSON"
#endif

#define FUZZ_STOP_PS (20 * SIM_US)
#define FUZZ_MAX_EVENTS 200000u
#define FUZZ_MAX_SETS 16

#ifdef RNICSIM_SANITIZE_LEAKS
void __lsan_disable(void);
void __lsan_enable(void);
#define LSAN_DISABLE() __lsan_disable()
#define LSAN_ENABLE() __lsan_enable()
#else
#define LSAN_DISABLE() ((void)0)
#define LSAN_ENABLE() ((void)0)
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void finding(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz finding: %s: %s\n", what, msg);
    abort();
}

#if defined(FUZZ_SCENARIO) || defined(FUZZ_SET)
/* Digits at p: their value and the first byte after them (== p: none). */
static const char *digits(const char *p, unsigned long *v)
{
    *v = 0;
    while (*p >= '0' && *p <= '9' && *v < 100000000ul)
        *v = *v * 10 + (unsigned long)(*p++ - '0');
    return p;
}

/* "FILE:LINE:COL: message" with LINE, COL >= 1 and a message after. */
static int positioned(const char *m)
{
    for (const char *p = m; *p; p++) {
        if (*p != ':' || p == m)
            continue;
        unsigned long line, col;
        const char *q = digits(p + 1, &line);
        if (q == p + 1 || *q != ':' || line == 0)
            continue;
        const char *r = digits(q + 1, &col);
        if (r == q + 1 || col == 0 || r[0] != ':' || r[1] != ' ' || !r[2])
            continue;
        return 1;
    }
    return 0;
}

static void budget(struct sim *sim, void *arg)
{
    (void)arg;
    if (sim_events_executed(sim) >= FUZZ_MAX_EVENTS)
        sim_stop(sim);
}

/* Load `text` (with `sets`); refused: the error must be positioned;
 * loaded: build the world and run it, bounded. */
static void load_and_run(const char *text, const char *const *sets, size_t nsets)
{
    struct scenario_opts o = {
        .profiles_dir = RNICSIM_SOURCE_DIR "/profiles", .sets = sets, .nsets = nsets};
    struct cfg_error err = {{0}};
    struct scenario *s = scenario_load("fuzz.yaml", text, &o, &err);
    if (!s) {
        if (!positioned(err.msg))
            finding("unpositioned error", err.msg);
        return;
    }
    size_t ncap = s->ncaptures;
    sim_time_t stop = s->stop_time_ps;
    s->ncaptures = 0;
    if (s->stop_time_ps > FUZZ_STOP_PS)
        s->stop_time_ps = FUZZ_STOP_PS;
    struct run_opts ro = {.stop_on_failure = true, .observe = budget, .observe_every = 4096};
    char why[512] = "";
    /* The programs' own output (usage messages, results) is not wanted:
     * stdout and stderr go to /dev/null during the run (sanitizer reports
     * go where ASAN_OPTIONS=log_path says; tools/fuzz.sh sets it). */
    fflush(stdout);
    fflush(stderr);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int out_fd = dup(STDOUT_FILENO), err_fd = dup(STDERR_FILENO);
    if (null_fd >= 0) {
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
    }
    /* Programs stopped mid-run own what they allocated (run.c): not leaks. */
    LSAN_DISABLE();
    struct run *r = run_scenario_opts(s, &ro, why, sizeof(why));
    run_free(r);
    LSAN_ENABLE();
    fflush(stdout);
    fflush(stderr);
    if (out_fd >= 0) {
        dup2(out_fd, STDOUT_FILENO);
        close(out_fd);
    }
    if (err_fd >= 0) {
        dup2(err_fd, STDERR_FILENO);
        close(err_fd);
    }
    if (null_fd >= 0)
        close(null_fd);
    s->ncaptures = ncap;
    s->stop_time_ps = stop;
    scenario_free(s);
    if (!r)
        finding("a loaded scenario whose world cannot be built", why);
}

#endif

#ifdef FUZZ_SET
/* Two hosts and perftest, with a variable and a link override, so that
 * --set has sequences, maps, scalars and vars to reach. */
static const char set_base[] = "name: set-base\n"
                               "seed: 3\n"
                               "stop_time: 1ms\n"
                               "profile: cx5-100g\n"
                               "hardware: {nic: {tx_pkt_proc: 5ns}}\n"
                               "vars: {size: 64}\n"
                               "topology:\n"
                               "  kind: star\n"
                               "  hosts: 2\n"
                               "  link: {rate: 100Gbps, delay: 10ns}\n"
                               "  links: [{link: h0->sw0, delay: 20ns}]\n"
                               "programs:\n"
                               "  - {host: h1, program: perftest, args: [--server, "
                               "--tests=write, \"--sizes=${size}\", --iters=4]}\n"
                               "  - {host: h0, program: perftest, args: [--client, "
                               "--tests=write, \"--sizes=${size}\", --iters=4]}\n";
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
#if defined(FUZZ_SCENARIO)
    load_and_run(text, NULL, 0);
#elif defined(FUZZ_SET)
    const char *sets[FUZZ_MAX_SETS];
    size_t n = 0;
    for (char *line = text, *next; line && n < FUZZ_MAX_SETS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (*line)
            sets[n++] = line;
    }
    load_and_run(set_base, sets, n);
#else
    char why[256] = "";
    struct jv *v = jv_parse(text, size, why, sizeof(why));
    if (!v && strncmp(why, "JSON error at byte ", 19) != 0)
        finding("JSON error without a position", why);
    if (v) {
        (void)jv_get(v, "result");
        jv_free(v);
    }
#endif
    free(text);
    return 0;
}

#ifdef FUZZ_REPLAY
/* Replay: run every file named on the command line through the target. */
int main(int argc, char **argv)
{
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot open\n", argv[i]);
            rc = 1;
            continue;
        }
        size_t cap = 1 << 16, len = 0;
        uint8_t *buf = malloc(cap);
        for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
            len += k;
            if (len == cap)
                buf = realloc(buf, cap *= 2);
        }
        fclose(f);
        if (!buf)
            return 1;
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        printf("ok %s\n", argv[i]);
    }
    return rc;
}
#endif
