/* Finding the code of a program named in a scenario: a built-in driver
 * (protocols/programs.c, looked up with program_find) or a user's shared
 * object whose exported `main` is the entry point.  The object resolves
 * ibv_* and host_* (and the __wrap_ functions of rnicsim-cc, posix/)
 * against the rnicsim executable (exported symbols).
 *
 * Every instance of a shared object gets its own copy of it, globals
 * included, as a process would: the first instance loads the file, each
 * further one loads a private copy of it from a memfd (the dynamic loader
 * shares an object only if it is the same file). */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocols/programs.h"
#include "tools/rnicsim/rnicsim.h"

/* A memfd holding a copy of the file at `path`, or -1 with errno. */
static int private_copy(const char *path)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    struct stat st;
    const char *base = strrchr(path, '/');
    int out = fstat(in, &st) == 0 ? memfd_create(base ? base + 1 : path, MFD_CLOEXEC) : -1;
    if (out < 0) {
        int e = errno;
        close(in);
        errno = e;
        return -1;
    }
    off_t off = 0;
    while (off < st.st_size) {
        ssize_t n = sendfile(out, in, &off, (size_t)(st.st_size - off));
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(in);
            close(out);
            errno = e;
            return -1;
        }
    }
    close(in);
    return out;
}

struct extent_query {
    uintptr_t base;
    size_t size;
};

static int extent_cb(struct dl_phdr_info *info, size_t len, void *arg)
{
    (void)len;
    struct extent_query *q = arg;
    if (info->dlpi_addr != q->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && ph->p_vaddr + ph->p_memsz > q->size)
            q->size = ph->p_vaddr + ph->p_memsz;
    }
    return 1;
}

/* The load address of a dlopen()ed object and the extent of its
 * segments (for naming a crash's frames; 0/0 if unknown). */
static void object_extent(void *h, uintptr_t *base, size_t *size)
{
    struct link_map *lm = NULL;
    *base = 0;
    *size = 0;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return;
    struct extent_query q = {.base = lm->l_addr};
    dl_iterate_phdr(extent_cb, &q);
    *base = q.base;
    *size = q.size;
}

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
    void *h = NULL;
    void *loaded = dlopen(open_path, RTLD_NOW | RTLD_NOLOAD);
    if (loaded) {
        /* another instance has it: load a private copy */
        dlclose(loaded);
        p->so_fd = private_copy(open_path);
        if (p->so_fd < 0) {
            cfg_errorf(err, at, "program '%s': cannot copy '%s' for a second instance: %s", name,
                       path, strerror(errno));
            free(dotted);
            free(path);
            return -1;
        }
        char fdpath[64];
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", p->so_fd);
        h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
    } else {
        h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    }
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
    object_extent(h, &p->so_base, &p->so_size);
    *handle = h;
    return 0;
}

void programs_list(FILE *out)
{
    for (const struct program_def *q = protocol_programs; q->name; q++)
        fprintf(out, "  %-12s %s\n", q->name, q->summary ? q->summary : "");
}
