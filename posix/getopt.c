/* getopt, getopt_long, getopt_long_only with per-program state.
 *
 * glibc keeps getopt's scanning state (the position inside a group of
 * short options, the permutation bookkeeping) in one static variable of
 * libc, shared by every program of a run; a program that is switched out
 * in the middle of its option loop (devinfo -l calls a verbs function from
 * inside it) would have it overwritten by the next program's parse.  These
 * functions behave as glibc 2.36's do -- GNU permutation (unless the
 * option string starts with '+' or POSIXLY_CORRECT is set), '-' for
 * in-order non-options, ':' to silence errors and report missing
 * arguments, long options with unique abbreviations and "=value",
 * getopt_long_only's single-dash long options, "-W foo" with "W;", the
 * same messages -- but keep that state in the program (struct
 * getopt_state) and use the public optind / optarg / opterr / optopt,
 * which the switch hook keeps per program (prog.c).
 *
 * test/unit/test_posix_getopt.c compares them with glibc's on a table of
 * argument vectors. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posix/posix_priv.h"

enum { ORDER_REQUIRE, ORDER_PERMUTE, ORDER_IN_ORDER };

static bool is_nonoption(const char *a)
{
    return a[0] != '-' || a[1] == '\0';
}

static void reverse(char **v, int from, int to)
{
    for (to--; from < to; from++, to--) {
        char *x = v[from];
        v[from] = v[to];
        v[to] = x;
    }
}

/* The options just scanned, argv[last_nonopt, optind), move in front of
 * the skipped non-options argv[first_nonopt, last_nonopt), each keeping
 * its order (a rotation). */
static void move_options_first(char **argv, struct getopt_state *st)
{
    int a = st->first_nonopt, b = st->last_nonopt, c = optind;
    reverse(argv, a, b);
    reverse(argv, b, c);
    reverse(argv, a, c);
    st->first_nonopt += c - b;
    st->last_nonopt = c;
}

/* st->nextchar is the option name (after "--", "-" or "-W ").  Returns
 * what getopt returns, or -1 if it is not a long option and should be
 * read as short options (getopt_long_only only). */
static int long_option(int argc, char **argv, const char *optstring, const struct option *longopts,
                       int *longind, bool long_only, struct getopt_state *st, bool print,
                       const char *prefix)
{
    char *name = st->nextchar;
    char *end = name;
    while (*end && *end != '=')
        end++;
    size_t len = (size_t)(end - name);

    int n_opts = 0;
    const struct option *found = NULL;
    int found_index = -1;
    for (const struct option *o = longopts; o->name; o++, n_opts++)
        if (!found && strlen(o->name) == len && strncmp(o->name, name, len) == 0) {
            found = o;
            found_index = n_opts;
        }

    if (!found) {
        /* a unique abbreviation, or several that all mean the same */
        bool ambiguous = false;
        char *candidates = NULL;
        int i = 0;
        for (const struct option *o = longopts; o->name; o++, i++) {
            if (strncmp(o->name, name, len) != 0)
                continue;
            if (!found) {
                found = o;
                found_index = i;
            } else if (long_only || o->has_arg != found->has_arg || o->flag != found->flag ||
                       o->val != found->val) {
                if (!ambiguous && print) {
                    candidates = calloc((size_t)n_opts, 1);
                    if (candidates)
                        candidates[found_index] = 1;
                }
                ambiguous = true;
                if (candidates)
                    candidates[i] = 1;
            }
        }
        if (ambiguous) {
            if (print && candidates) {
                fprintf(stderr, "%s: option '%s%s' is ambiguous; possibilities:", argv[0], prefix,
                        name);
                for (int k = 0; k < n_opts; k++)
                    if (candidates[k])
                        fprintf(stderr, " '%s%s'", prefix, longopts[k].name);
                fprintf(stderr, "\n");
            } else if (print) {
                fprintf(stderr, "%s: option '%s%s' is ambiguous\n", argv[0], prefix, name);
            }
            free(candidates);
            st->nextchar += strlen(st->nextchar);
            optind++;
            optopt = 0;
            return '?';
        }
    }

    if (!found) {
        if (!long_only || argv[optind][1] == '-' || !strchr(optstring, *name)) {
            if (print)
                fprintf(stderr, "%s: unrecognized option '%s%s'\n", argv[0], prefix, name);
            st->nextchar = NULL;
            optind++;
            optopt = 0;
            return '?';
        }
        return -1; /* long_only: read it as short options */
    }

    optind++;
    st->nextchar = NULL;
    if (*end) {
        if (!found->has_arg) {
            if (print)
                fprintf(stderr, "%s: option '%s%s' doesn't allow an argument\n", argv[0], prefix,
                        found->name);
            optopt = found->val;
            return '?';
        }
        optarg = end + 1;
    } else if (found->has_arg == required_argument) {
        if (optind >= argc) {
            if (print)
                fprintf(stderr, "%s: option '%s%s' requires an argument\n", argv[0], prefix,
                        found->name);
            optopt = found->val;
            return optstring[0] == ':' ? ':' : '?';
        }
        optarg = argv[optind++];
    }
    if (longind)
        *longind = found_index;
    if (found->flag) {
        *found->flag = found->val;
        return 0;
    }
    return found->val;
}

/* The next ARGV-element: returns 0 with st->nextchar set to a group of
 * short options, or the value getopt returns (-1 at the end, 1 for an
 * in-order non-option, a long option's result). */
static int next_element(int argc, char **argv, const char *optstring, const struct option *longopts,
                        int *longind, bool long_only, struct getopt_state *st, bool print,
                        bool *done)
{
    *done = true;
    if (st->last_nonopt > optind)
        st->last_nonopt = optind;
    if (st->first_nonopt > optind)
        st->first_nonopt = optind;
    if (st->ordering == ORDER_PERMUTE) {
        if (st->first_nonopt != st->last_nonopt && st->last_nonopt != optind)
            move_options_first(argv, st);
        else if (st->last_nonopt != optind)
            st->first_nonopt = optind;
        while (optind < argc && is_nonoption(argv[optind]))
            optind++;
        st->last_nonopt = optind;
    }
    if (optind != argc && strcmp(argv[optind], "--") == 0) {
        optind++;
        if (st->first_nonopt != st->last_nonopt && st->last_nonopt != optind)
            move_options_first(argv, st);
        else if (st->first_nonopt == st->last_nonopt)
            st->first_nonopt = optind;
        st->last_nonopt = argc;
        optind = argc;
    }
    if (optind == argc) {
        if (st->first_nonopt != st->last_nonopt)
            optind = st->first_nonopt;
        return -1;
    }
    if (is_nonoption(argv[optind])) {
        if (st->ordering == ORDER_REQUIRE)
            return -1;
        optarg = argv[optind++];
        return 1;
    }
    if (longopts) {
        if (argv[optind][1] == '-') {
            st->nextchar = argv[optind] + 2;
            return long_option(argc, argv, optstring, longopts, longind, long_only, st, print,
                               "--");
        }
        if (long_only && (argv[optind][2] || !strchr(optstring, argv[optind][1]))) {
            st->nextchar = argv[optind] + 1;
            int code =
                long_option(argc, argv, optstring, longopts, longind, long_only, st, print, "-");
            if (code != -1)
                return code;
        }
    }
    st->nextchar = argv[optind] + 1;
    *done = false;
    return 0;
}

static int getopt_inner(int argc, char **argv, const char *optstring, const struct option *longopts,
                        int *longind, bool long_only, bool posixly_correct,
                        struct getopt_state *st);

int posix_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
                 int *longind, bool long_only, bool posixly_correct, struct getopt_state *st)
{
    /* optopt is reported from the state: set on errors, kept otherwise */
    optopt = st->optopt;
    int r = getopt_inner(argc, argv, optstring, longopts, longind, long_only, posixly_correct, st);
    st->optopt = optopt;
    return r;
}

static int getopt_inner(int argc, char **argv, const char *optstring, const struct option *longopts,
                        int *longind, bool long_only, bool posixly_correct, struct getopt_state *st)
{
    if (argc < 1)
        return -1;
    optarg = NULL;
    bool print = opterr != 0;
    if (optind == 0 || !st->initialized) {
        if (optind == 0)
            optind = 1;
        st->first_nonopt = st->last_nonopt = optind;
        st->nextchar = NULL;
        if (optstring[0] == '-') {
            st->ordering = ORDER_IN_ORDER;
            optstring++;
        } else if (optstring[0] == '+') {
            st->ordering = ORDER_REQUIRE;
            optstring++;
        } else if (posixly_correct || getenv("POSIXLY_CORRECT")) {
            st->ordering = ORDER_REQUIRE;
        } else {
            st->ordering = ORDER_PERMUTE;
        }
        st->initialized = true;
    } else if (optstring[0] == '-' || optstring[0] == '+') {
        optstring++;
    }
    if (optstring[0] == ':')
        print = false;

    if (!st->nextchar || !*st->nextchar) {
        bool done;
        int rc =
            next_element(argc, argv, optstring, longopts, longind, long_only, st, print, &done);
        if (done)
            return rc;
    }

    /* the next short option of the group */
    char c = *st->nextchar++;
    const char *spec = strchr(optstring, c);
    if (*st->nextchar == '\0')
        optind++;
    if (!spec || c == ':' || c == ';') {
        if (print)
            fprintf(stderr, "%s: invalid option -- '%c'\n", argv[0], c);
        optopt = c;
        return '?';
    }
    if (spec[0] == 'W' && spec[1] == ';' && longopts) {
        /* "-W foo" is "--foo" */
        char *arg;
        if (*st->nextchar)
            arg = st->nextchar;
        else if (optind == argc) {
            if (print)
                fprintf(stderr, "%s: option requires an argument -- '%c'\n", argv[0], c);
            optopt = c;
            return optstring[0] == ':' ? ':' : '?';
        } else
            arg = argv[optind];
        st->nextchar = arg;
        optarg = NULL;
        return long_option(argc, argv, optstring, longopts, longind, false, st, print, "-W ");
    }
    if (spec[1] == ':') {
        if (spec[2] == ':') { /* optional argument: only in the same element */
            if (*st->nextchar) {
                optarg = st->nextchar;
                optind++;
            } else {
                optarg = NULL;
            }
            st->nextchar = NULL;
        } else { /* required argument */
            if (*st->nextchar) {
                optarg = st->nextchar;
                optind++;
            } else if (optind == argc) {
                if (print)
                    fprintf(stderr, "%s: option requires an argument -- '%c'\n", argv[0], c);
                optopt = c;
                c = optstring[0] == ':' ? ':' : '?';
            } else {
                optarg = argv[optind++];
            }
            st->nextchar = NULL;
        }
    }
    return c;
}

/* ---------------------------------------------------------------- the redirected entry points */

static struct getopt_state *state_of(struct posix_thread *t)
{
    return &t->prog->gs;
}

/* POSIX declares argv `char *const *`, yet GNU getopt permutes it. */
static char **mutable_argv(char *const *argv)
{
    char **v;
    memcpy(&v, &argv, sizeof(v));
    return v;
}

int __wrap_getopt(int argc, char *const argv[], const char *optstring);
int __wrap_getopt(int argc, char *const argv[], const char *optstring)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getopt(argc, argv, optstring);
    return posix_getopt(argc, mutable_argv(argv), optstring, NULL, NULL, false, false, state_of(t));
}

/* what getopt() is with _POSIX_C_SOURCE and without _GNU_SOURCE */
int __wrap___posix_getopt(int argc, char *const argv[], const char *optstring);
int __wrap___posix_getopt(int argc, char *const argv[], const char *optstring)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getopt(argc, argv, optstring);
    return posix_getopt(argc, mutable_argv(argv), optstring, NULL, NULL, false, true, state_of(t));
}

int __wrap_getopt_long(int argc, char *const argv[], const char *optstring,
                       const struct option *longopts, int *longind);
int __wrap_getopt_long(int argc, char *const argv[], const char *optstring,
                       const struct option *longopts, int *longind)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getopt_long(argc, argv, optstring, longopts, longind);
    return posix_getopt(argc, mutable_argv(argv), optstring, longopts, longind, false, false,
                        state_of(t));
}

int __wrap_getopt_long_only(int argc, char *const argv[], const char *optstring,
                            const struct option *longopts, int *longind);
int __wrap_getopt_long_only(int argc, char *const argv[], const char *optstring,
                            const struct option *longopts, int *longind)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getopt_long_only(argc, argv, optstring, longopts, longind);
    return posix_getopt(argc, mutable_argv(argv), optstring, longopts, longind, true, false,
                        state_of(t));
}
