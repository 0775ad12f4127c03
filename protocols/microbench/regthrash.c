/* regthrash: register / deregister (or re-register) a memory region in a
 * loop and report what the calls cost.
 *
 *   regthrash [--bytes=B] [--count=N] [--duration=US] [--mode=reg|rereg]
 *             [--gap=NS] [--name=TABLE] [--no-touch] [--copies=K]
 *
 * --no-touch reserves the buffers without touching them (mmap
 * MAP_NORESERVE), so a registration of hundreds of GiB can be timed; the
 * buffers must then carry no traffic.
 * --count=0 does nothing (a scenario switches the load off that way).
 * --mode=reg   each iteration ibv_reg_mr + ibv_dereg_mr of a B-byte buffer;
 *              with --copies=K it registers the buffer K times (K MRs) and
 *              then deregisters them: a program that registers one buffer
 *              with each of K RNICs in turn (Mooncake's transfer engine
 *              does, serially below 4 GiB).  A simulated host has one
 *              RNIC; its K registrations cost what K RNICs' would, each
 *              pinning the pages and writing its own translations, one
 *              after the other.  reg_us / dereg_us are for all K.
 * --mode=rereg one MR; each iteration ibv_rereg_mr moves its translation
 *              between two B-byte buffers (IBV_REREG_MR_CHANGE_TRANSLATION)
 * The loop runs N iterations, or for US microseconds when --duration is
 * given, with --gap ns of other work between iterations.  Results: one row
 * of table TABLE (default "regthrash"): iterations, bytes, reg_us /
 * dereg_us / rereg_us (mean per call).
 *
 * On a host that also serves RDMA traffic this is the registration-thrash
 * load of Husky (NSDI'23): every registration writes translations through
 * the NIC's caches and every deregistration invalidates cached ones, so
 * another flow's translations are evicted (docs/nic.md "Memory
 * registration"; scenarios/microbench/regthrash.yaml). */
#include "protocols/microbench/regthrash.h"

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "protocols/common/rc_conn.h"
#include "rnicsim/host.h"

#define RT_MAX_COPIES 64 /* registrations of one buffer per iteration */

struct rt_opts {
    uint64_t bytes, count, duration_us, gap_ns, copies;
    bool rereg, no_touch;
    const char *name;
};

static int rt_usage(const char *prog, const char *bad)
{
    if (bad)
        fprintf(stderr, "%s: bad option '%s'\n", prog, bad);
    printf("usage: %s [--bytes=B] [--count=N] [--duration=US] [--mode=reg|rereg] [--gap=NS] "
           "[--name=TABLE] [--no-touch] [--copies=K]\n",
           prog);
    return bad ? 2 : 0;
}

static int rt_parse(int argc, char **argv, struct rt_opts *o)
{
    *o = (struct rt_opts){.bytes = 4096, .count = 100, .copies = 1, .name = "regthrash"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help"))
            return rt_usage(argv[0], NULL) - 1;
        if (!strncmp(a, "--bytes=", 8) && rc_conn_parse_size(a + 8, &o->bytes) && o->bytes)
            continue;
        if (!strncmp(a, "--count=", 8) && rc_conn_parse_uint(a + 8, 0, 100000000, &o->count))
            continue;
        if (!strncmp(a, "--duration=", 11) &&
            rc_conn_parse_uint(a + 11, 1, 1000000000, &o->duration_us))
            continue;
        if (!strncmp(a, "--gap=", 6) && rc_conn_parse_uint(a + 6, 0, 1000000000, &o->gap_ns))
            continue;
        if (!strncmp(a, "--copies=", 9) && rc_conn_parse_uint(a + 9, 1, RT_MAX_COPIES, &o->copies))
            continue;
        if (!strcmp(a, "--mode=reg") || !strcmp(a, "--mode=rereg")) {
            o->rereg = !strcmp(a + 7, "rereg");
            continue;
        }
        if (!strcmp(a, "--no-touch")) {
            o->no_touch = true;
            continue;
        }
        if (!strncmp(a, "--name=", 7) && a[7]) {
            o->name = a + 7;
            continue;
        }
        return rt_usage(argv[0], a);
    }
    return 0;
}

int regthrash_main(int argc, char **argv)
{
    struct rt_opts o;
    int rc = rt_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct ibv_device **devs = ibv_get_device_list(NULL);
    if (!devs || !devs[0]) {
        printf("no RDMA device found\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(devs[0]);
    ibv_free_device_list(devs);
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    uint8_t *buf[2];
    size_t alloc = (size_t)((o.bytes + 4095) / 4096 * 4096);
    for (int i = 0; i < 2; i++) {
        if (o.no_touch) {
            void *m = mmap(NULL, alloc, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            buf[i] = m == MAP_FAILED ? NULL : m;
        } else {
            buf[i] = aligned_alloc(4096, alloc);
            if (buf[i])
                memset(buf[i], 0, o.bytes);
        }
    }
    if (!pd || !buf[0] || !buf[1]) {
        fprintf(stderr, "%s: setup failed\n", argv[0]);
        return 1;
    }
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    uint64_t it = 0, t_reg = 0, t_dereg = 0, t_rereg = 0;
    struct ibv_mr *keep = o.rereg ? ibv_reg_mr(pd, buf[0], o.bytes, access) : NULL;
    if (o.rereg && !keep) {
        perror("ibv_reg_mr");
        return 1;
    }
    uint64_t start = host_now_ns();
    for (;; it++) {
        if (o.duration_us ? host_now_ns() - start >= o.duration_us * 1000 : it >= o.count)
            break;
        uint64_t t0 = host_now_ns();
        if (o.rereg) {
            int e = ibv_rereg_mr(keep, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf[(it + 1) % 2],
                                 o.bytes, 0);
            if (e) {
                perror("ibv_rereg_mr");
                return 1;
            }
            t_rereg += host_now_ns() - t0;
        } else {
            struct ibv_mr *mr[RT_MAX_COPIES];
            for (uint64_t k = 0; k < o.copies; k++) {
                mr[k] = ibv_reg_mr(pd, buf[it % 2], o.bytes, access);
                if (!mr[k]) {
                    perror("ibv_reg_mr");
                    return 1;
                }
            }
            uint64_t t1 = host_now_ns();
            for (uint64_t k = 0; k < o.copies; k++)
                if (ibv_dereg_mr(mr[k])) {
                    perror("ibv_dereg_mr");
                    return 1;
                }
            t_reg += t1 - t0;
            t_dereg += host_now_ns() - t1;
        }
        if (o.gap_ns)
            host_compute(o.gap_ns);
    }
    double n = it ? (double)it : 1.0;
    struct host_kv kv[] = {{"iterations", (double)it},
                           {"bytes", (double)o.bytes},
                           {"reg_us", (double)t_reg / n / 1000.0},
                           {"dereg_us", (double)t_dereg / n / 1000.0},
                           {"rereg_us", (double)t_rereg / n / 1000.0},
                           {"copies", (double)o.copies}};
    host_report(o.name, kv, sizeof(kv) / sizeof(kv[0]));
    printf("%s: %llu %s of %llu B: reg %.2f us, dereg %.2f us, rereg %.2f us\n", argv[0],
           (unsigned long long)it, o.rereg ? "re-registrations" : "registrations",
           (unsigned long long)o.bytes, (double)t_reg / n / 1000.0, (double)t_dereg / n / 1000.0,
           (double)t_rereg / n / 1000.0);
    if (keep)
        ibv_dereg_mr(keep);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    for (int i = 0; i < 2; i++) {
        if (o.no_touch)
            munmap(buf[i], alloc);
        else
            free(buf[i]);
    }
    return 0;
}
