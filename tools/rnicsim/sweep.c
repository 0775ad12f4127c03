/* `rnicsim sweep`: run a scenario over the cartesian product of --set
 * value lists, one child process per combination, and collect one CSV row
 * per run.
 *
 *   rnicsim sweep FILE.yaml --set KEY=V1,V2,... [--set KEY2=A,B]... [-j N]
 *                 [-o DIR] [--seed N] [--profiles DIR] [--plot x=KEY,y=COL[,series=KEY]]
 *                 [--emit-jobs]
 *   rnicsim sweep --collect DIR [--plot x=KEY,y=COL[,series=KEY]]
 *
 * Steps: parse the lists (a --set with one value applies to every run);
 * load the scenario once per combination with its overrides (any bad key
 * or value is exit 2 before anything runs); run `/proc/self/exe run FILE
 * --set ... -o DIR/run-<i>.json` (output in DIR/run-<i>.log) at most N at
 * a time; read every run's results JSON (json_read.c) in run order and
 * write DIR/sweep.csv, print a summary, and plot with tools/plot_sweep.py.
 * Nothing depends on the order the children finish in, so the CSV and the
 * summary are byte-identical whatever -j is.
 *
 * Sweeps that outgrow one machine: --emit-jobs does the validation, then
 * instead of running writes DIR/sweep.args (the sweep's own arguments, one
 * per line), DIR/jobs.txt (one shell command per run, absolute paths, each
 * writing run-<i>.json, run-<i>.log and its exit status to run-<i>.exit)
 * for GNU parallel, and DIR/slurm.sh (a Slurm array job running line
 * $SLURM_ARRAY_TASK_ID of jobs.txt).  --collect DIR reads sweep.args back
 * and the runs' files, and writes the same sweep.csv, summary and plot as
 * a local sweep; a run without its .exit file counts as failed ("not run").
 *
 * Combinations are numbered like nested loops in the order the --set
 * options are given: the first list varies slowest, the last fastest.
 *
 * CSV columns (docs/cli.md): the swept keys (values as written), run,
 * exit, result, sim_time_ps, events, then every results table column
 * "<table>.<col>" (a table with more than one row in any run:
 * "<table>.<col>[<row>]"), then the counters summed over hosts
 * "<group>.<counter>" (host, nic, pcie, fabric), over links "links.<c>"
 * (max_* counters: the maximum) and over switches "switches.<c>".  A run
 * with a non-zero exit status has empty metric cells.
 *
 * Exit status: 0 every run exited 0; 1 some run failed (all rows still
 * written); 2 bad command line or scenario (nothing ran); 5 the output
 * could not be written or the plot failed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/config/json.h"
#include "tools/rnicsim/rnicsim.h"
#include "tools/rnicsim/timeline.h"

extern char **environ;

#define EXIT_FAILED_RUN 1
#define EXIT_USAGE 2
#define EXIT_INTERNAL 5
#define SWEEP_MAX_RUNS 10000
#define SWEEP_MAX_JOBS 256
#define SWEEP_DEFAULT_DIR "sweep-out"
/* Summary table: at most this many metric columns (the CSV has all). */
#define SUMMARY_MAX_METRICS 8
/* Exit status of plot_sweep.py when matplotlib cannot be imported. */
#define PLOT_EXIT_NO_MATPLOTLIB 3

/* One --set: a key and its values as written. */
struct sw_axis {
    char *key;
    char **values;
    size_t n;
};

struct sw_opts {
    const char *file;
    struct sw_axis *axes;
    size_t naxes;
    unsigned jobs;
    const char *dir;
    const char *seed; /* as given, validated */
    const char *profiles;
    const char *plot_x, *plot_y, *plot_series;
    char *plot_buf;
    bool emit_jobs;
    const char *collect;     /* --collect DIR */
    struct timeline_opts tl; /* --timeline FILE ...: for run tl_run only */
    uint64_t tl_run;
};

enum col_kind { COL_RUN, COL_TABLE, COL_COUNTER };

/* The metric columns, in order of first appearance over the runs. */
struct sw_cols {
    char **names;
    enum col_kind *kinds;
    size_t n, cap;
};

/* One run: its exit status and its metric cells (index = column). */
struct sw_run {
    int exit_status;
    bool unreadable; /* exited 0 but its results could not be read */
    bool not_run;    /* --collect: no run-<i>.exit (exit_status is then -1) */
    char **cells;
    size_t ncells;
};

static void sweep_usage(FILE *out)
{
    fprintf(
        out,
        "usage: rnicsim sweep FILE.yaml --set KEY=V1,V2,... [--set KEY2=A,B]... [-j N]\n"
        "                     [-o DIR] [--seed N] [--profiles DIR]\n"
        "                     [--plot x=KEY,y=COLUMN[,series=KEY]] [--emit-jobs]\n"
        "                     [--timeline FILE.json [--timeline-run I] [--timeline-hosts ...]]\n"
        "       rnicsim sweep --collect DIR [--plot x=KEY,y=COLUMN[,series=KEY]]\n"
        "Runs the scenario once per combination of the --set lists (a child process\n"
        "each, at most N at a time), writes DIR/run-<i>.json and .log, DIR/sweep.csv\n"
        "(one row per run) and, with --plot, DIR/sweep.png.  Default DIR: %s.\n"
        "--emit-jobs writes DIR/jobs.txt (GNU parallel) and DIR/slurm.sh (Slurm array)\n"
        "instead of running; --collect DIR then merges the runs' results.\n"
        "exit status: 0 every run succeeded, 1 some run failed, 2 bad input, 5 output\n"
        "or plot error.\n",
        SWEEP_DEFAULT_DIR);
}

/* "KEY=V1,V2,...": split at top-level commas (not inside [] {} or quotes,
 * so a value may be a flow sequence), as check-order's --vary. */
static int parse_axis(const char *arg, struct sw_axis *ax)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "rnicsim sweep: bad --set '%s': expected KEY=V1,V2,...\n", arg);
        return -1;
    }
    ax->key = xcalloc_or_die((size_t)(eq - arg) + 1, 1);
    memcpy(ax->key, arg, (size_t)(eq - arg));
    const char *start = eq + 1;
    int depth = 0;
    char quote = 0;
    for (const char *p = start;; p++) {
        char ch = *p;
        if (quote) {
            if (ch == quote) {
                quote = 0;
                continue;
            }
            if (ch)
                continue;
            fprintf(stderr, "rnicsim sweep: bad --set '%s': unterminated quote\n", arg);
            return -1;
        }
        if (ch == '"' || ch == '\'')
            quote = ch;
        else if (ch == '[' || ch == '{')
            depth++;
        else if ((ch == ']' || ch == '}') && depth > 0)
            depth--;
        if ((ch == ',' && depth == 0) || !ch) {
            if (p == start) {
                fprintf(stderr, "rnicsim sweep: bad --set '%s': %s\n", arg,
                        start == eq + 1 && !ch ? "missing value after '='"
                                               : "empty value in the list");
                return -1;
            }
            ax->values = xrealloc_or_die(ax->values, (ax->n + 1) * sizeof(char *));
            ax->values[ax->n] = xcalloc_or_die((size_t)(p - start) + 1, 1);
            memcpy(ax->values[ax->n++], start, (size_t)(p - start));
            start = p + 1;
        }
        if (!ch)
            break;
    }
    return 0;
}

static int parse_plot(struct sw_opts *o, const char *spec)
{
    o->plot_buf = xstrdup_or_die(spec);
    for (char *save = NULL, *part = strtok_r(o->plot_buf, ",", &save); part;
         part = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(part, '=');
        if (!eq || !eq[1])
            goto bad;
        *eq = '\0';
        const char **slot = !strcmp(part, "x")        ? &o->plot_x
                            : !strcmp(part, "y")      ? &o->plot_y
                            : !strcmp(part, "series") ? &o->plot_series
                                                      : NULL;
        if (!slot || *slot)
            goto bad;
        *slot = eq + 1;
    }
    if (o->plot_x && o->plot_y)
        return 0;
bad:
    fprintf(stderr,
            "rnicsim sweep: bad --plot '%s': expected x=KEY,y=COLUMN[,series=KEY] (each once)\n",
            spec);
    return -1;
}

static void free_opts(struct sw_opts *o)
{
    for (size_t i = 0; i < o->naxes; i++) {
        for (size_t k = 0; k < o->axes[i].n; k++)
            free(o->axes[i].values[k]);
        free(o->axes[i].values);
        free(o->axes[i].key);
    }
    free(o->axes);
    free(o->plot_buf);
}

static int parse_args(int argc, char **argv, struct sw_opts *o)
{
    o->axes = xcalloc_or_die((size_t)argc + 1, sizeof(*o->axes));
    o->jobs = 1;
    o->dir = SWEEP_DEFAULT_DIR;
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        const char *v;
        char why[256];
        int t = timeline_parse_opt(argc, argv, &i, &o->tl, why, sizeof(why));
        if (t < 0) {
            fprintf(stderr, "rnicsim sweep: %s\n", why);
            return -1;
        }
        if (t > 0)
            continue;
        if ((v = cli_opt_value(argc, argv, &i, "--set", &missing))) {
            if (parse_axis(v, &o->axes[o->naxes++]))
                return -1;
            for (size_t k = 0; k + 1 < o->naxes; k++) {
                if (!strcmp(o->axes[k].key, o->axes[o->naxes - 1].key)) {
                    fprintf(stderr, "rnicsim sweep: --set %s given twice\n", o->axes[k].key);
                    return -1;
                }
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "-j", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--jobs", &missing))) {
            uint64_t j;
            if (cfg_parse_u64(v, &j, why, sizeof(why)) || j < 1 || j > SWEEP_MAX_JOBS) {
                fprintf(stderr, "rnicsim sweep: bad -j '%s': expected 1..%d\n", v, SWEEP_MAX_JOBS);
                return -1;
            }
            o->jobs = (unsigned)j;
        } else if ((v = cli_opt_value(argc, argv, &i, "-o", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--output", &missing))) {
            if (!*v) {
                fprintf(stderr, "rnicsim sweep: -o needs a directory\n");
                return -1;
            }
            o->dir = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seed", &missing))) {
            uint64_t seed;
            if (cfg_parse_u64(v, &seed, why, sizeof(why))) {
                fprintf(stderr, "rnicsim sweep: bad --seed '%s': %s\n", v, why);
                return -1;
            }
            o->seed = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--profiles", &missing))) {
            o->profiles = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--plot", &missing))) {
            if (o->plot_buf) {
                fprintf(stderr, "rnicsim sweep: one --plot at a time\n");
                return -1;
            }
            if (parse_plot(o, v))
                return -1;
        } else if (!strcmp(argv[i], "--emit-jobs")) {
            o->emit_jobs = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--timeline-run", &missing))) {
            if (cfg_parse_u64(v, &o->tl_run, why, sizeof(why))) {
                fprintf(stderr, "rnicsim sweep: bad --timeline-run '%s': %s\n", v, why);
                return -1;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--collect", &missing))) {
            if (!*v) {
                fprintf(stderr, "rnicsim sweep: --collect needs a directory\n");
                return -1;
            }
            o->collect = v;
        } else if (missing) {
            fprintf(stderr, "rnicsim sweep: %s needs a value\n", argv[i]);
            return -1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rnicsim sweep: unknown option '%s'\n", argv[i]);
            sweep_usage(stderr);
            return -1;
        } else if (!o->file) {
            o->file = argv[i];
        } else {
            fprintf(stderr, "rnicsim sweep: one scenario file at a time ('%s' and '%s')\n", o->file,
                    argv[i]);
            return -1;
        }
    }
    if (o->collect)
        return 0; /* the rest comes from DIR/sweep.args (collect_args) */
    if (!o->file) {
        fprintf(stderr, "rnicsim sweep: missing scenario file\n");
        sweep_usage(stderr);
        return -1;
    }
    return 0;
}

/* The --set assignments of run `run` ("KEY=V", malloc'd, one per axis):
 * mixed radix, the last axis fastest. */
static char **run_sets(const struct sw_opts *o, size_t run, size_t *idx)
{
    char **sets = xcalloc_or_die(o->naxes + 1, sizeof(char *));
    size_t c = run;
    for (size_t k = o->naxes; k-- > 0;) {
        idx[k] = c % o->axes[k].n;
        c /= o->axes[k].n;
    }
    for (size_t k = 0; k < o->naxes; k++)
        sets[k] = xasprintf("%s=%s", o->axes[k].key, o->axes[k].values[idx[k]]);
    return sets;
}

static void free_sets(char **sets, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(sets[k]);
    free(sets);
}

/* Every combination loads (strictly) before anything runs. */
static int validate_all(const struct sw_opts *o, size_t nruns)
{
    size_t *idx = xcalloc_or_die(o->naxes + 1, sizeof(size_t));
    int rc = 0;
    for (size_t r = 0; r < nruns && !rc; r++) {
        char **sets = run_sets(o, r, idx);
        uint64_t seed = 0;
        char why[256];
        struct scenario_opts so = {
            .profiles_dir = o->profiles, .sets = (const char *const *)sets, .nsets = o->naxes};
        if (o->seed && !cfg_parse_u64(o->seed, &seed, why, sizeof(why))) {
            so.have_seed = true;
            so.seed = seed;
        }
        struct cfg_error err = {{0}};
        struct scenario *s = scenario_load(o->file, NULL, &so, &err);
        if (!s) {
            fprintf(stderr, "%s\n", err.msg);
            fprintf(stderr, "rnicsim sweep: run %zu (", r);
            for (size_t k = 0; k < o->naxes; k++)
                fprintf(stderr, "%s%s", k ? " " : "", sets[k]);
            fprintf(stderr, ") has a bad scenario; nothing ran\n");
            rc = -1;
        } else if (r == o->tl_run &&
                   timeline_check_opts(&o->tl, s->topo.n_nodes, why, sizeof(why))) {
            fprintf(stderr, "rnicsim sweep: %s; nothing ran\n", why);
            rc = -1;
        }
        scenario_free(s);
        free_sets(sets, o->naxes);
    }
    free(idx);
    return rc;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = xstrdup_or_die(path);
    int rc = 0;
    for (char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char save = *c;
            *c = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "rnicsim sweep: cannot create directory '%s': %s\n", p,
                        strerror(errno));
                rc = -1;
                break;
            }
            *c = save;
            if (!save)
                break;
        }
    }
    struct stat st;
    if (!rc && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "rnicsim sweep: '%s' is not a directory\n", path);
        rc = -1;
    }
    free(p);
    return rc;
}

static char *json_path(const struct sw_opts *o, size_t r)
{
    return xasprintf("%s/run-%zu.json", o->dir, r);
}

/* Run every combination, at most o->jobs at once; exit statuses in
 * runs[i].exit_status. */
static int run_all(const struct sw_opts *o, size_t nruns, struct sw_run *runs)
{
    pid_t *pids = xcalloc_or_die(nruns, sizeof(pid_t));
    size_t *idx = xcalloc_or_die(o->naxes + 1, sizeof(size_t));
    size_t next = 0, running = 0, done = 0;
    bool tty = isatty(STDERR_FILENO);
    int rc = 0;
    while (done < nruns) {
        while (running < o->jobs && next < nruns) {
            size_t r = next++;
            char **sets = run_sets(o, r, idx);
            char *jpath = json_path(o, r), *log = xasprintf("%s/run-%zu.log", o->dir, r);
            const char **argv = xcalloc_or_die(2 * o->naxes + 24, sizeof(char *));
            size_t a = 0;
            argv[a++] = "rnicsim";
            argv[a++] = "run";
            argv[a++] = o->file;
            for (size_t k = 0; k < o->naxes; k++) {
                argv[a++] = "--set";
                argv[a++] = sets[k];
            }
            if (o->seed) {
                argv[a++] = "--seed";
                argv[a++] = o->seed;
            }
            if (o->profiles) {
                argv[a++] = "--profiles";
                argv[a++] = o->profiles;
            }
            argv[a++] = "-o";
            argv[a++] = jpath;
            char maxbuf[32];
            if (r == o->tl_run) /* --timeline: this run's */
                timeline_opts_argv(&o->tl, argv, &a, maxbuf, sizeof(maxbuf));
            if (unlink(jpath) != 0 && errno != ENOENT)
                fprintf(stderr, "rnicsim sweep: cannot remove old '%s': %s\n", jpath,
                        strerror(errno));
            pids[r] = rn_spawn("/proc/self/exe", argv, log);
            if (pids[r] < 0) {
                fprintf(stderr, "rnicsim sweep: cannot start run %zu: %s\n", r, strerror(errno));
                runs[r].exit_status = 127;
                done++;
            } else {
                running++;
            }
            free(argv);
            free(jpath);
            free(log);
            free_sets(sets, o->naxes);
        }
        if (!running)
            continue;
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "rnicsim sweep: waitpid: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        for (size_t r = 0; r < nruns; r++) {
            if (pids[r] == pid) {
                runs[r].exit_status = rn_wait_status(st);
                pids[r] = 0;
                running--;
                done++;
                break;
            }
        }
        if (tty)
            fprintf(stderr, "\r[%zu/%zu runs done]", done, nruns);
    }
    if (tty)
        fputc('\n', stderr);
    free(idx);
    free(pids);
    return rc;
}

/* ---------------------------------------------------------------- collecting */

static size_t col_index(struct sw_cols *c, const char *name, enum col_kind kind)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->names[i], name))
            return i;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->names = xrealloc_or_die(c->names, c->cap * sizeof(char *));
        c->kinds = xrealloc_or_die(c->kinds, c->cap * sizeof(*c->kinds));
    }
    c->names[c->n] = xstrdup_or_die(name);
    c->kinds[c->n] = kind;
    return c->n++;
}

static void run_set_cell(struct sw_run *run, struct sw_cols *c, const char *name,
                         enum col_kind kind, const char *value)
{
    size_t i = col_index(c, name, kind);
    if (i >= run->ncells) {
        run->cells = xrealloc_or_die(run->cells, (i + 1) * sizeof(char *));
        memset(run->cells + run->ncells, 0, (i + 1 - run->ncells) * sizeof(char *));
        run->ncells = i + 1;
    }
    free(run->cells[i]);
    run->cells[i] = xstrdup_or_die(value);
}

/* Counter sums of one run, in order of first appearance. */
struct csum {
    char *name;
    bool is_max, integral;
    uint64_t u;
    double d;
};
struct csums {
    struct csum *v;
    size_t n, cap;
};

static void csum_add(struct csums *s, const char *name, const struct jv *val, bool is_max)
{
    if (!val || val->kind != JV_NUMBER)
        return;
    struct csum *c = NULL;
    for (size_t i = 0; i < s->n && !c; i++)
        if (!strcmp(s->v[i].name, name))
            c = &s->v[i];
    if (!c) {
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            s->v = xrealloc_or_die(s->v, s->cap * sizeof(*s->v));
        }
        c = &s->v[s->n++];
        *c = (struct csum){.name = xstrdup_or_die(name), .is_max = is_max, .integral = true};
    }
    bool integral = strspn(val->text, "0123456789") == strlen(val->text);
    uint64_t u = integral ? strtoull(val->text, NULL, 10) : 0;
    double d = strtod(val->text, NULL);
    c->integral = c->integral && integral;
    if (is_max) {
        c->u = u > c->u ? u : c->u;
        c->d = d > c->d ? d : c->d;
    } else {
        c->u += u;
        c->d += d;
    }
}

/* Sum every "<group>": {"<counter>": n} of each member of `obj`. */
static void sum_groups(struct csums *s, const struct jv *obj)
{
    for (size_t h = 0; obj && obj->kind == JV_OBJECT && h < obj->n; h++) {
        const struct jv *host = obj->items[h];
        for (size_t g = 0; host->kind == JV_OBJECT && g < host->n; g++) {
            const struct jv *grp = host->items[g];
            for (size_t k = 0; grp->kind == JV_OBJECT && k < grp->n; k++) {
                char *name = xasprintf("%s.%s", host->keys[g], grp->keys[k]);
                csum_add(s, name, grp->items[k], false);
                free(name);
            }
        }
    }
}

/* Sum "<prefix>.<counter>" over the members of `obj` (links, switches). */
static void sum_members(struct csums *s, const struct jv *obj, const char *prefix)
{
    for (size_t m = 0; obj && obj->kind == JV_OBJECT && m < obj->n; m++) {
        const struct jv *mem = obj->items[m];
        for (size_t k = 0; mem->kind == JV_OBJECT && k < mem->n; k++) {
            char *name = xasprintf("%s.%s", prefix, mem->keys[k]);
            csum_add(s, name, mem->items[k], strncmp(mem->keys[k], "max_", 4) == 0);
            free(name);
        }
    }
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = xcalloc_or_die(cap, 1);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            cap *= 2;
            buf = xrealloc_or_die(buf, cap);
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Tables with more than one row in some run get "[row]" column names. */
static bool table_is_multi(char **multi, size_t nmulti, const char *name)
{
    for (size_t i = 0; i < nmulti; i++)
        if (!strcmp(multi[i], name))
            return true;
    return false;
}

static const char *num_or_str(const struct jv *v)
{
    switch (v->kind) {
    case JV_NUMBER:
    case JV_STRING:
        return v->text;
    case JV_BOOL:
        return v->b ? "true" : "false";
    default:
        return "";
    }
}

/* Read the results of every run that exited 0, and make the columns. */
static void collect(const struct sw_opts *o, size_t nruns, struct sw_run *runs,
                    struct sw_cols *cols)
{
    struct jv **docs = xcalloc_or_die(nruns, sizeof(*docs));
    char **multi = NULL;
    size_t nmulti = 0;
    for (size_t r = 0; r < nruns; r++) {
        if (runs[r].exit_status != 0)
            continue;
        char *path = json_path(o, r), why[200];
        size_t len = 0;
        char *text = read_file(path, &len);
        if (!text)
            snprintf(why, sizeof(why), "%s", strerror(errno));
        else if (!(docs[r] = jv_parse(text, len, why, sizeof(why))))
            ;
        else if (docs[r]->kind != JV_OBJECT)
            snprintf(why, sizeof(why), "not a JSON object");
        if (!docs[r] || docs[r]->kind != JV_OBJECT) {
            fprintf(stderr, "rnicsim sweep: cannot read the results of run %zu ('%s'): %s\n", r,
                    path, why);
            runs[r].unreadable = true;
            jv_free(docs[r]);
            docs[r] = NULL;
        }
        free(text);
        free(path);
        const struct jv *tables = jv_get(docs[r], "tables");
        for (size_t t = 0; tables && tables->kind == JV_OBJECT && t < tables->n; t++) {
            if (tables->items[t]->kind == JV_ARRAY && tables->items[t]->n != 1 &&
                !table_is_multi(multi, nmulti, tables->keys[t])) {
                multi = xrealloc_or_die(multi, (nmulti + 1) * sizeof(char *));
                multi[nmulti++] = tables->keys[t];
            }
        }
    }
    for (size_t r = 0; r < nruns; r++) {
        const struct jv *d = docs[r];
        if (!d)
            continue;
        struct sw_run *run = &runs[r];
        static const char *const top[] = {"result", "sim_time_ps", "events"};
        for (size_t i = 0; i < 3; i++) {
            const struct jv *v = jv_get(d, top[i]);
            if (v)
                run_set_cell(run, cols, top[i], COL_RUN, num_or_str(v));
        }
        const struct jv *tables = jv_get(d, "tables");
        for (size_t t = 0; tables && tables->kind == JV_OBJECT && t < tables->n; t++) {
            const struct jv *rows = tables->items[t];
            bool m = table_is_multi(multi, nmulti, tables->keys[t]);
            for (size_t k = 0; rows->kind == JV_ARRAY && k < rows->n; k++) {
                const struct jv *row = rows->items[k];
                for (size_t c = 0; row->kind == JV_OBJECT && c < row->n; c++) {
                    char *name = m ? xasprintf("%s.%s[%zu]", tables->keys[t], row->keys[c], k)
                                   : xasprintf("%s.%s", tables->keys[t], row->keys[c]);
                    run_set_cell(run, cols, name, COL_TABLE, num_or_str(row->items[c]));
                    free(name);
                }
            }
        }
        const struct jv *counters = jv_get(d, "counters");
        struct csums s = {0};
        sum_groups(&s, jv_get(counters, "hosts"));
        sum_members(&s, jv_get(counters, "links"), "links");
        sum_members(&s, jv_get(counters, "switches"), "switches");
        for (size_t i = 0; i < s.n; i++) {
            char buf[40];
            if (s.v[i].integral)
                snprintf(buf, sizeof(buf), "%" PRIu64, s.v[i].u);
            else
                json_format_double(s.v[i].d, buf, sizeof(buf));
            run_set_cell(run, cols, s.v[i].name, COL_COUNTER, buf);
            free(s.v[i].name);
        }
        free(s.v);
    }
    for (size_t r = 0; r < nruns; r++)
        jv_free(docs[r]);
    free(docs);
    free(multi);
}

/* ---------------------------------------------------------------- output */

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n") && s[0] != ' ' && (!s[0] || s[strlen(s) - 1] != ' ')) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *c = s; *c; c++) {
        if (*c == '"')
            fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

/* The axes that are columns: those with more than one value. */
static bool axis_swept(const struct sw_axis *ax)
{
    return ax->n > 1;
}

static const char *cell(const struct sw_run *run, size_t c)
{
    return c < run->ncells && run->cells[c] ? run->cells[c] : "";
}

static int write_csv(const struct sw_opts *o, size_t nruns, const struct sw_run *runs,
                     const struct sw_cols *cols)
{
    char *path = xasprintf("%s/sweep.csv", o->dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "rnicsim sweep: cannot write '%s': %s\n", path, strerror(errno));
        free(path);
        return -1;
    }
    size_t *idx = xcalloc_or_die(o->naxes + 1, sizeof(size_t));
    for (size_t k = 0; k < o->naxes; k++) {
        if (axis_swept(&o->axes[k])) {
            csv_field(f, o->axes[k].key);
            fputc(',', f);
        }
    }
    fputs("run,exit", f);
    for (size_t c = 0; c < cols->n; c++) {
        fputc(',', f);
        csv_field(f, cols->names[c]);
    }
    fputc('\n', f);
    for (size_t r = 0; r < nruns; r++) {
        free_sets(run_sets(o, r, idx), o->naxes);
        for (size_t k = 0; k < o->naxes; k++) {
            if (axis_swept(&o->axes[k])) {
                csv_field(f, o->axes[k].values[idx[k]]);
                fputc(',', f);
            }
        }
        if (runs[r].not_run)
            fprintf(f, "%zu,", r);
        else
            fprintf(f, "%zu,%d", r, runs[r].exit_status);
        for (size_t c = 0; c < cols->n; c++) {
            fputc(',', f);
            csv_field(f, cell(&runs[r], c));
        }
        fputc('\n', f);
    }
    free(idx);
    int rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    if (rc)
        fprintf(stderr, "rnicsim sweep: error writing '%s'\n", path);
    free(path);
    return rc;
}

/* A number cell shortened for the screen (%.6g); others as they are. */
static void screen_value(const char *s, char *buf, size_t len)
{
    char *end;
    double d = strtod(s, &end);
    if (*s && !*end && strspn(s, "0123456789") != strlen(s))
        snprintf(buf, len, "%.6g", d);
    else
        snprintf(buf, len, "%s", s);
}

/* Swept keys, run, exit, result, then: with --plot, the columns it names;
 * without, the table columns that differ between the successful runs (all
 * table columns if fewer than two succeeded), at most SUMMARY_MAX_METRICS. */
/* What a run's exit status says (rnicsim run's exit codes), for its row. */
static const char *exit_meaning(int status)
{
    switch (status) {
    case 1:
        return " program-failed";
    case 2:
        return " bad-input";
    case 3:
        return " deadlock";
    case 4:
        return " time-limit";
    case 5:
        return " internal-error";
    default:
        return "";
    }
}

/* The `--set stop_time=...` a run that reached its stop_time suggested in
 * its log (rnicsim run prints it), or NULL. */
static char *stop_time_hint(const struct sw_opts *o, size_t r)
{
    char *path = xasprintf("%s/run-%zu.log", o->dir, r), *hint = NULL;
    size_t len = 0;
    char *text = read_file(path, &len);
    const char *at = text ? strstr(text, "--set stop_time=") : NULL;
    if (at) /* "--set stop_time=VALUE" */
        hint = xasprintf("%.*s", (int)(6 + strcspn(at + 6, " \n")), at);
    free(text);
    free(path);
    return hint;
}

static void print_summary(const struct sw_opts *o, size_t nruns, const struct sw_run *runs,
                          const struct sw_cols *cols, FILE *out)
{
    size_t nok = 0;
    for (size_t r = 0; r < nruns; r++)
        nok += runs[r].exit_status == 0 && !runs[r].unreadable;
    size_t *show = xcalloc_or_die(cols->n + 2, sizeof(size_t));
    size_t nshow = 0, nmetric = 0;
    bool truncated = false;
    for (size_t c = 0; c < cols->n; c++) {
        bool want = !strcmp(cols->names[c], "result");
        if (o->plot_y) {
            const char *nm = cols->names[c];
            want = want || !strcmp(nm, o->plot_y) || !strcmp(nm, o->plot_x) ||
                   (o->plot_series && !strcmp(nm, o->plot_series));
        } else if (cols->kinds[c] == COL_TABLE) {
            bool differs = nok < 2;
            const char *first = NULL;
            for (size_t r = 0; r < nruns && !differs; r++) {
                if (runs[r].exit_status != 0 || runs[r].unreadable)
                    continue;
                if (!first)
                    first = cell(&runs[r], c);
                else if (strcmp(first, cell(&runs[r], c)))
                    differs = true;
            }
            if (differs && nmetric == SUMMARY_MAX_METRICS)
                truncated = true;
            else if (differs) {
                want = true;
                nmetric++;
            }
        }
        if (want)
            show[nshow++] = c;
    }
    /* column widths */
    size_t nax = 0;
    for (size_t k = 0; k < o->naxes; k++)
        nax += axis_swept(&o->axes[k]);
    size_t ncol = nax + 2 + nshow;
    size_t *w = xcalloc_or_die(ncol, sizeof(size_t));
    size_t *idx = xcalloc_or_die(o->naxes + 1, sizeof(size_t));
    char buf[64];
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r <= nruns; r++) { /* r == 0: the header */
            size_t col = 0;
            if (r)
                free_sets(run_sets(o, r - 1, idx), o->naxes);
            for (size_t k = 0; k < o->naxes; k++) {
                if (!axis_swept(&o->axes[k]))
                    continue;
                const char *t = r ? o->axes[k].values[idx[k]] : o->axes[k].key;
                if (pass == 0)
                    w[col] = strlen(t) > w[col] ? strlen(t) : w[col];
                else
                    fprintf(out, "%s%-*s", col ? "  " : "", (int)w[col], t);
                col++;
            }
            for (size_t j = 0; j < 2 + nshow; j++, col++) {
                const char *t;
                if (j == 0)
                    t = r ? (snprintf(buf, sizeof(buf), "%zu", r - 1), buf) : "run";
                else if (j == 1 && r && runs[r - 1].not_run)
                    t = "not run";
                else if (j == 1)
                    t = r ? (snprintf(buf, sizeof(buf), "%d%s", runs[r - 1].exit_status,
                                      exit_meaning(runs[r - 1].exit_status)),
                             buf)
                          : "exit";
                else if (!r)
                    t = cols->names[show[j - 2]];
                else {
                    screen_value(cell(&runs[r - 1], show[j - 2]), buf, sizeof(buf));
                    t = buf;
                }
                if (pass == 0)
                    w[col] = strlen(t) > w[col] ? strlen(t) : w[col];
                else
                    fprintf(out, "%s%*s", col ? "  " : "", (int)w[col], t);
            }
            if (pass == 1)
                fputc('\n', out);
        }
    }
    fprintf(out, "%zu runs, %zu failed; every column is in %s/sweep.csv%s\n", nruns, nruns - nok,
            o->dir, truncated ? " (more differ than shown)" : "");
    free(idx);
    free(w);
    free(show);
}

/* The plot script: $RNICSIM_PLOT_SCRIPT, else tools/plot_sweep.py in the
 * data directories (datadir.c: installed, source tree, build tree). */
static char *find_plot_script(void)
{
    const char *env = getenv("RNICSIM_PLOT_SCRIPT");
    if (env && *env)
        return xstrdup_or_die(env);
    return rnicsim_find_data("tools/plot_sweep.py");
}

static bool column_exists(const struct sw_opts *o, const struct sw_cols *cols, const char *name)
{
    if (!strcmp(name, "run") || !strcmp(name, "exit"))
        return true;
    for (size_t k = 0; k < o->naxes; k++)
        if (axis_swept(&o->axes[k]) && !strcmp(o->axes[k].key, name))
            return true;
    for (size_t c = 0; c < cols->n; c++)
        if (!strcmp(cols->names[c], name))
            return true;
    return false;
}

static int check_plot_column(const struct sw_opts *o, const struct sw_cols *cols, const char *what,
                             const char *name)
{
    if (column_exists(o, cols, name))
        return 0;
    const char **cands = xcalloc_or_die(o->naxes + cols->n + 2, sizeof(char *));
    size_t n = 0;
    for (size_t k = 0; k < o->naxes; k++)
        if (axis_swept(&o->axes[k]))
            cands[n++] = o->axes[k].key;
    for (size_t c = 0; c < cols->n; c++)
        cands[n++] = cols->names[c];
    const char *best = suggest_word(name, cands, n);
    fprintf(stderr, "rnicsim sweep: --plot %s=%s: no such column in %s/sweep.csv%s%s%s\n", what,
            name, o->dir, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
    free(cands);
    return -1;
}

/* 0 plotted or skipped (no matplotlib / python), 2 bad column, 5 error. */
static int plot(const struct sw_opts *o, const struct sw_cols *cols)
{
    if (check_plot_column(o, cols, "x", o->plot_x) || check_plot_column(o, cols, "y", o->plot_y) ||
        (o->plot_series && check_plot_column(o, cols, "series", o->plot_series)))
        return EXIT_USAGE;
    char *script = find_plot_script();
    if (!script) {
        fprintf(stderr, "rnicsim sweep: --plot skipped: tools/plot_sweep.py not found (set "
                        "RNICSIM_PLOT_SCRIPT); the CSV is written\n");
        return 0;
    }
    const char *py = getenv("RNICSIM_PYTHON");
    if (!py || !*py)
        py = "/usr/bin/python3";
    char *csv = xasprintf("%s/sweep.csv", o->dir), *png = xasprintf("%s/sweep.png", o->dir);
    const char *argv[16];
    size_t a = 0;
    argv[a++] = py;
    argv[a++] = script;
    argv[a++] = csv;
    argv[a++] = "--x";
    argv[a++] = o->plot_x;
    argv[a++] = "--y";
    argv[a++] = o->plot_y;
    if (o->plot_series) {
        argv[a++] = "--series";
        argv[a++] = o->plot_series;
    }
    argv[a++] = "-o";
    argv[a++] = png;
    argv[a] = NULL;
    int rc = 0;
    pid_t pid = rn_spawn(py, argv, NULL);
    int st = 0;
    if (pid < 0) {
        fprintf(stderr, "rnicsim sweep: --plot skipped: cannot run %s: %s; the CSV is written\n",
                py, strerror(errno));
    } else {
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        int es = rn_wait_status(st);
        if (es == PLOT_EXIT_NO_MATPLOTLIB)
            fprintf(stderr,
                    "rnicsim sweep: --plot skipped: %s has no matplotlib (install "
                    "python3-matplotlib, or set RNICSIM_PYTHON); the CSV is written\n",
                    py);
        else if (es != 0) {
            fprintf(stderr, "rnicsim sweep: plotting failed (%s exited with status %d)\n", script,
                    es);
            rc = EXIT_INTERNAL;
        } else {
            printf("plot: %s\n", png);
        }
    }
    free(csv);
    free(png);
    free(script);
    return rc;
}

/* ---------------------------------------------------------------- jobs for other machines */

/* realpath(p), or p itself when it cannot be resolved (a new string). */
static char *abs_path(const char *p)
{
    char *r = realpath(p, NULL);
    return r ? r : xstrdup_or_die(p);
}

static FILE *open_out(const char *dir, const char *name, char **path)
{
    *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(*path, "w");
    if (!f)
        fprintf(stderr, "rnicsim sweep: cannot write '%s': %s\n", *path, strerror(errno));
    return f;
}

static int close_out(FILE *f, char *path)
{
    int rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    if (rc)
        fprintf(stderr, "rnicsim sweep: error writing '%s'\n", path);
    free(path);
    return rc;
}

/* --emit-jobs: DIR/sweep.args, DIR/jobs.txt and DIR/slurm.sh. */
static int emit_jobs(const struct sw_opts *o, size_t nruns, int argc, char **argv)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (k <= 0) {
        fprintf(stderr, "rnicsim sweep: cannot find the rnicsim executable: %s\n", strerror(errno));
        return -1;
    }
    exe[k] = '\0';
    for (int i = 0; i < argc; i++) {
        if (strchr(argv[i], '\n')) {
            fprintf(stderr, "rnicsim sweep: --emit-jobs: an argument holds a line break\n");
            return -1;
        }
    }
    char *dir = abs_path(o->dir), *file = abs_path(o->file);
    char *profiles = o->profiles ? abs_path(o->profiles) : NULL;
    char *path;
    int rc = 0;
    /* The sweep's own arguments, for --collect; the scenario as an absolute
     * path, and nothing that only concerns this machine (-j, -o, --plot). */
    FILE *f = open_out(o->dir, "sweep.args", &path);
    if (!f) {
        rc = -1;
        goto out;
    }
    fprintf(f, "%s\n", file);
    for (int i = 0; i < argc; i++) {
        bool missing = false;
        int j = i;
        const char *v;
        if ((v = cli_opt_value(argc, argv, &j, "--set", &missing)))
            fprintf(f, "--set=%s\n", v);
        else if ((v = cli_opt_value(argc, argv, &j, "--seed", &missing)))
            fprintf(f, "--seed=%s\n", v);
        else if (cli_opt_value(argc, argv, &j, "--profiles", &missing))
            fprintf(f, "--profiles=%s\n", profiles);
        i = j;
    }
    if (close_out(f, path)) {
        rc = -1;
        goto out;
    }
    f = open_out(o->dir, "jobs.txt", &path);
    if (!f) {
        rc = -1;
        goto out;
    }
    size_t *idx = xcalloc_or_die(o->naxes + 1, sizeof(size_t));
    for (size_t r = 0; r < nruns; r++) {
        char **sets = run_sets(o, r, idx);
        shell_word(f, exe);
        fputs(" run ", f);
        shell_word(f, file);
        for (size_t a = 0; a < o->naxes; a++) {
            fputs(" --set ", f);
            shell_word(f, sets[a]);
        }
        if (o->seed) {
            fputs(" --seed ", f);
            shell_word(f, o->seed);
        }
        if (profiles) {
            fputs(" --profiles ", f);
            shell_word(f, profiles);
        }
        char *p = xasprintf("%s/run-%zu.json", dir, r);
        fputs(" --quiet -o ", f);
        shell_word(f, p);
        free(p);
        p = xasprintf("%s/run-%zu.log", dir, r);
        fputs(" >", f);
        shell_word(f, p);
        free(p);
        p = xasprintf("%s/run-%zu.exit", dir, r);
        fputs(" 2>&1; echo $? >", f);
        shell_word(f, p);
        free(p);
        fputc('\n', f);
        free_sets(sets, o->naxes);
    }
    free(idx);
    if (close_out(f, path)) {
        rc = -1;
        goto out;
    }
    f = open_out(o->dir, "slurm.sh", &path);
    if (!f) {
        rc = -1;
        goto out;
    }
    fprintf(f,
            "#!/bin/bash\n"
            "# rnicsim sweep: one Slurm array task per run (%zu runs); submit with\n"
            "#   sbatch %s/slurm.sh\n"
            "# then merge with: rnicsim sweep --collect %s\n"
            "#SBATCH --job-name=rnicsim-sweep\n"
            "#SBATCH --array=0-%zu\n"
            "#SBATCH --ntasks=1\n"
            "#SBATCH --cpus-per-task=1\n"
            "#SBATCH --output=/dev/null\n"
            "set -u\n"
            "line=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" ",
            nruns, dir, dir, nruns - 1);
    char *jobs = xasprintf("%s/jobs.txt", dir);
    shell_word(f, jobs);
    free(jobs);
    fputs(")\nexec bash -c \"$line\"\n", f);
    if (close_out(f, path)) {
        rc = -1;
        goto out;
    }
    printf("%zu runs written to %s/jobs.txt; run them with GNU parallel:\n"
           "  parallel -j N < %s/jobs.txt\n"
           "or as a Slurm array job:\n"
           "  sbatch %s/slurm.sh\n"
           "then merge the results into %s/sweep.csv:\n"
           "  rnicsim sweep --collect %s [--plot x=KEY,y=COLUMN]\n",
           nruns, o->dir, o->dir, o->dir, o->dir, o->dir);
out:
    free(dir);
    free(file);
    free(profiles);
    return rc;
}

/* --collect: the arguments DIR/sweep.args holds (a new argv; *argc set). */
static char **collect_args(const char *dir, int *argc)
{
    char *path = xasprintf("%s/sweep.args", dir);
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr,
                "rnicsim sweep: cannot read '%s': %s (was the sweep emitted with "
                "--emit-jobs -o %s?)\n",
                path, strerror(errno), dir);
        free(path);
        return NULL;
    }
    free(path);
    char **args = xcalloc_or_die(len + 2, sizeof(char *));
    int n = 0;
    for (char *line = text, *nl; line < text + len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl)
            nl = text + len;
        args[n++] = xasprintf("%.*s", (int)(nl - line), line);
    }
    free(text);
    *argc = n;
    return args;
}

/* --collect: each run's exit status from DIR/run-<i>.exit. */
static void collect_exits(const struct sw_opts *o, size_t nruns, struct sw_run *runs)
{
    for (size_t r = 0; r < nruns; r++) {
        char *path = xasprintf("%s/run-%zu.exit", o->dir, r);
        size_t len = 0;
        char *text = read_file(path, &len);
        char *end = NULL;
        long st = text ? strtol(text, &end, 10) : -1;
        if (!text || end == text || st < 0 || st > 255) {
            runs[r].exit_status = -1;
            runs[r].not_run = true;
        } else {
            runs[r].exit_status = (int)st;
        }
        free(text);
        free(path);
    }
}

int sweep_main(int argc, char **argv)
{
    struct sw_opts o = {0};
    struct sw_run *runs = NULL;
    struct sw_cols cols = {0};
    size_t nruns = 1;
    int rc = EXIT_USAGE;
    char **cargs = NULL;
    int ncargs = 0;
    if (parse_args(argc, argv, &o))
        goto out;
    if (o.collect) {
        if (o.file || o.naxes || o.seed || o.profiles || o.emit_jobs || o.jobs != 1 ||
            strcmp(o.dir, SWEEP_DEFAULT_DIR)) {
            fprintf(stderr, "rnicsim sweep: --collect DIR takes only --plot (the rest is in "
                            "DIR/sweep.args)\n");
            goto out;
        }
        if (!(cargs = collect_args(o.collect, &ncargs)))
            goto out;
        struct sw_opts c = {0};
        if (parse_args(ncargs, cargs, &c)) {
            fprintf(stderr, "rnicsim sweep: bad '%s/sweep.args'\n", o.collect);
            free_opts(&c);
            goto out;
        }
        c.dir = o.collect;
        c.collect = o.collect;
        c.plot_x = o.plot_x;
        c.plot_y = o.plot_y;
        c.plot_series = o.plot_series;
        c.plot_buf = o.plot_buf;
        o.plot_buf = NULL;
        free_opts(&o);
        o = c;
    }
    for (size_t k = 0; k < o.naxes; k++) {
        if (nruns > SWEEP_MAX_RUNS / o.axes[k].n) {
            fprintf(stderr, "rnicsim sweep: more than %d combinations\n", SWEEP_MAX_RUNS);
            goto out;
        }
        nruns *= o.axes[k].n;
    }
    if (!o.collect && validate_all(&o, nruns))
        goto out;
    if (timeline_wanted(&o.tl) && (o.collect || o.emit_jobs || o.tl_run >= nruns)) {
        fprintf(stderr,
                "rnicsim sweep: --timeline is for one run of a local sweep: "
                "--timeline-run 0..%zu, without --emit-jobs / --collect\n",
                nruns - 1);
        goto out;
    }
    rc = EXIT_INTERNAL;
    if (!o.collect && make_dirs(o.dir))
        goto out;
    if (o.emit_jobs) {
        rc = emit_jobs(&o, nruns, argc, argv) ? EXIT_INTERNAL : 0;
        goto out;
    }
    runs = xcalloc_or_die(nruns, sizeof(*runs));
    fflush(stdout);
    if (o.collect)
        collect_exits(&o, nruns, runs);
    else if (run_all(&o, nruns, runs))
        goto out;
    collect(&o, nruns, runs, &cols);
    if (write_csv(&o, nruns, runs, &cols))
        goto out;
    print_summary(&o, nruns, runs, &cols, stdout);
    fflush(stdout);
    rc = 0;
    size_t nfailed = 0;
    for (size_t r = 0; r < nruns; r++)
        nfailed += runs[r].exit_status != 0 || runs[r].unreadable;
    if (nfailed) {
        fprintf(stderr, "rnicsim sweep: %zu of %zu runs failed:", nfailed, nruns);
        for (size_t r = 0; r < nruns; r++)
            if (runs[r].not_run)
                fprintf(stderr, " run %zu (not run: no %s/run-%zu.exit)", r, o.dir, r);
            else if (runs[r].exit_status != 0 || runs[r].unreadable)
                fprintf(stderr, " run %zu (exit %d%s%s, %s/run-%zu.log)", r, runs[r].exit_status,
                        exit_meaning(runs[r].exit_status),
                        runs[r].unreadable ? ", results unreadable" : "", o.dir, r);
        fputc('\n', stderr);
        for (size_t r = 0; r < nruns; r++) {
            char *hint = runs[r].exit_status == 4 ? stop_time_hint(&o, r) : NULL;
            if (hint) /* the first one: they all ran the same stop_time */
                fprintf(stderr,
                        "rnicsim sweep: run %zu reached its stop_time with programs still "
                        "running; to simulate longer, add %s\n",
                        r, hint);
            free(hint);
            if (hint)
                break;
        }
        rc = EXIT_FAILED_RUN;
    }
    if (o.plot_x) {
        int prc = plot(&o, &cols);
        if (prc)
            rc = prc;
    }
out:
    for (size_t r = 0; runs && r < nruns; r++) {
        for (size_t c = 0; c < runs[r].ncells; c++)
            free(runs[r].cells[c]);
        free(runs[r].cells);
    }
    free(runs);
    for (size_t c = 0; c < cols.n; c++)
        free(cols.names[c]);
    free(cols.names);
    free(cols.kinds);
    free_opts(&o);
    for (int i = 0; i < ncargs; i++)
        free(cargs[i]);
    free(cargs);
    return rc;
}
