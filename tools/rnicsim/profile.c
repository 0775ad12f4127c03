/* Hardware profiles: profiles/<name>.yaml files holding a named set of
 * hardware parameters (see params.c), found along a search path:
 *   1. --profiles DIR
 *   2. $RNICSIM_PROFILES (a directory; several separated by ':')
 *   3. <directory of the scenario file>/profiles, then its parent's
 *      profiles/ (a project keeping scenarios/ beside profiles/)
 *   4. profiles/ in each data directory (datadir.c): the installed
 *      share/rnicsim, the source tree, the build's parent
 * A profile value containing '/' or ending in .yaml is a path instead,
 * relative to the scenario file's directory.
 *
 * File schema (strict):
 *   name: cx5-100g          # required string
 *   description: "..."      # optional
 *   params:                 # required map: dotted key -> value with unit
 *     nic.tx_pkt_proc: 5ns */
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/rnicsim/rnicsim.h"

#define MAX_DIRS 16

struct dir_list {
    char *dirs[MAX_DIRS];
    size_t n;
};

static void dirs_add(struct dir_list *l, const char *d)
{
    if (!d || !d[0] || l->n == MAX_DIRS)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->dirs[i], d) == 0)
            return;
    l->dirs[l->n++] = xstrdup_or_die(d);
}

static void dirs_free(struct dir_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->dirs[i]);
    l->n = 0;
}

/* Directory part of `path` ("." when it has none). */
static char *dir_of(const char *path)
{
    char *tmp = xstrdup_or_die(path);
    char *d = xstrdup_or_die(dirname(tmp));
    free(tmp);
    return d;
}

static void search_dirs(const struct profile_search *s, struct dir_list *l)
{
    char buf[PATH_MAX + 32];
    dirs_add(l, s->cli_dir);
    const char *env = getenv("RNICSIM_PROFILES");
    if (env) {
        char *copy = xstrdup_or_die(env), *save = NULL;
        for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            dirs_add(l, tok);
        free(copy);
    }
    if (s->scenario_file) {
        char *d = dir_of(s->scenario_file);
        snprintf(buf, sizeof(buf), "%s/profiles", d);
        dirs_add(l, buf);
        snprintf(buf, sizeof(buf), "%s/../profiles", d);
        dirs_add(l, buf);
        free(d);
    }
    char *data[RNICSIM_MAX_DATA_DIRS];
    size_t nd = rnicsim_data_dirs(data);
    for (size_t i = 0; i < nd; i++) {
        snprintf(buf, sizeof(buf), "%s/profiles", data[i]);
        dirs_add(l, buf);
        free(data[i]);
    }
}

void profile_print_dirs(const struct profile_search *s, FILE *out)
{
    struct dir_list l = {0};
    search_dirs(s, &l);
    for (size_t i = 0; i < l.n; i++)
        fprintf(out, "  %s%s\n", l.dirs[i], access(l.dirs[i], R_OK) == 0 ? "" : "  (missing)");
    dirs_free(&l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the profiles in the search path, sorted (for suggestions). */
static size_t known_profiles(const struct dir_list *l, char ***out)
{
    char **names = NULL;
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        DIR *d = opendir(l->dirs[i]);
        if (!d)
            continue;
        for (struct dirent *e; (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0) {
                names = xrealloc_or_die(names, (n + 1) * sizeof(*names));
                names[n] = xstrdup_or_die(e->d_name);
                names[n][len - 5] = '\0';
                n++;
            }
        }
        closedir(d);
    }
    if (n)
        qsort(names, n, sizeof(*names), cmp_str);
    *out = names;
    return n;
}

/* `at`: the scenario's profile: value, where a file that cannot be read
 * at all (a directory, no permission) is reported; errors inside the file
 * are positioned in it. */
static int read_profile(const char *path, struct cfg_node *at, struct hw_profile *hw,
                        struct cfg_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return cfg_errorf(err, at, "profile '%s' is not a regular file", path);
    struct cfg_doc *doc = cfg_load_file(path, err);
    if (!doc) {
        size_t n = strlen(path);
        if (at && strncmp(err->msg, path, n) == 0 && strncmp(err->msg + n, ": cannot ", 9) == 0) {
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg + n + 2);
            return cfg_errorf(err, at, "profile '%s': %s", path, why);
        }
        return -1;
    }
    const char *name = NULL, *desc = NULL;
    struct cfg_node *name_node = NULL, *params = NULL;
    int rc = -1;
    if (cfg_req_node(doc->root, "name", CFG_SCALAR, &name_node, err) ||
        cfg_node_str(name_node, &name, err) ||
        cfg_get_str(doc->root, "description", NULL, &desc, err) ||
        cfg_req_node(doc->root, "params", CFG_MAP, &params, err) ||
        params_apply_map(hw, params, "params", err) || params_check(hw, params, params, err) ||
        cfg_check_unused(doc->root, "", err))
        goto out;
    rc = 0;
out:
    cfg_free(doc);
    return rc;
}

int profile_load(const char *name, const struct profile_search *s, struct cfg_node *at,
                 struct hw_profile *hw, char **path, struct cfg_error *err)
{
    *path = NULL;
    size_t len = strlen(name);
    if (strchr(name, '/') || (len > 5 && strcmp(name + len - 5, ".yaml") == 0)) {
        char *p;
        char *d = dir_of(s->scenario_file ? s->scenario_file : ".");
        if (name[0] == '/' || strcmp(d, ".") == 0) {
            p = xstrdup_or_die(name);
        } else {
            p = xasprintf("%s/%s", d, name);
        }
        free(d);
        if (access(p, R_OK) != 0) {
            cfg_errorf(err, at, "profile file '%s' not found", p);
            free(p);
            return -1;
        }
        *path = p;
        return read_profile(p, at, hw, err);
    }

    struct dir_list l = {0};
    search_dirs(s, &l);
    for (size_t i = 0; i < l.n; i++) {
        char *p = xasprintf("%s/%s.yaml", l.dirs[i], name);
        if (access(p, R_OK) == 0) {
            dirs_free(&l);
            *path = p;
            return read_profile(p, at, hw, err);
        }
        free(p);
    }
    char **names = NULL;
    size_t n = known_profiles(&l, &names);
    const char *sug = suggest_word(name, (const char *const *)names, n);
    char searched[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < l.n && off < sizeof(searched); i++) {
        int k = snprintf(searched + off, sizeof(searched) - off, "%s%s", i ? ", " : "", l.dirs[i]);
        if (k > 0)
            off += (size_t)k;
    }
    if (sug)
        cfg_errorf(err, at, "unknown profile '%s' (did you mean '%s'?); searched %s", name, sug,
                   searched);
    else
        cfg_errorf(err, at, "unknown profile '%s'; searched %s (set --profiles DIR)", name,
                   searched);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    dirs_free(&l);
    return -1;
}
