/* A run's simulated OS: creation and teardown (posix/posix.h). */
#include <stdlib.h>
#include <string.h>

#include "posix/posix_priv.h"

void posix_prog_free(struct posix_prog *p); /* prog.c */

struct posix_world *posix_world_create(struct sim *sim, struct host *hosts, size_t nhosts)
{
    struct posix_world *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->sim = sim;
    w->hosts = hosts;
    w->nhosts = nhosts;
    w->next_port = calloc(nhosts ? nhosts : 1, sizeof(*w->next_port));
    w->mgmt_free_ps = calloc(nhosts ? nhosts : 1, sizeof(*w->mgmt_free_ps));
    if (!w->next_port || !w->mgmt_free_ps) {
        free(w->next_port);
        free(w->mgmt_free_ps);
        free(w);
        return NULL;
    }
    for (size_t i = 0; i < nhosts; i++)
        w->next_port[i] = 32768;
    w->real_out = stdout;
    w->real_err = stderr;
    w->tsc_khz = posix_read_tsc_khz();
    w->watchdog_s = 10.0;
    const char *env = getenv("RNICSIM_WATCHDOG");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (!*end && v >= 0)
            w->watchdog_s = v;
    }
    return w;
}

void posix_world_set_stdout(struct posix_world *w, FILE *out)
{
    fflush(w->real_out);
    w->real_out = out;
}

void posix_world_set_watchdog(struct posix_world *w, double seconds)
{
    w->watchdog_s = seconds;
}

void posix_world_free(struct posix_world *w)
{
    if (!w)
        return;
    posix_guard_free(w);
    posix_files_free(w);
    tcp_world_free(w);
    posix_sync_free(w);
    while (w->progs) {
        struct posix_prog *p = w->progs;
        w->progs = p->next;
        posix_prog_free(p);
    }
    free(w->next_port);
    free(w->mgmt_free_ps);
    free(w);
}
