/* main() of the real-hardware build of a protocol driver: hands argv to the
 * out-of-band layer (role, server host) and runs the driver unchanged.
 * Built once per driver with RNICSIM_REAL_PROGRAM=<name> (CMakeLists.txt,
 * RNICSIM_REAL_VERBS=ON); the entry point is <name>_main. */
#include <stdio.h>
#include <string.h>

#include "host_posix.h"

#ifndef RNICSIM_REAL_PROGRAM
#define RNICSIM_REAL_PROGRAM perftest
#endif
#define REAL_CAT2(a, b) a##b
#define REAL_CAT(a, b) REAL_CAT2(a, b)
#define REAL_ENTRY REAL_CAT(RNICSIM_REAL_PROGRAM, _main)

/* Every driver's entry point has this signature (protocols/<family>/<name>.h). */
int REAL_ENTRY(int argc, char **argv);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            int rc = REAL_ENTRY(argc, argv);
            printf("out of band: the --server listens on TCP $RNICSIM_OOB_PORT (default 18515);\n"
                   "the --client connects to $RNICSIM_OOB_SERVER (host[:port]) or to the\n"
                   "server-host argument (default localhost).\n");
            return rc;
        }
    }
    host_posix_set_args(argc, argv);
    return REAL_ENTRY(argc, argv);
}
