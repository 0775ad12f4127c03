/* rnicsimd: command line, the world of a scenario, results at the end.
 *
 *   rnicsimd FILE.yaml [-o RESULTS.json] [--socket PATH] [--set KEY=VALUE]...
 *            [--seed N] [--profiles DIR] [--spin DUR] [--poll DUR] [--budget DUR]
 *            [--duration DUR] [--quiet] [--verbose]
 *   rnicsim emulate FILE.yaml [same options]
 *
 * The scenario is read and built by the same code as `rnicsim run`
 * (tools/rnicsim/scenario.c, world.c); emulation-mode scenarios have no
 * `programs:` (the programs are real processes).  stop_time, when the file
 * sets it, stops the daemon after that much (wall-clock = simulated)
 * time; otherwise it runs until SIGINT / SIGTERM.  Then it writes the
 * same JSON as a simulated run (results.c: counters of every host, NIC,
 * PCIe link and fabric link) and prints how well it kept pace. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "emu/daemon/emu.h"
#include "emu/sockpath.h"

#define EXIT_USAGE 2
#define EXIT_INTERNAL 5

/* Defaults of the pacing knobs (docs/emulation.md "Timing"). */
#define DEFAULT_SPIN_PS (20 * SIM_US)
#define DEFAULT_POLL_PS (0)
#define DEFAULT_BUDGET_PS (1 * SIM_MS)

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s FILE.yaml [-o RESULTS.json] [--socket PATH] [--set KEY=VALUE]...\n"
            "          [--seed N] [--profiles DIR] [--spin DUR] [--poll DUR] [--budget DUR]\n"
            "          [--duration DUR] [--quiet] [--verbose]\n"
            "Runs the scenario's hardware paced by the wall clock; unmodified verbs programs\n"
            "attach with LD_LIBRARY_PATH=<dir of the drop-in libibverbs.so.1> RNICSIM_HOST=h<i>.\n"
            "  --spin DUR      poll instead of sleeping when the next event is closer (20us)\n"
            "  --poll DUR      keep polling for doorbells this long after activity (0)\n"
            "  --budget DUR    longest run of events before the sockets are read again (1ms)\n"
            "  --duration DUR  stop after this long (default: the file's stop_time if set,\n"
            "                  else until SIGINT/SIGTERM)\n"
            "exit status: 0 stopped normally, 2 bad input, 5 internal error.\n",
            prog);
}

static int parse_dur(const char *opt, const char *v, sim_time_t *out)
{
    char why[160];
    uint64_t ps;
    if (cfg_parse_time(v, &ps, why, sizeof(why))) {
        fprintf(stderr, "rnicsimd: bad %s '%s': %s\n", opt, v, why);
        return -1;
    }
    *out = ps;
    return 0;
}

/* The directory holding the drop-in libibverbs.so.1: next to this
 * executable (build/emu) or in its emu/ subdirectory (build/). */
static void lib_dir(char *out, size_t len)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    snprintf(out, len, "<build>/emu");
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    char probe[4200];
    snprintf(probe, sizeof(probe), "%s/libibverbs.so.1", exe);
    if (access(probe, F_OK) == 0) {
        snprintf(out, len, "%s", exe);
        return;
    }
    snprintf(probe, sizeof(probe), "%s/emu/libibverbs.so.1", exe);
    if (access(probe, F_OK) == 0) {
        snprintf(out, len, "%s/emu", exe);
        return;
    }
    /* installed: <prefix>/bin and <prefix>/<libdir>/rnicsim */
    static const char *const libdirs[] = {"lib/x86_64-linux-gnu", "lib64", "lib",
                                          "lib/aarch64-linux-gnu"};
    for (size_t i = 0; i < sizeof(libdirs) / sizeof(libdirs[0]); i++) {
        snprintf(probe, sizeof(probe), "%s/../%s/rnicsim/libibverbs.so.1", exe, libdirs[i]);
        if (access(probe, F_OK) == 0) {
            char *real = realpath(probe, NULL);
            if (real) {
                char *sl = strrchr(real, '/');
                if (sl)
                    *sl = '\0';
                snprintf(out, len, "%s", real);
                free(real);
            }
            return;
        }
    }
}

static void print_attach(const struct emu *e, bool custom_socket)
{
    char dir[4200];
    lib_dir(dir, sizeof(dir));
    char sock[4400] = "";
    if (custom_socket)
        snprintf(sock, sizeof(sock), "RNICSIM_SOCKET=%s ", e->sock_path);
    printf("rnicsimd: emulating '%s' (%s): hosts h0..h%zu, profile %s\n", e->scn->name,
           e->scn->file, e->w->nhosts - 1,
           e->scn->profile_name[0] ? e->scn->profile_name : "C defaults");
    printf("rnicsimd: listening on %s\n", e->sock_path);
    printf("rnicsimd: attach unmodified verbs programs, e.g. in two shells:\n");
    printf("    %sLD_LIBRARY_PATH=%s RNICSIM_HOST=h0 ibv_rc_pingpong\n", sock, dir);
    printf("    %sLD_LIBRARY_PATH=%s RNICSIM_HOST=h1 ibv_rc_pingpong localhost\n", sock, dir);
    printf("rnicsimd: stop with Ctrl-C or SIGTERM%s\n", "");
    fflush(stdout);
}

static struct run *fake_run(struct emu *e)
{
    /* the JSON writer's view of a run: the world and the outcome, no
     * simulated programs */
    struct run *r = xcalloc_or_die(1, sizeof(*r));
    r->scn = e->scn;
    r->world = e->w;
    r->result = RUN_DONE;
    r->sim_result = SIM_RUN_STOPPED;
    r->sim_time_ps = sim_now(e->sim);
    r->events = sim_events_executed(e->sim);
    r->wall_s = wall_seconds() - e->wall_start_s;
    return r;
}

int emulate_main(const char *prog, int argc, char **argv)
{
    const char *file = NULL, *out = NULL, *socket_path = NULL;
    const char **sets = xcalloc_or_die((size_t)argc + 1, sizeof(char *));
    struct scenario_opts o = {.sets = sets, .emulate = true};
    sim_time_t spin = DEFAULT_SPIN_PS, poll = DEFAULT_POLL_PS, budget = DEFAULT_BUDGET_PS;
    sim_time_t duration = SIM_TIME_NEVER;
    bool quiet = false, verbose = false;
    int rc = EXIT_USAGE;
    struct emu e;
    memset(&e, 0, sizeof(e));
    e.listen_fd = e.timer_fd = -1;

    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v;
        if ((v = cli_opt_value(argc, argv, &i, "--set", &missing))) {
            sets[o.nsets++] = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "-o", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--output", &missing))) {
            out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--socket", &missing))) {
            socket_path = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seed", &missing))) {
            char why[160];
            if (cfg_parse_u64(v, &o.seed, why, sizeof(why))) {
                fprintf(stderr, "rnicsimd: bad --seed '%s': %s\n", v, why);
                goto out;
            }
            o.have_seed = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--profiles", &missing))) {
            o.profiles_dir = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--spin", &missing))) {
            if (parse_dur("--spin", v, &spin))
                goto out;
        } else if ((v = cli_opt_value(argc, argv, &i, "--poll", &missing))) {
            if (parse_dur("--poll", v, &poll))
                goto out;
        } else if ((v = cli_opt_value(argc, argv, &i, "--budget", &missing))) {
            if (parse_dur("--budget", v, &budget))
                goto out;
        } else if ((v = cli_opt_value(argc, argv, &i, "--duration", &missing))) {
            if (parse_dur("--duration", v, &duration))
                goto out;
        } else if (missing) {
            fprintf(stderr, "rnicsimd: %s needs a value\n", argv[i]);
            goto out;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = true;
        } else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
            verbose = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, prog);
            rc = 0;
            goto out;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rnicsimd: unknown option '%s'\n", argv[i]);
            usage(stderr, prog);
            goto out;
        } else if (!file) {
            file = argv[i];
        } else {
            fprintf(stderr, "rnicsimd: one scenario file at a time ('%s' and '%s')\n", file,
                    argv[i]);
            goto out;
        }
    }
    if (!file) {
        fprintf(stderr, "rnicsimd: missing scenario file\n");
        usage(stderr, prog);
        goto out;
    }
    if (budget == 0) {
        fprintf(stderr, "rnicsimd: --budget must be greater than 0\n");
        goto out;
    }

    struct cfg_error err = {{0}};
    e.scn = scenario_load(file, NULL, &o, &err);
    if (!e.scn) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    char why[600];
    e.w = world_build(e.scn, why, sizeof(why));
    if (!e.w) {
        fprintf(stderr, "rnicsimd: %s\n", why);
        rc = EXIT_INTERNAL;
        goto out;
    }
    e.sim = e.w->sim;
    e.spin_ps = spin;
    e.poll_ps = poll;
    e.budget_ns = budget / SIM_NS ? budget / SIM_NS : 1;
    e.verbose = verbose;
    e.stop_ps = duration;
    if (e.stop_ps == SIM_TIME_NEVER && cfg_child(e.scn->doc->root, "stop_time"))
        e.stop_ps = e.scn->stop_time_ps;
    e.loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (!e.loop) {
        fprintf(stderr, "rnicsimd: cannot create the event loop (libev)\n");
        rc = EXIT_INTERNAL;
        goto out;
    }
    char *path = socket_path ? xstrdup_or_die(socket_path) : emu_socket_path();
    int lrc = emu_listen(&e, path, why, sizeof(why));
    free(path);
    if (lrc) {
        fprintf(stderr, "rnicsimd: %s\n", why);
        rc = EXIT_INTERNAL;
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    /* short sleeps: the kernel's default 50 us timer slack would make
     * every wait for an event that much late */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    e.wall_start_s = wall_seconds();
    e.t0_ns = emu_mono_ns();
    if (!quiet)
        print_attach(&e, socket_path != NULL || getenv("RNICSIM_SOCKET") != NULL);
    emu_pace_loop(&e);

    /* results first: what the hardware counted up to the stop */
    struct run *r = fake_run(&e);
    rc = 0;
    if (out && results_write_json(r, out, why, sizeof(why))) {
        fprintf(stderr, "rnicsimd: %s\n", why);
        rc = EXIT_INTERNAL;
    }
    if (!quiet) {
        if (e.stop_signal)
            printf("\nrnicsimd: stopped by signal %d\n", e.stop_signal);
        results_print_summary(r, false, out, stdout);
        printf("rnicsimd: served %llu contexts (%llu went away with QPs open), %llu protocol "
               "errors, %llu failed DMAs\n",
               (unsigned long long)e.clients_served, (unsigned long long)e.clients_crashed,
               (unsigned long long)e.protocol_errors, (unsigned long long)e.dma_faults);
        fflush(stdout);
        emu_pace_report(&e, stdout);
        fflush(stdout);
    }
    free(r);
out:
    emu_clients_free_all(&e);
    if (e.loop)
        ev_loop_destroy(e.loop);
    if (e.listen_fd >= 0)
        close(e.listen_fd);
    if (e.timer_fd >= 0)
        close(e.timer_fd);
    if (e.sock_path)
        unlink(e.sock_path);
    free(e.sock_path);
    free(e.sock_dir);
    world_free(e.w);
    scenario_free(e.scn);
    free(sets);
    return rc;
}
