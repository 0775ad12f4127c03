/* The rnicsim command line.
 *
 *   rnicsim run FILE.yaml [-o results.json] [--set KEY=VALUE]... [--seed N]
 *                         [--profiles DIR] [--tables] [--quiet] [--watchdog SECONDS]
 *   rnicsim params [--profile NAME] [--profiles DIR] [--markdown]
 *   rnicsim programs
 *   rnicsim bench [--reps N] [--json FILE]
 *   rnicsim check-order FILE.yaml [--runs N] [--seed S] [--set K=V]... [--vary K=V1,V2]...
 *                                 [-o FILE]   (check_order.c)
 *   rnicsim table2 [--channels=a,b] [--quick] [--markdown] [--json F] [--csv F]
 *                  [--update FILE.md]   (table2.c)
 *   rnicsim sweep FILE.yaml --set KEY=V1,V2,...  [-j N] [-o DIR] [--seed N]
 *                 [--profiles DIR] [--plot x=KEY,y=COL[,series=KEY]]   (sweep.c)
 *   rnicsim emulate FILE.yaml [options]   (emu/daemon/main.c: emulation mode)
 *
 * Exit status of `run`: 0 done; 1 a program returned non-zero; 2 bad
 * command line or scenario (nothing ran); 3 deadlock; 4 stop_time reached
 * with programs still running; 5 the world could not be built or the
 * results could not be written.  docs/cli.md is the user's reference. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posix/posix.h"
#include "tools/rnicsim/rnicsim.h"
#include "tools/rnicsim/timeline.h"
#ifdef RNICSIM_HAVE_EMU
#include "emu/daemon/emu.h"
#endif

#define EXIT_USAGE 2
#define EXIT_INTERNAL 5
/* --wall-limit default: generous (an hour of wall-clock time), so that a
 * run that makes no progress that matters still ends on its own. */
#define DEFAULT_WALL_LIMIT_S 3600.0

static void usage(FILE *out)
{
    fprintf(out,
            "usage:\n"
            "  rnicsim run FILE.yaml [-o RESULTS.json] [--set KEY=VALUE]... [--seed N]\n"
            "                        [--profiles DIR] [--wall-limit SECONDS] [--keep-going]\n"
            "                        [--tables] [--quiet] [--watchdog SECONDS]\n"
            "                        [--timeline FILE.json] [--trace] [--timeline-hosts h0,..]\n"
            "                        [--timeline-qps [hN:]QPN,..] [--timeline-window FROM:TO]\n"
            "                        [--timeline-max SIZE]\n"
            "  rnicsim params [--profile NAME | FILE.yaml [--set KEY=VALUE]...] [--profiles DIR]\n"
            "                        [--markdown]\n"
            "  rnicsim programs\n"
            "  rnicsim bench [--reps N] [--json FILE]\n"
            "  rnicsim check-order FILE.yaml [--runs N] [--seed S] [--set KEY=VALUE]...\n"
            "                        [--vary KEY=V1,V2,...]... [-o RESULT.json]\n"
            "  rnicsim table2 [--channels=a,b,...] [--quick] [--markdown] [--json FILE]\n"
            "                        [--csv FILE] [--update FILE.md]\n"
            "  rnicsim sweep FILE.yaml --set KEY=V1,V2,... [--set KEY2=A,B]... [-j N]\n"
            "                        [-o DIR] [--seed N] [--profiles DIR]\n"
            "                        [--plot x=KEY,y=COLUMN[,series=KEY]]\n"
            "  rnicsim validate [--full] [--only ID,...] [-j N] [-o DIR] [--doc FILE.md]\n"
            "  rnicsim --version | --help\n"
            "\n"
            "run: simulate a scenario, print a summary, write JSON results (-o).\n"
            "  exit status: 0 done, 1 a program failed, 2 bad input, 3 deadlock,\n"
            "  4 stop_time or --wall-limit reached with programs running, 5 internal\n"
            "  error or an output (results, capture) not written in full.\n"
            "params: list every hardware parameter with its effective value.\n"
            "programs: list the built-in programs.\n"
            "bench: measure simulator speed (events/s, simulated packets/s).\n"
            "check-order: run an ordering workload under many seeds/configurations;\n"
            "  exit status: 0 clean, 1 violation found, 2 bad input, 3 run error.\n"
            "table2: measure Taranov et al.'s Table 2 for every channel\n"
            "  (docs/taranov-table2.md).\n"
            "sweep: run every combination of the --set value lists (-j at a time),\n"
            "  one CSV row per run in DIR/sweep.csv (default DIR sweep-out);\n"
            "  exit status: 0 all ran, 1 a run failed, 2 bad input, 5 output error.\n"
            "validate: run the published data points (validation/points.yaml) and\n"
            "  compare; exit status: 0 all within tolerance or known limits, 1 a point\n"
            "  outside or in error, 2 bad input, 5 output error.\n");
#ifdef RNICSIM_HAVE_EMU
    fprintf(out, "emulate FILE.yaml [-o RESULTS.json] [--socket PATH] [--duration DUR] ...:\n"
                 "  run the scenario's hardware paced by the wall clock for unmodified verbs\n"
                 "  programs (docs/emulation.md); JSON results when stopped (SIGINT/SIGTERM);\n"
                 "  all options: rnicsim emulate --help.\n");
#endif
}

static void report_outcome(const struct run *r)
{
    struct sim *sim = r->world->sim;
    char t[32];
    format_time(r->sim_time_ps, t, sizeof(t));
    for (size_t i = 0; i < r->ninsts; i++) {
        const struct prog_inst *pi = &r->insts[i];
        if (pi->finished && pi->exit_code != 0) {
            char ft[32];
            format_time(pi->finished_ps, ft, sizeof(ft));
            fprintf(stderr,
                    "rnicsim: program '%s' on %s (programs[%zu]) exited with status %d at %s\n",
                    pi->def->program, pi->def->host, i, pi->exit_code, ft);
        }
    }
    if (r->first_failed && r->stop_on_failure) {
        bool others = false;
        for (size_t i = 0; i < r->ninsts; i++)
            others = others || (!r->insts[i].finished && !r->insts[i].def->daemon);
        if (others) {
            fprintf(stderr,
                    "rnicsim: the run was stopped at %s, when %s failed (--keep-going lets the "
                    "others run on); these programs were still running:\n",
                    t, r->first_failed->proc_name);
            sim_deadlock_report(sim, stderr);
        }
    }
    if (r->result == RUN_WALL_LIMIT) {
        fprintf(stderr,
                "rnicsim: --wall-limit %g s reached at simulated time %s with programs still "
                "running:\n",
                r->wall_limit_s, t);
        sim_deadlock_report(sim, stderr);
    }
    if (r->traffic && traffic_unfinished(r->traffic) && r->sim_result == SIM_RUN_DONE)
        fprintf(stderr,
                "deadlock at %s: no event is pending and %llu flows of the traffic generator "
                "are unfinished (a PFC deadlock holds its frames paused)\n",
                t, (unsigned long long)traffic_unfinished(r->traffic));
    if (r->sim_result == SIM_RUN_DEADLOCK) {
        fprintf(stderr, "deadlock at %s: no event is pending and these programs are blocked:\n", t);
        sim_deadlock_report(sim, stderr);
        if (r->os)
            posix_report_spinners(r->os, stderr);
    } else if (r->result == RUN_TIME_LIMIT) {
        char st[32];
        format_time(r->scn->stop_time_ps, st, sizeof(st));
        fprintf(stderr, "rnicsim: stop_time %s reached with programs still running:\n", st);
        sim_deadlock_report(sim, stderr);
        char longer[32];
        sim_time_t twice = sim_time_mul(2, r->scn->stop_time_ps);
        if (twice >= SIM_TIME_LIMIT_PS) { /* the latest stop_time allowed, exactly */
            snprintf(longer, sizeof(longer), "%llups", (unsigned long long)SIM_TIME_LIMIT_PS);
        } else {
            format_time(twice, longer, sizeof(longer));
            for (char *c = longer; *c; c++)
                if (*c == ' ')
                    memmove(c, c + 1, strlen(c)); /* "20.000 ms" -> "20.000ms", one shell word */
        }
        if (r->scn->stop_time_ps < SIM_TIME_LIMIT_PS)
            fprintf(stderr,
                    "rnicsim: to simulate longer, add --set stop_time=%s (or set stop_time: in "
                    "the scenario)\n",
                    longer);
    }
}

static int cmd_run(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    const char **sets = xcalloc_or_die((size_t)argc, sizeof(char *));
    struct scenario_opts o = {.sets = sets};
    bool quiet = false, keep_going = false, tables = false;
    double wall_limit = DEFAULT_WALL_LIMIT_S;
    double watchdog_s = 0; /* default (posix/guard.c) */
    struct timeline_opts tlo = {0};
    int rc = EXIT_USAGE;
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v;
        char twhy[256];
        int t = timeline_parse_opt(argc, argv, &i, &tlo, twhy, sizeof(twhy));
        if (t < 0) {
            fprintf(stderr, "rnicsim run: %s\n", twhy);
            goto out;
        }
        if (t > 0)
            continue;
        if ((v = cli_opt_value(argc, argv, &i, "--set", &missing))) {
            sets[o.nsets++] = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "-o", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--output", &missing))) {
            out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seed", &missing))) {
            char why[160];
            if (cfg_parse_u64(v, &o.seed, why, sizeof(why))) {
                fprintf(stderr, "rnicsim: bad --seed '%s': %s\n", v, why);
                goto out;
            }
            o.have_seed = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--profiles", &missing))) {
            o.profiles_dir = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--watchdog", &missing))) {
            char *end;
            watchdog_s = strtod(v, &end);
            if (*end || end == v || watchdog_s < 0) {
                fprintf(stderr, "rnicsim: bad --watchdog '%s': seconds >= 0 expected\n", v);
                goto out;
            }
            if (watchdog_s == 0)
                watchdog_s = -1; /* off */
        } else if ((v = cli_opt_value(argc, argv, &i, "--wall-limit", &missing))) {
            char *end = NULL;
            errno = 0;
            wall_limit = strtod(v, &end);
            /* seconds, 0 = none; at most a year (a typo, not a plan) */
            if (!end || end == v || *end || errno || !(wall_limit >= 0 && wall_limit <= 3.2e7)) {
                fprintf(stderr,
                        "rnicsim run: bad --wall-limit '%s': expected seconds, 0 (no limit) to "
                        "32000000\n",
                        v);
                goto out;
            }
        } else if (missing) {
            fprintf(stderr, "rnicsim: %s needs a value\n", argv[i]);
            goto out;
        } else if (!strcmp(argv[i], "--keep-going")) {
            keep_going = true;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = true;
        } else if (!strcmp(argv[i], "--tables")) {
            tables = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rnicsim run: unknown option '%s'\n", argv[i]);
            usage(stderr);
            goto out;
        } else if (!file) {
            file = argv[i];
        } else {
            fprintf(stderr, "rnicsim run: one scenario file at a time ('%s' and '%s')\n", file,
                    argv[i]);
            goto out;
        }
    }
    if (!file) {
        fprintf(stderr, "rnicsim run: missing scenario file\n");
        usage(stderr);
        goto out;
    }

    char why[512];
    if (out && check_output_path(out, false, false, why, sizeof(why))) {
        fprintf(stderr, "rnicsim run: -o: %s\n", why);
        goto out;
    }
    struct cfg_error err = {{0}};
    struct scenario *s = scenario_load(file, NULL, &o, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    if (timeline_check_opts(&tlo, s->topo.n_nodes, why, sizeof(why))) {
        fprintf(stderr, "rnicsim run: %s\n", why);
        scenario_free(s);
        goto out;
    }
    struct run_opts ro = {.progress = !quiet && isatty(STDERR_FILENO),
                          .stop_on_failure = !keep_going,
                          .wall_limit_s = wall_limit,
                          .watchdog_s = watchdog_s,
                          .timeline = &tlo};
    struct run *r = run_scenario_opts(s, &ro, why, sizeof(why));
    fflush(stdout);
    if (!r) {
        fprintf(stderr, "rnicsim: %s\n", why);
        scenario_free(s);
        rc = EXIT_INTERNAL;
        goto out;
    }
    report_outcome(r);
    rc = run_exit_code(r->result);
    if (world_close_captures(r->world)) /* a capture that is not all there */
        rc = rc ? rc : EXIT_INTERNAL;
    if (r->timeline_rc)
        rc = rc ? rc : EXIT_INTERNAL;
    if (out && results_write_json(r, out, why, sizeof(why))) {
        fprintf(stderr, "rnicsim: %s\n", why);
        rc = rc ? rc : EXIT_INTERNAL;
    }
    if (traffic_write_outputs(r, why, sizeof(why))) {
        fprintf(stderr, "rnicsim: %s\n", why);
        rc = rc ? rc : EXIT_INTERNAL;
    }
    if (!quiet)
        results_print_summary(r, tables, out, stdout);
    fflush(stdout);
    run_free(r);
    scenario_free(s);
out:
    free(sets);
    return rc;
}

/* The params a profile file sets, as origins (its lines and comments). */
static void profile_origins(const char *path, struct param_origin *origin)
{
    struct cfg_error err = {{0}};
    struct cfg_doc *doc = path ? cfg_load_file(path, &err) : NULL;
    if (doc)
        param_origins_walk(origin, cfg_child(doc->root, "params"));
    cfg_free(doc);
}

static int cmd_params(int argc, char **argv)
{
    const char *profile = NULL, *file = NULL;
    struct profile_search ps = {0};
    bool markdown = false;
    const char **sets = xcalloc_or_die((size_t)argc + 1, sizeof(char *));
    size_t nsets = 0;
    int rc = EXIT_USAGE;
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v;
        if ((v = cli_opt_value(argc, argv, &i, "--profile", &missing))) {
            profile = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--profiles", &missing))) {
            ps.cli_dir = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--set", &missing))) {
            sets[nsets++] = v;
        } else if (!strcmp(argv[i], "--markdown")) {
            markdown = true;
        } else if (!missing && argv[i][0] != '-' && !file) {
            file = argv[i];
        } else {
            fprintf(stderr, "rnicsim params: %s '%s'\n",
                    missing ? "missing value for" : "unknown option", argv[i]);
            goto out;
        }
    }
    if ((file && profile) || (nsets && !file)) {
        fprintf(stderr, "rnicsim params: FILE.yaml [--set KEY=VALUE]... or --profile NAME\n");
        goto out;
    }
    struct hw_profile hw;
    hw_profile_default(&hw);
    struct param_origin *origin = xcalloc_or_die(hw_params_count, sizeof(*origin));
    param_origins_default(origin);
    struct scenario *s = NULL;
    if (file) { /* a scenario: C defaults -> its profile -> hardware: -> --set */
        struct scenario_opts so = {.profiles_dir = ps.cli_dir, .sets = sets, .nsets = nsets};
        struct cfg_error err = {{0}};
        s = scenario_load(file, NULL, &so, &err);
        if (!s) {
            fprintf(stderr, "%s\n", err.msg);
            free(origin);
            goto out;
        }
        hw = s->hw;
        profile_origins(s->profile_path, origin);
        param_origins_walk(origin, cfg_child(s->doc->root, "hardware"));
        if (!markdown)
            printf("# scenario %s (profile %s); each value's source on the line below it\n", file,
                   s->profile_name ? s->profile_name : "none: the C defaults");
    } else if (profile) {
        struct cfg_error err = {{0}};
        char *path = NULL;
        if (profile_load(profile, &ps, NULL, &hw, &path, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            free(path);
            free(origin);
            goto out;
        }
        profile_origins(path, origin);
        if (!markdown)
            printf("# profile %s (%s); each value's source on the line below it\n", profile, path);
        free(path);
    } else if (!markdown) {
        printf("# C defaults (no profile); each value's source on the line below it; profile "
               "search path:\n");
        profile_print_dirs(&ps, stdout);
    }
    if (markdown) {
        printf("| key | kind | %s | range | meaning |\n|---|---|---|---|---|\n",
               profile ? profile : "default");
    }
    for (size_t i = 0; i < hw_params_count; i++) {
        const struct param_def *d = &hw_params[i];
        char val[64], range[64];
        param_format(&hw, d, val, sizeof(val));
        param_format_range(d, range, sizeof(range));
        if (markdown)
            printf("| `%s` | %s | `%s` | %s | %s |\n", d->key, param_kind_name(d->kind), val, range,
                   d->doc);
        else
            printf("%-26s %-5s %10s  %-16s %s\n    from %s\n", d->key, param_kind_name(d->kind),
                   val, range, d->doc, origin[i].text);
    }
    free(origin);
    scenario_free(s);
    rc = 0;
out:
    free(sets);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "params"))
        return cmd_params(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench"))
        return bench_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "check-order"))
        return check_order_main(argv[0], argc - 2, argv + 2);
    if (!strcmp(cmd, "table2"))
        return table2_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "sweep"))
        return sweep_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "validate"))
        return validate_main(argc - 2, argv + 2);
#ifdef RNICSIM_HAVE_EMU
    if (!strcmp(cmd, "emulate"))
        return emulate_main("rnicsim emulate", argc - 2, argv + 2);
#endif
    if (!strcmp(cmd, "programs")) {
        programs_list(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("rnicsim %s\n", RNICSIM_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "rnicsim: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
