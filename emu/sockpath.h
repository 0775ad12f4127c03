/* The daemon's socket path (sockpath.c), shared by rnicsimd and the
 * client library. */
#ifndef RNICSIM_EMU_SOCKPATH_H
#define RNICSIM_EMU_SOCKPATH_H

/* $RNICSIM_SOCKET, else $XDG_RUNTIME_DIR/rnicsim/rnicsimd.sock, else
 * /tmp/rnicsim-<uid>/rnicsimd.sock (malloc'd; NULL when out of memory). */
char *emu_socket_path(void);

#endif
