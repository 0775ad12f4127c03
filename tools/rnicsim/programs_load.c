/* Finding the code of a program named in a scenario: a built-in driver
 * (protocols/programs.c, looked up with program_find) or a user's shared
 * object whose exported `main` is the entry point.  The object resolves
 * ibv_* and host_* against the rnicsim executable (exported symbols).
 *
 * Every instance of the same object shares one loaded copy (dlopen
 * reference counting), so such programs must not keep mutable globals
 * (docs/user-programs.md). */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocols/programs.h"
#include "tools/rnicsim/rnicsim.h"

static bool is_shared_object_name(const char *name)
{
    size_t n = strlen(name);
    return strchr(name, '/') || (n > 3 && strcmp(name + n - 3, ".so") == 0);
}

int program_resolve(const char *name, const char *scenario_file, struct cfg_node *at,
                    struct scn_program *p, void **handle, struct cfg_error *err)
{
    *handle = NULL;
    if (!is_shared_object_name(name)) {
        const struct program_def *d = program_find(name);
        if (d) {
            p->main = d->main;
            return 0;
        }
        const char *names[64];
        size_t n = 0;
        char list[512] = "";
        size_t off = 0;
        for (const struct program_def *q = protocol_programs; q->name && n < 64; q++) {
            names[n++] = q->name;
            int k = snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "", q->name);
            if (k > 0 && (size_t)k < sizeof(list) - off)
                off += (size_t)k;
        }
        const char *sug = suggest_word(name, names, n);
        char hint[128] = "";
        if (sug)
            snprintf(hint, sizeof(hint), " (did you mean '%s'?)", sug);
        return cfg_errorf(err, at,
                          "unknown program '%s'%s: built-in programs are %s; a shared object is "
                          "given as a path containing '/' or ending in .so",
                          name, hint, list);
    }

    /* A shared object, relative to the scenario file's directory. */
    char *path;
    char *tmp = xstrdup_or_die(scenario_file ? scenario_file : ".");
    const char *dir = dirname(tmp);
    if (name[0] == '/' || strcmp(dir, ".") == 0) {
        path = xstrdup_or_die(name);
    } else {
        path = xasprintf("%s/%s", dir, name);
    }
    free(tmp);
    if (access(path, R_OK) != 0) {
        cfg_errorf(err, at, "program '%s': shared object '%s' not found", name, path);
        free(path);
        return -1;
    }
#ifdef RNICSIM_FUZZ
    /* The fuzz targets (tools/fuzz) never run code from the disk: any
     * shared object there could be named. */
    cfg_errorf(err, at, "program '%s': shared objects are not loaded by the fuzz targets", name);
    free(path);
    return -1;
#endif
    /* dlopen searches the library path for names without '/'. */
    char *open_path = path;
    char *dotted = NULL;
    if (!strchr(path, '/')) {
        dotted = xasprintf("./%s", path);
        open_path = dotted;
    }
    void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    free(dotted);
    if (!h) {
        const char *why = dlerror();
        cfg_errorf(err, at, "program '%s': cannot load '%s': %s", name, path,
                   why ? why : "unknown error");
        free(path);
        return -1;
    }
    /* dlsym on a handle searches that object and its dependencies, not
     * the executable, so this finds the object's own main. */
    void *sym = dlsym(h, "main");
    if (!sym) {
        cfg_errorf(err, at, "program '%s': '%s' has no exported function 'main'", name, path);
        dlclose(h);
        free(path);
        return -1;
    }
    program_main_fn fn;
    memcpy(&fn, &sym, sizeof(fn)); /* object pointer -> function pointer (POSIX) */
    p->main = fn;
    p->so_path = path;
    *handle = h;
    return 0;
}

void programs_list(FILE *out)
{
    for (const struct program_def *q = protocol_programs; q->name; q++)
        fprintf(out, "  %-12s %s\n", q->name, q->summary ? q->summary : "");
}
