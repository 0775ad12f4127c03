/* Small helpers of the rnicsim command: allocation that exits on failure
 * (the command cannot continue without memory) and did-you-mean
 * suggestions for names the user misspelt (profiles, parameters,
 * programs, hosts). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tools/rnicsim/rnicsim.h"

extern char **environ;

char *xstrdup_or_die(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "rnicsim: out of memory\n");
        exit(70);
    }
    return d;
}

void *xcalloc_or_die(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "rnicsim: out of memory\n");
        exit(70);
    }
    return p;
}

void *xrealloc_or_die(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "rnicsim: out of memory\n");
        exit(70);
    }
    return q;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0 || !s) {
        fprintf(stderr, "rnicsim: out of memory\n");
        exit(70);
    }
    return s;
}

#define SUGGEST_MAX 80

static char lower_ascii(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Levenshtein distance with adjacent swaps, ignoring case. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX || lb > SUGGEST_MAX)
        return (size_t)-1;
    static const size_t W = SUGGEST_MAX + 1;
    size_t d[(SUGGEST_MAX + 1) * (SUGGEST_MAX + 1)];
    for (size_t i = 0; i <= la; i++)
        d[i * W] = i;
    for (size_t j = 0; j <= lb; j++)
        d[j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower_ascii(a[i - 1]) == lower_ascii(b[j - 1]) ? 0 : 1;
            size_t best = d[(i - 1) * W + j] + 1;
            if (d[i * W + j - 1] + 1 < best)
                best = d[i * W + j - 1] + 1;
            if (d[(i - 1) * W + j - 1] + cost < best)
                best = d[(i - 1) * W + j - 1] + cost;
            if (i > 1 && j > 1 && lower_ascii(a[i - 1]) == lower_ascii(b[j - 2]) &&
                lower_ascii(a[i - 2]) == lower_ascii(b[j - 1]) && d[(i - 2) * W + j - 2] + 1 < best)
                best = d[(i - 2) * W + j - 2] + 1;
            d[i * W + j] = best;
        }
    }
    return d[la * W + lb];
}

const char *suggest_word(const char *word, const char *const *cands, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t lw = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], word) == 0)
            continue;
        size_t lc = strlen(cands[i]);
        size_t limit = (lw > lc ? lw : lc) / 3;
        if (limit < 1)
            limit = 1;
        size_t d = edit_distance(word, cands[i]);
        if (d <= limit && d < best_d) {
            best = cands[i];
            best_d = d;
        }
    }
    return best;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return n == 2 && name[0] == '-' && name[1] != '-' ? a + n : NULL; /* "-j4" */
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

void shell_word(FILE *out, const char *w)
{
    bool safe = *w != '\0';
    for (const char *p = w; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%", *p))
            safe = false;
    if (safe) {
        fputs(w, out);
        return;
    }
    fputc('\'', out);
    for (const char *p = w; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", out);
        else
            fputc(*p, out);
    }
    fputc('\'', out);
}

/* ---------------------------------------------------------------- child processes (sweep,
 * validate) */

/* Start `exe argv...` with stdin from /dev/null and stdout + stderr to
 * `log` (NULL: inherited).  Returns the pid or -1 with errno. */
pid_t rn_spawn(const char *exe, const char *const *args, const char *log)
{
    /* posix_spawn takes char *const argv[]: give it copies. */
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = xcalloc_or_die(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        argv[i] = xstrdup_or_die(args[i]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (log) {
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int e = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    free(argv);
    if (e) {
        errno = e;
        return -1;
    }
    return pid;
}

int rn_wait_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 255;
}
