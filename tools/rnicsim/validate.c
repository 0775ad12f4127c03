/* `rnicsim validate`: run the published data points of
 * validation/points.yaml against the model and say how far each is off.
 *
 *   rnicsim validate [--full] [--only ID,...] [-j N] [-o DIR] [--points FILE]
 *                    [--doc FILE.md] [--profiles DIR]
 *
 * Every point names its source (paper and figure, vendor report, perftest
 * output in a public issue), the hardware, a scenario with --set
 * assignments that reproduce the set-up, the result to read (TABLE.COLUMN
 * of the run's results, or A / B of two columns), the published value and
 * a tolerance.  A point may divide its run's metric by the same metric of a
 * second run (`per:`, e.g. device memory over host memory).  The quick
 * points run by default (CI); --full runs all.  Runs that several points
 * share (same scenario and --set) run once: `/proc/self/exe run SCENARIO
 * --set ... -o DIR/run-<i>.json`, at most -j at a time.
 *
 * Verdicts: ok (within tolerance: |sim/published - 1| <= tol; `compare:
 * at_least` only bounds from below, `at_most` from above), OUT (outside),
 * limit (a known limit: the point states why the model misses it; printed,
 * never a failure), error (the run failed or the metric is missing).
 * --doc writes a Markdown page (docs/validation.md) with the table, the
 * sources, the known limits and plots drawn by tools/plot_validation.py
 * into <doc dir>/validation/.
 *
 * Exit status: 0 every point ok or a known limit; 1 a point OUT or in
 * error; 2 bad command line or points file (file:line:col); 5 the page or
 * the plots could not be written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/rnicsim/rnicsim.h"

#define EXIT_OUT 1
#define EXIT_USAGE 2
#define EXIT_OUTPUT 5
#define PLOT_EXIT_NO_MATPLOTLIB 3

enum v_compare { VC_VALUE, VC_AT_LEAST, VC_AT_MOST };
static const char *const v_compare_names[] = {"value", "at_least", "at_most", NULL};
enum v_status { VS_OK, VS_OUT, VS_LIMIT, VS_ERROR, VS_SKIPPED };
static const char *const v_status_names[] = {"ok", "OUT", "limit", "error", "-"};

struct v_point {
    const char *id, *category, *hardware, *source, *scenario, *metric, *unit;
    const char *fitted, *limit, *plot, *xlabel, *note;
    const char **set, **per;
    size_t nset, nper;
    double published, tol, x;
    bool quick, has_x;
    int compare;
    unsigned line;
    /* results */
    bool selected;
    size_t run, per_run;
    double sim;
    int status;
    char why[200];
};

struct v_run {
    char *scenario; /* absolute or relative to the cwd */
    const char **set;
    size_t nset;
    int exit_status;
    struct jv *json;
};

struct v_opts {
    bool full;
    const char *only, *dir, *points, *doc, *profiles;
    unsigned jobs;
};

static void v_usage(FILE *out)
{
    fprintf(out,
            "usage: rnicsim validate [--full] [--only ID,...] [-j N] [-o DIR] [--points FILE]\n"
            "                        [--doc FILE.md] [--profiles DIR]\n"
            "  runs the published data points (validation/points.yaml; the quick ones\n"
            "  unless --full), prints published / simulated / ratio per point, and exits\n"
            "  1 when a point is outside its tolerance (docs/validation.md).\n");
}

static int v_parse_args(int argc, char **argv, struct v_opts *o)
{
    *o = (struct v_opts){.dir = "validate-out", .jobs = 1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        if (!strcmp(a, "--full")) {
            o->full = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            v_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--only"))
            dst = &o->only;
        else if (!strcmp(a, "-o"))
            dst = &o->dir;
        else if (!strcmp(a, "--points"))
            dst = &o->points;
        else if (!strcmp(a, "--doc"))
            dst = &o->doc;
        else if (!strcmp(a, "--profiles"))
            dst = &o->profiles;
        else if (!strncmp(a, "-j", 2) && a[2]) {
            if (atoi(a + 2) < 1) {
                fprintf(stderr, "rnicsim validate: -j needs a number >= 1\n");
                return -1;
            }
            o->jobs = (unsigned)atoi(a + 2);
            continue;
        } else if (!strcmp(a, "-j")) {
            if (i + 1 >= argc || atoi(argv[i + 1]) < 1) {
                fprintf(stderr, "rnicsim validate: -j needs a number >= 1\n");
                return -1;
            }
            o->jobs = (unsigned)atoi(argv[++i]);
            continue;
        } else {
            fprintf(stderr, "rnicsim validate: unknown option '%s'\n", a);
            v_usage(stderr);
            return -1;
        }
        if (i + 1 >= argc || !argv[i + 1][0]) {
            fprintf(stderr, "rnicsim validate: %s needs a value\n", a);
            return -1;
        }
        *dst = argv[++i];
    }
    return 0;
}

/* ---------------------------------------------------------------- the points file */

static int v_str_list(struct cfg_node *map, const char *key, const char ***out, size_t *n,
                      struct cfg_error *err)
{
    struct cfg_node *seq = cfg_child(map, key);
    *out = NULL;
    *n = 0;
    if (!seq)
        return 0;
    if (cfg_req_node(map, key, CFG_SEQ, &seq, err))
        return -1;
    *out = xcalloc_or_die(seq->n + 1, sizeof(char *));
    for (size_t i = 0; i < seq->n; i++)
        if (cfg_node_str(seq->items[i], &(*out)[i], err))
            return -1;
    *n = seq->n;
    return 0;
}

static const char *const v_point_keys[] = {
    "id",     "category",  "hardware", "source",    "scenario", "set",   "per",
    "metric", "published", "unit",     "tolerance", "compare",  "quick", "fitted",
    "limit",  "plot",      "x",        "xlabel",    "note",     NULL};

static int v_load_point(struct cfg_node *n, struct v_point *p, struct cfg_error *err)
{
    if (n->kind != CFG_MAP)
        return cfg_errorf(err, n, "a point must be a mapping, not a %s", cfg_kind_name(n));
    *p = (struct v_point){.line = n->line};
    if (cfg_get_str(n, "id", NULL, &p->id, err) ||
        cfg_get_str(n, "category", NULL, &p->category, err) ||
        cfg_get_str(n, "hardware", NULL, &p->hardware, err) ||
        cfg_get_str(n, "source", NULL, &p->source, err) ||
        cfg_get_str(n, "scenario", NULL, &p->scenario, err) ||
        cfg_get_str(n, "metric", NULL, &p->metric, err) ||
        cfg_get_str(n, "unit", "", &p->unit, err) ||
        cfg_get_double(n, "tolerance", 0.15, &p->tol, err) ||
        cfg_get_enum(n, "compare", v_compare_names, VC_VALUE, &p->compare, err) ||
        cfg_get_bool(n, "quick", false, &p->quick, err) ||
        cfg_get_str(n, "fitted", NULL, &p->fitted, err) ||
        cfg_get_str(n, "limit", NULL, &p->limit, err) ||
        cfg_get_str(n, "plot", NULL, &p->plot, err) ||
        cfg_get_str(n, "xlabel", "", &p->xlabel, err) ||
        cfg_get_str(n, "note", NULL, &p->note, err) ||
        v_str_list(n, "set", &p->set, &p->nset, err) ||
        v_str_list(n, "per", &p->per, &p->nper, err))
        return -1;
    if (!p->id || !p->category || !p->hardware || !p->source || !p->scenario || !p->metric) {
        const char *miss = !p->id         ? "id"
                           : !p->category ? "category"
                           : !p->hardware ? "hardware"
                           : !p->source   ? "source"
                           : !p->scenario ? "scenario"
                                          : "metric";
        return cfg_errorf(err, n, "point needs '%s'", miss);
    }
    if (!cfg_child(n, "published"))
        return cfg_errorf(err, n, "point '%s' needs 'published'", p->id);
    if (cfg_get_double(n, "published", 0, &p->published, err))
        return -1;
    if (!(p->published > 0))
        return cfg_errorf(err, cfg_child(n, "published"), "'published' must be > 0");
    if (!(p->tol > 0 && p->tol < 10))
        return cfg_errorf(err, cfg_child(n, "tolerance"), "'tolerance' must be in (0, 10)");
    if (cfg_child(n, "x")) {
        if (cfg_get_double(n, "x", 0, &p->x, err))
            return -1;
        p->has_x = true;
    }
    if (cfg_child(n, "per") && !p->nper)
        return cfg_errorf(err, cfg_child(n, "per"), "'per' needs at least one --set assignment");
    return cfg_check_unused_known(n, "point", v_point_keys, err);
}

static const char *const v_top_keys[] = {"points", NULL};

static void v_free_points(struct v_point *pts, size_t n)
{
    for (size_t i = 0; pts && i < n; i++) {
        free(pts[i].set);
        free(pts[i].per);
    }
    free(pts);
}

static int v_load(struct cfg_doc *doc, struct v_point **out, size_t *n, struct cfg_error *err)
{
    struct cfg_node *root = doc->root, *seq;
    if (!root || root->kind != CFG_MAP)
        return cfg_errorf(err, root, "the points file is a mapping with 'points:'");
    if (cfg_req_node(root, "points", CFG_SEQ, &seq, err))
        return -1;
    struct v_point *pts = xcalloc_or_die(seq->n + 1, sizeof(*pts));
    int rc = 0;
    size_t i = 0;
    for (; i < seq->n && !rc; i++) {
        rc = v_load_point(seq->items[i], &pts[i], err);
        for (size_t j = 0; j < i && !rc; j++)
            if (!strcmp(pts[j].id, pts[i].id))
                rc = cfg_errorf(err, seq->items[i], "duplicate point id '%s'", pts[i].id);
    }
    if (!rc)
        rc = cfg_check_unused_known(root, "points file", v_top_keys, err);
    if (rc) {
        v_free_points(pts, i);
        return -1;
    }
    *out = pts;
    *n = seq->n;
    return 0;
}

/* ---------------------------------------------------------------- runs */

static bool v_same_sets(const char **a, size_t na, const char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            return false;
    return true;
}

static size_t v_run_for(struct v_run **runs, size_t *nruns, char *scenario, const char **set,
                        size_t nset)
{
    for (size_t r = 0; r < *nruns; r++)
        if (!strcmp((*runs)[r].scenario, scenario) &&
            v_same_sets((*runs)[r].set, (*runs)[r].nset, set, nset)) {
            free(scenario);
            return r;
        }
    *runs = xrealloc_or_die(*runs, (*nruns + 1) * sizeof(**runs));
    (*runs)[*nruns] = (struct v_run){.scenario = scenario, .set = set, .nset = nset};
    return (*nruns)++;
}

static int v_make_dir(const char *path)
{
    char *p = xstrdup_or_die(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

static char *v_read_file(const char *path, size_t *len)
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
    fclose(f);
    *len = n;
    return buf;
}

/* Run every run, at most o->jobs at once; exit statuses and parsed JSON
 * in runs[]. */
static void v_run_all(const struct v_opts *o, struct v_run *runs, size_t nruns)
{
    pid_t *pids = xcalloc_or_die(nruns + 1, sizeof(pid_t));
    size_t next = 0, running = 0, done = 0;
    bool tty = isatty(STDERR_FILENO);
    while (done < nruns) {
        while (running < o->jobs && next < nruns) {
            size_t r = next++;
            char *jpath = xasprintf("%s/run-%zu.json", o->dir, r);
            char *log = xasprintf("%s/run-%zu.log", o->dir, r);
            const char **argv = xcalloc_or_die(2 * runs[r].nset + 10, sizeof(char *));
            size_t a = 0;
            argv[a++] = "rnicsim";
            argv[a++] = "run";
            argv[a++] = runs[r].scenario;
            for (size_t k = 0; k < runs[r].nset; k++) {
                argv[a++] = "--set";
                argv[a++] = runs[r].set[k];
            }
            if (o->profiles) {
                argv[a++] = "--profiles";
                argv[a++] = o->profiles;
            }
            argv[a++] = "-o";
            argv[a++] = jpath;
            unlink(jpath);
            pids[r] = rn_spawn("/proc/self/exe", argv, log);
            if (pids[r] < 0) {
                runs[r].exit_status = 127;
                done++;
            } else {
                running++;
            }
            free(argv);
            free(jpath);
            free(log);
        }
        if (!running)
            continue;
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (size_t r = 0; r < nruns; r++)
            if (pids[r] == pid) {
                runs[r].exit_status = rn_wait_status(st);
                pids[r] = 0;
                running--;
                done++;
                break;
            }
        if (tty)
            fprintf(stderr, "\r[%zu/%zu runs done]", done, nruns);
    }
    if (tty)
        fputc('\n', stderr);
    free(pids);
    for (size_t r = 0; r < nruns; r++) {
        char *jpath = xasprintf("%s/run-%zu.json", o->dir, r);
        size_t len = 0;
        char *text = v_read_file(jpath, &len);
        char why[160];
        if (text)
            runs[r].json = jv_parse(text, len, why, sizeof(why));
        free(text);
        free(jpath);
    }
}

/* ---------------------------------------------------------------- metrics */

/* TABLE.COLUMN of the first row of a run's results: 0, or -1 with `why`. */
static int v_column(const struct jv *json, const char *ref, size_t len, double *out, char *why,
                    size_t why_len)
{
    char buf[128];
    while (len && ref[0] == ' ')
        ref++, len--;
    while (len && ref[len - 1] == ' ')
        len--;
    if (len >= sizeof(buf)) {
        snprintf(why, why_len, "metric too long");
        return -1;
    }
    memcpy(buf, ref, len);
    buf[len] = '\0';
    char *dot = strchr(buf, '.');
    if (!dot) {
        snprintf(why, why_len, "metric '%s' is not TABLE.COLUMN", buf);
        return -1;
    }
    *dot = '\0';
    const struct jv *rows = jv_get(jv_get(json, "tables"), buf);
    if (!rows || rows->kind != JV_ARRAY || !rows->n) {
        snprintf(why, why_len, "no results table '%s'", buf);
        return -1;
    }
    const struct jv *v = jv_get(rows->items[0], dot + 1);
    if (!v || v->kind != JV_NUMBER) {
        snprintf(why, why_len, "table '%s' has no number '%s'", buf, dot + 1);
        return -1;
    }
    *out = strtod(v->text, NULL);
    return 0;
}

/* "T.C" or "T.C / T2.C2". */
static int v_metric(const struct jv *json, const char *metric, double *out, char *why,
                    size_t why_len)
{
    const char *slash = strchr(metric, '/');
    double a, b;
    if (!slash)
        return v_column(json, metric, strlen(metric), out, why, why_len);
    if (v_column(json, metric, (size_t)(slash - metric), &a, why, why_len) ||
        v_column(json, slash + 1, strlen(slash + 1), &b, why, why_len))
        return -1;
    if (b == 0) {
        snprintf(why, why_len, "division by zero in '%s'", metric);
        return -1;
    }
    *out = a / b;
    return 0;
}

static void v_judge(struct v_point *p, const struct v_run *runs)
{
    const struct v_run *r = &runs[p->run];
    if (r->exit_status != 0 || !r->json) {
        snprintf(p->why, sizeof(p->why), "the run exited with status %d", r->exit_status);
        p->status = VS_ERROR;
        return;
    }
    if (v_metric(r->json, p->metric, &p->sim, p->why, sizeof(p->why))) {
        p->status = VS_ERROR;
        return;
    }
    if (p->nper) {
        const struct v_run *d = &runs[p->per_run];
        double den;
        if (d->exit_status != 0 || !d->json) {
            snprintf(p->why, sizeof(p->why), "the 'per' run exited with status %d", d->exit_status);
            p->status = VS_ERROR;
            return;
        }
        if (v_metric(d->json, p->metric, &den, p->why, sizeof(p->why))) {
            p->status = VS_ERROR;
            return;
        }
        if (den == 0) {
            snprintf(p->why, sizeof(p->why), "the 'per' run's metric is 0");
            p->status = VS_ERROR;
            return;
        }
        p->sim /= den;
    }
    double ratio = p->sim / p->published;
    bool ok = p->compare == VC_AT_LEAST  ? ratio >= 1 - p->tol
              : p->compare == VC_AT_MOST ? ratio <= 1 + p->tol
                                         : fabs(ratio - 1) <= p->tol + 1e-12;
    p->status = ok ? VS_OK : p->limit ? VS_LIMIT : VS_OUT;
}

/* ---------------------------------------------------------------- output */

static void v_print(const struct v_point *pts, size_t n, FILE *out)
{
    fprintf(out, "%-30s %-16s %12s %12s %7s %6s  %s\n", "point", "category", "published",
            "simulated", "ratio", "tol", "verdict");
    for (size_t i = 0; i < n; i++) {
        const struct v_point *p = &pts[i];
        if (!p->selected)
            continue;
        char sim[32] = "-", ratio[16] = "-";
        if (p->status != VS_ERROR) {
            snprintf(sim, sizeof(sim), "%.4g", p->sim);
            snprintf(ratio, sizeof(ratio), "%.3f", p->sim / p->published);
        }
        const char *cmp = p->compare == VC_AT_LEAST ? ">=" : p->compare == VC_AT_MOST ? "<=" : "";
        char tol[16];
        snprintf(tol, sizeof(tol), "%s%.0f%%", cmp, p->tol * 100);
        fprintf(out, "%-30s %-16s %12.4g %12s %7s %6s  %s%s%s%s\n", p->id, p->category,
                p->published, sim, ratio, tol, v_status_names[p->status],
                p->fitted ? " (fitted)" : "", p->status == VS_ERROR ? ": " : "",
                p->status == VS_ERROR ? p->why : "");
    }
}

static void md_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

static int v_write_csv(const char *path, const struct v_point *pts, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "id,category,plot,x,published,simulated,status,unit,xlabel\n");
    for (size_t i = 0; i < n; i++) {
        const struct v_point *p = &pts[i];
        if (!p->selected || p->status == VS_ERROR)
            continue;
        fprintf(f, "%s,%s,%s,", p->id, p->category, p->plot ? p->plot : "");
        if (p->has_x)
            fprintf(f, "%.10g", p->x);
        fprintf(f, ",%.10g,%.10g,%s,%s,%s\n", p->published, p->sim, v_status_names[p->status],
                p->unit, p->xlabel);
    }
    return fclose(f);
}

/* Run tools/plot_validation.py on the CSV: 0, or -1 (reason printed). */
static int v_plot(const char *csv, const char *outdir)
{
    char *script = rnicsim_find_data("tools/plot_validation.py");
    if (!script) {
        fprintf(stderr, "rnicsim validate: plots skipped: tools/plot_validation.py not found\n");
        return -1;
    }
    const char *py = getenv("RNICSIM_PYTHON");
    if (!py || !*py)
        py = "/usr/bin/python3";
    const char *argv[] = {py, script, csv, outdir, NULL};
    pid_t pid = rn_spawn(py, argv, NULL);
    int rc = -1, st = 0;
    if (pid >= 0) {
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        int es = rn_wait_status(st);
        if (es == 0)
            rc = 0;
        else if (es == PLOT_EXIT_NO_MATPLOTLIB)
            fprintf(stderr, "rnicsim validate: plots skipped: %s has no matplotlib\n", py);
        else
            fprintf(stderr, "rnicsim validate: plotting failed (status %d)\n", es);
    }
    free(script);
    return rc;
}

static int v_write_doc(const struct v_opts *o, const struct v_point *pts, size_t n)
{
    char *docdir = xstrdup_or_die(o->doc);
    char *slash = strrchr(docdir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(docdir, ".");
    char *figdir = xasprintf("%s/validation", docdir);
    char *csv = xasprintf("%s/validation.csv", figdir);
    int rc = 0;
    if (v_make_dir(figdir) || v_write_csv(csv, pts, n)) {
        fprintf(stderr, "rnicsim validate: cannot write %s: %s\n", csv, strerror(errno));
        rc = EXIT_OUTPUT;
        goto out;
    }
    bool plotted = v_plot(csv, figdir) == 0;
    FILE *f = fopen(o->doc, "w");
    if (!f) {
        fprintf(stderr, "rnicsim validate: cannot write %s: %s\n", o->doc, strerror(errno));
        rc = EXIT_OUTPUT;
        goto out;
    }
    size_t cnt[5] = {0}, sel = 0, fitted = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].selected) {
            cnt[pts[i].status]++;
            sel++;
            fitted += pts[i].fitted != NULL;
        }
    fprintf(f,
            "# Validation: the model against published measurements\n\n"
            "<!-- Written by `rnicsim validate%s --doc docs/validation.md`; the points are "
            "validation/points.yaml. -->\n\n",
            o->full ? " --full" : "");
    fprintf(f,
            "`rnicsim validate` runs every data point of `validation/points.yaml`: a number "
            "published for real hardware (paper and figure, vendor report, perftest output in a "
            "public issue), the set-up that reproduces it as a scenario with `--set` "
            "assignments, the result to read and a tolerance.  `rnicsim validate` runs the quick "
            "points (CI does); `rnicsim validate --full` runs all of them and `--doc FILE` writes "
            "this page.  A point marked *fitted* is one a parameter was fitted to (it checks the "
            "fit holds); every other point was not used to set any parameter.  A *known limit* "
            "is a point the model misses, with the reason; it is reported, never hidden, and "
            "does not fail the command.\n\n");
    fprintf(f,
            "This run: %zu points (%zu fitted), %zu within tolerance, %zu known limits, %zu "
            "outside, %zu errors.\n\n",
            sel, fitted, cnt[VS_OK], cnt[VS_LIMIT], cnt[VS_OUT], cnt[VS_ERROR]);
    if (plotted)
        fprintf(f, "![simulated / published per point](validation/ratios.png)\n\n");
    fprintf(f, "| point | category | hardware | published | simulated | ratio | tolerance | "
               "verdict |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const struct v_point *p = &pts[i];
        if (!p->selected)
            continue;
        fprintf(f, "| `%s` | %s | ", p->id, p->category);
        md_escape(f, p->hardware);
        fprintf(f, " | %.4g %s | ", p->published, p->unit);
        if (p->status == VS_ERROR)
            fprintf(f, "error | - | ");
        else
            fprintf(f, "%.4g | %.3f | ", p->sim, p->sim / p->published);
        fprintf(f, "%s%.0f %% | %s%s |\n",
                p->compare == VC_AT_LEAST  ? ">= "
                : p->compare == VC_AT_MOST ? "<= "
                                           : "+-",
                p->tol * 100, v_status_names[p->status], p->fitted ? " (fitted)" : "");
    }
    fprintf(f, "\n## Sources and set-ups\n\n");
    for (size_t i = 0; i < n; i++) {
        const struct v_point *p = &pts[i];
        if (!p->selected)
            continue;
        fprintf(f, "- **`%s`**: ", p->id);
        md_escape(f, p->source);
        fprintf(f, ".  Scenario `%s`", p->scenario);
        for (size_t k = 0; k < p->nset; k++)
            fprintf(f, "%s`--set %s`", k ? " " : " with ", p->set[k]);
        if (p->nper) {
            fprintf(f, ", divided by the same run with");
            for (size_t k = 0; k < p->nper; k++)
                fprintf(f, " `--set %s`", p->per[k]);
        }
        fprintf(f, "; result `%s`.", p->metric);
        if (p->fitted) {
            fprintf(f, "  Fitted: ");
            md_escape(f, p->fitted);
            fprintf(f, ".");
        }
        if (p->note) {
            fprintf(f, "  ");
            md_escape(f, p->note);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n## Known limits\n\n");
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const struct v_point *p = &pts[i];
        if (!p->selected || !p->limit)
            continue;
        any = true;
        fprintf(f, "- **`%s`** (%s): ", p->id,
                p->status == VS_LIMIT ? "outside its tolerance" : "within tolerance in this run");
        md_escape(f, p->limit);
        fprintf(f, "\n");
    }
    if (!any)
        fprintf(f, "None.\n");
    if (plotted) {
        bool first = true;
        for (size_t i = 0; i < n; i++) {
            const struct v_point *p = &pts[i];
            if (!p->selected || !p->plot)
                continue;
            bool seen = false;
            for (size_t j = 0; j < i; j++)
                seen |= pts[j].selected && pts[j].plot && !strcmp(pts[j].plot, p->plot);
            if (seen)
                continue;
            if (first)
                fprintf(f, "\n## Plots\n\n");
            first = false;
            fprintf(f, "![%s](validation/%s.png)\n\n", p->plot, p->plot);
        }
    }
    if (fclose(f)) {
        rc = EXIT_OUTPUT;
        goto out;
    }
    printf("wrote %s%s\n", o->doc, plotted ? " and its plots" : " (no plots)");
out:
    free(docdir);
    free(figdir);
    free(csv);
    return rc;
}

/* ---------------------------------------------------------------- main */

static bool v_in_list(const char *list, const char *id)
{
    size_t n = strlen(id);
    for (const char *s = list; *s;) {
        const char *e = strchr(s, ',');
        size_t k = e ? (size_t)(e - s) : strlen(s);
        if (k == n && !strncmp(s, id, n))
            return true;
        if (!e)
            break;
        s = e + 1;
    }
    return false;
}

int validate_main(int argc, char **argv)
{
    struct v_opts o;
    int prc = v_parse_args(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : EXIT_USAGE;
    char *points =
        o.points ? xstrdup_or_die(o.points) : rnicsim_find_data("validation/points.yaml");
    if (!points) {
        fprintf(stderr, "rnicsim validate: validation/points.yaml not found (give --points)\n");
        return EXIT_USAGE;
    }
    struct cfg_error err;
    struct cfg_doc *doc = cfg_load_file(points, &err);
    struct v_point *pts = NULL;
    size_t n = 0;
    if (!doc || v_load(doc, &pts, &n, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        cfg_free(doc);
        free(points);
        return EXIT_USAGE;
    }
    /* scenarios are relative to the points file */
    char *base = xstrdup_or_die(points);
    char *sl = strrchr(base, '/');
    if (sl)
        sl[1] = '\0';
    else
        base[0] = '\0';
    struct v_run *runs = NULL;
    size_t nruns = 0, nsel = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        struct v_point *p = &pts[i];
        p->selected = o.only ? v_in_list(o.only, p->id) : (o.full || p->quick);
        p->status = VS_SKIPPED;
        if (!p->selected)
            continue;
        nsel++;
        char *sc = p->scenario[0] == '/' ? xstrdup_or_die(p->scenario)
                                         : xasprintf("%s%s", base, p->scenario);
        if (access(sc, R_OK)) {
            fprintf(stderr, "%s:%u: point '%s': scenario %s: %s\n", points, p->line, p->id, sc,
                    strerror(errno));
            free(sc);
            rc = EXIT_USAGE;
            goto out;
        }
        char *sc2 = xstrdup_or_die(sc);
        p->run = v_run_for(&runs, &nruns, sc, p->set, p->nset);
        if (p->nper)
            p->per_run = v_run_for(&runs, &nruns, sc2, p->per, p->nper);
        else
            free(sc2);
    }
    if (o.only && !nsel) {
        fprintf(stderr, "rnicsim validate: --only %s matches no point\n", o.only);
        rc = EXIT_USAGE;
        goto out;
    }
    if (v_make_dir(o.dir)) {
        fprintf(stderr, "rnicsim validate: cannot create %s: %s\n", o.dir, strerror(errno));
        rc = EXIT_OUTPUT;
        goto out;
    }
    printf("rnicsim validate: %zu points (%s), %zu runs, -j %u, outputs in %s/\n", nsel,
           o.only   ? "--only"
           : o.full ? "--full"
                    : "quick",
           nruns, o.jobs, o.dir);
    fflush(stdout);
    v_run_all(&o, runs, nruns);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].selected) {
            v_judge(&pts[i], runs);
            bad += pts[i].status == VS_OUT || pts[i].status == VS_ERROR;
        }
    v_print(pts, n, stdout);
    size_t lim = 0, ok = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].selected) {
            lim += pts[i].status == VS_LIMIT;
            ok += pts[i].status == VS_OK;
        }
    printf("%zu ok, %zu known limits, %zu outside or in error\n", ok, lim, bad);
    rc = bad ? EXIT_OUT : 0;
    if (o.doc) {
        int drc = v_write_doc(&o, pts, n);
        if (drc)
            rc = drc;
    }
out:
    for (size_t r = 0; r < nruns; r++) {
        jv_free(runs[r].json);
        free(runs[r].scenario);
    }
    v_free_points(pts, n);
    free(runs);
    free(base);
    free(points);
    cfg_free(doc);
    return rc;
}
