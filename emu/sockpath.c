/* Where the daemon listens and the client library connects (emu/proto.h):
 * $RNICSIM_SOCKET, else $XDG_RUNTIME_DIR/rnicsim/rnicsimd.sock, else
 * /tmp/rnicsim-<uid>/rnicsimd.sock.  The directory is the user's own,
 * mode 0700 (the daemon creates it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/proto.h"
#include "emu/sockpath.h"

char *emu_socket_path(void)
{
    const char *env = getenv(EMU_ENV_SOCKET);
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    char buf[512];
    if (env && *env)
        snprintf(buf, sizeof(buf), "%s", env);
    else if (xdg && *xdg == '/')
        snprintf(buf, sizeof(buf), "%s/rnicsim/%s", xdg, EMU_SOCKET_NAME);
    else
        snprintf(buf, sizeof(buf), "/tmp/rnicsim-%u/%s", (unsigned)geteuid(), EMU_SOCKET_NAME);
    return strdup(buf);
}
