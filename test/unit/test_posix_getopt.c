/* posix/getopt.c against glibc's getopt_long / getopt_long_only: the same
 * argument vectors through both must give the same return values, optind,
 * optarg, optopt and longindex at every call, the same permuted argv at the
 * end, and the same error messages on stderr.  The cases cover GNU
 * permutation, '+' and '-' option strings, "--", grouped short options,
 * required / optional arguments in the same and the next element, long
 * options with "=", unique and ambiguous abbreviations, flag options,
 * getopt_long_only's single-dash long options, "-W foo" and the ':'
 * prefix that silences errors. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posix/posix_priv.h"
#include "test.h"

enum { MAX_ARGS = 16, MAX_STEPS = 32 };

struct step {
    int ret, optind, optopt, longind;
    char optarg[32];
};

struct outcome {
    struct step steps[MAX_STEPS];
    int n;
    char *argv_after[MAX_ARGS];
    char err[1024];
};

static int flag_var;

static const struct option longopts[] = {
    {"port", required_argument, NULL, 'p'},     {"verbose", no_argument, NULL, 'v'},
    {"verify", no_argument, NULL, 'V'},         {"level", optional_argument, NULL, 'l'},
    {"flag", no_argument, &flag_var, 7},        {"size", required_argument, NULL, 's'},
    {"size-max", required_argument, NULL, 'S'}, {NULL, 0, NULL, 0},
};

struct tcase {
    const char *optstring;
    bool with_long, long_only;
    const char *args[MAX_ARGS]; /* argv[0] first, NULL-terminated */
};

static const struct tcase cases[] = {
    {"ab:c::", false, false, {"prog", "-a", "-b", "x", "-cfoo", "-c", "rest", NULL}},
    {"ab:c::", false, false, {"prog", "file1", "-ab3", "file2", "-c", "--", "-a", NULL}},
    {"+ab:", false, false, {"prog", "-a", "file", "-b", "1", NULL}},
    {"-ab:", false, false, {"prog", "x", "-a", "y", "-b", "2", "z", NULL}},
    {"ab:", false, false, {"prog", "-z", "-b", NULL}},
    {":ab:", false, false, {"prog", "-z", "-b", NULL}},
    {"p:vs:",
     true,
     false,
     {"prog", "--port=18515", "host", "--verb", "-s", "4096", "--flag", "--level", NULL}},
    {"p:vs:", true, false, {"prog", "--ver", "--size", "--x", "--verbose=1", "--port", NULL}},
    {"p:vs:", true, false, {"prog", "--level=3", "--si", "64", "--size-max=9", "-vp7", NULL}},
    {"p:vs:W;", true, false, {"prog", "-W", "verbose", "-Wport=5", "-W", NULL}},
    {"p:vs:", true, true, {"prog", "-port", "9", "-v", "-verbose", "-s", "1", "-x", NULL}},
    {"e:g:n:s:", false, false, {"prog", "-g", "0", "-e1", "-n", "10", "h0", NULL}},
};

static void capture(const struct tcase *c, bool ours, struct outcome *o)
{
    memset(o, 0, sizeof(*o));
    static char storage[MAX_ARGS][64];
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (; c->args[argc]; argc++) {
        snprintf(storage[argc], sizeof(storage[argc]), "%s", c->args[argc]);
        argv[argc] = storage[argc];
    }
    argv[argc] = NULL;
    struct getopt_state st;
    memset(&st, 0, sizeof(st));
    FILE *saved = stderr;
    FILE *mem = fmemopen(o->err, sizeof(o->err) - 1, "w");
    setvbuf(mem, NULL, _IONBF, 0);
    stderr = mem;
    optind = 0;
    opterr = 1;
    optopt = '?';
    flag_var = 0;
    for (o->n = 0; o->n < MAX_STEPS; o->n++) {
        int longind = -1;
        int r;
        const struct option *lo = c->with_long ? longopts : NULL;
        if (ours)
            r = posix_getopt(argc, argv, c->optstring, lo, &longind, c->long_only, false, &st);
        else if (c->long_only)
            r = getopt_long_only(argc, argv, c->optstring, lo, &longind);
        else if (lo)
            r = getopt_long(argc, argv, c->optstring, lo, &longind);
        else
            r = getopt(argc, argv, c->optstring);
        struct step *s = &o->steps[o->n];
        s->ret = r;
        s->optind = optind;
        s->optopt = optopt;
        s->longind = longind;
        snprintf(s->optarg, sizeof(s->optarg), "%s", optarg ? optarg : "(null)");
        if (r == -1)
            break;
    }
    stderr = saved;
    fclose(mem);
    for (int i = 0; i < argc; i++)
        o->argv_after[i] = argv[i];
}

int main(void)
{
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct outcome g, p;
        capture(&cases[k], false, &g);
        char argv_g[MAX_ARGS][64];
        for (int i = 0; i < MAX_ARGS && g.argv_after[i]; i++)
            snprintf(argv_g[i], sizeof(argv_g[i]), "%s", g.argv_after[i]);
        capture(&cases[k], true, &p);
        CHECK_EQ_U64(p.n, g.n);
        for (int i = 0; i <= g.n && i < MAX_STEPS; i++) {
            const struct step *a = &g.steps[i], *b = &p.steps[i];
            /* optopt means something after an error; otherwise glibc shows the
             * last error's, of any earlier parse of the process */
            bool err = a->ret == '?' || a->ret == ':';
            if (a->ret != b->ret || a->optind != b->optind || (err && a->optopt != b->optopt) ||
                a->longind != b->longind || strcmp(a->optarg, b->optarg)) {
                fprintf(stderr,
                        "case %zu step %d: glibc ret %d optind %d optopt %d longind %d optarg %s; "
                        "ours ret %d optind %d optopt %d longind %d optarg %s\n",
                        k, i, a->ret, a->optind, a->optopt, a->longind, a->optarg, b->ret,
                        b->optind, b->optopt, b->longind, b->optarg);
                CHECK(false);
            } else {
                CHECK(true);
            }
        }
        for (int i = 0; i < MAX_ARGS && g.argv_after[i]; i++)
            CHECK(p.argv_after[i] && strcmp(argv_g[i], p.argv_after[i]) == 0);
        if (strcmp(g.err, p.err)) {
            fprintf(stderr, "case %zu messages differ:\nglibc: %sours:  %s", k, g.err, p.err);
            CHECK(false);
        }
    }
    return test_summary();
}
