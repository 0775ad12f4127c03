/* Where the rnicsim command finds the files it ships with (hardware
 * profiles, plot scripts), wherever it was built or installed.
 *
 * The data directories, in the order they are tried:
 *   1. $RNICSIM_DATA_DIR (one directory)
 *   2. <directory of the executable>/../share/rnicsim   an installed copy:
 *      `cmake --install` or the Debian package puts the command in
 *      PREFIX/bin and its data in PREFIX/share/rnicsim
 *   3. the source tree (RNICSIM_SOURCE_DIR, compiled in by CMake)  a build
 *      anywhere, in the source tree or out of it (`cmake -B /elsewhere`)
 *   4. <directory of the executable>/..   a build directory inside the
 *      source tree whose source has moved since it was configured
 * Each holds the files at the same relative paths as the source tree:
 * profiles/<name>.yaml, tools/plot_*.py and validation/points.yaml.  An
 * installed copy comes first so that a package never reads a source tree
 * that happens to exist at the path it was built from. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/rnicsim/rnicsim.h"

/* From the installed bin/ to the installed data: CMake computes it from
 * the install directories (GNUInstallDirs). */
#ifndef RNICSIM_BIN_TO_DATA
#define RNICSIM_BIN_TO_DATA "../share/rnicsim"
#endif

/* The executable's directory, or NULL (no /proc). */
static char *exe_dir(void)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (k <= 0)
        return NULL;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    return xstrdup_or_die(exe);
}

size_t rnicsim_data_dirs(char *dirs[RNICSIM_MAX_DATA_DIRS])
{
    size_t n = 0;
    const char *env = getenv("RNICSIM_DATA_DIR");
    if (env && *env)
        dirs[n++] = xstrdup_or_die(env);
    char *ed = exe_dir();
    if (ed)
        dirs[n++] = xasprintf("%s/%s", ed, RNICSIM_BIN_TO_DATA);
#ifdef RNICSIM_SOURCE_DIR
    dirs[n++] = xstrdup_or_die(RNICSIM_SOURCE_DIR);
#endif
    if (ed)
        dirs[n++] = xasprintf("%s/..", ed);
    free(ed);
    return n;
}

char *rnicsim_find_data(const char *rel)
{
    char *dirs[RNICSIM_MAX_DATA_DIRS];
    size_t n = rnicsim_data_dirs(dirs);
    char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!found) {
            char *p = xasprintf("%s/%s", dirs[i], rel);
            if (access(p, R_OK) == 0)
                found = p;
            else
                free(p);
        }
        free(dirs[i]);
    }
    return found;
}
