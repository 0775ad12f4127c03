/* hostbench: the host model's effects end to end (docs/host.md).
 *
 *   hostbench --test=threads [--cpus=A,B,...] [--threads=N] [--work=NS] [--iters=N]
 *     N threads (as many as --cpus lists, each pinned to its CPU; else N
 *     placed by the OS) each run `iters` computations of `work` ns.
 *     Table "hostbench_threads": threads, iters, work_ns, elapsed_us (from
 *     the threads' start to the end of the slowest), per_iter_ns (that /
 *     iters).  Two threads on the two hyper-threads of a core, on two
 *     cores, on one CPU.
 *
 *   hostbench --server | --client [--size=B] [--offset=O] [--slots=R]
 *             [--iters=N] [--warmup=W] [--layout=separate|packed]
 *             [--buf-socket=S] [--cpu=C]
 *     A write-twice ping-pong over one RC QP.  The client WRITEs message i
 *     (B bytes, O bytes into its 64 B-aligned slot i % R of the server's
 *     ring, its last 8 bytes the sequence number i + 1), then WRITEs the
 *     tail counter i + 1 into the server's control line (both in one post,
 *     executed in order).  The server polls the tail, reads the message
 *     (host_touch: every cache line of it), checks its sequence number,
 *     advances its head pointer (host_touch_write) - at offset 0 of the
 *     control line, next to the tail the client writes (packed: false
 *     sharing), or in a line of its own (separate) - and WRITEs the head
 *     back to the client as the acknowledgement.  Both buffers come from
 *     host_alloc on socket S (default: the NIC's); --cpu pins the calling
 *     side.
 *     Table "hostbench_server": size, offset, packed, msgs, read_ns (mean
 *     CPU time of reading the message and advancing the head), lines (the
 *     lines one message spans).  Table "hostbench_rtt" (client): size,
 *     iters, t_avg_us, t_p50_us, t_p99_us, t_p999_us, t_max_us. */
#include "protocols/hostbench/hostbench.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "rnicsim/host.h"

#define HB_MAX_THREADS 64
#define HB_CTRL_BYTES 256 /* the server's control lines: head @0 or @128, tail @8 */
#define HB_TAIL_OFF 8
#define HB_HEAD_SEPARATE_OFF 128

struct hb_opts {
    enum rc_conn_role role;
    bool threads_test, packed;
    uint64_t size, offset, slots, iters, warmup, work_ns, nthreads;
    int cpus[HB_MAX_THREADS];
    uint64_t ncpus;
    int buf_socket, cpu;
};

static int hb_usage(const char *prog, const char *bad)
{
    if (bad)
        fprintf(stderr, "%s: bad option '%s'\n", prog, bad);
    printf("usage: %s --test=threads [--cpus=A,B,...] [--threads=N] [--work=NS] [--iters=N]\n"
           "       %s --server | --client [--size=B] [--offset=O] [--slots=R] [--iters=N]\n"
           "          [--warmup=W] [--layout=separate|packed] [--buf-socket=S] [--cpu=C]\n",
           prog, prog);
    return bad ? 2 : 0;
}

static bool hb_parse_cpus(const char *s, struct hb_opts *o)
{
    o->ncpus = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 4095 || o->ncpus == HB_MAX_THREADS)
            return false;
        o->cpus[o->ncpus++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return false;
    }
    return o->ncpus > 0;
}

/* 0 ok, 1 --help, 2 bad option. */
static int hb_parse(int argc, char **argv, struct hb_opts *o)
{
    *o = (struct hb_opts){.size = 128,
                          .slots = 16,
                          .iters = 1000,
                          .warmup = 50,
                          .work_ns = 1000,
                          .nthreads = 2,
                          .buf_socket = -1,
                          .cpu = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (!strcmp(a, "--help"))
            return hb_usage(argv[0], NULL) + 1;
        if (!strcmp(a, "--server"))
            o->role = RC_CONN_ROLE_SERVER;
        else if (!strcmp(a, "--client"))
            o->role = RC_CONN_ROLE_CLIENT;
        else if (!strcmp(a, "--test=threads"))
            o->threads_test = true;
        else if (!strcmp(a, "--test=pingpong"))
            o->threads_test = false;
        else if (!strcmp(a, "--layout=packed") || !strcmp(a, "--layout=separate"))
            o->packed = !strcmp(a + 9, "packed");
        else if (!strncmp(a, "--size=", 7) && rc_conn_parse_size(a + 7, &o->size) && o->size >= 8 &&
                 o->size <= (1u << 20))
            ;
        else if (!strncmp(a, "--offset=", 9) && rc_conn_parse_uint(a + 9, 0, 4095, &o->offset))
            ;
        else if (!strncmp(a, "--slots=", 8) && rc_conn_parse_uint(a + 8, 1, 4096, &o->slots))
            ;
        else if (!strncmp(a, "--iters=", 8) && rc_conn_parse_uint(a + 8, 1, 100000000, &o->iters))
            ;
        else if (!strncmp(a, "--warmup=", 9) && rc_conn_parse_uint(a + 9, 0, 1000000, &o->warmup))
            ;
        else if (!strncmp(a, "--work=", 7) && rc_conn_parse_uint(a + 7, 1, 1000000000, &o->work_ns))
            ;
        else if (!strncmp(a, "--threads=", 10) &&
                 rc_conn_parse_uint(a + 10, 1, HB_MAX_THREADS, &o->nthreads))
            ;
        else if (!strncmp(a, "--cpus=", 7) && hb_parse_cpus(a + 7, o))
            o->nthreads = o->ncpus;
        else if (!strncmp(a, "--buf-socket=", 13) && rc_conn_parse_uint(a + 13, 0, 63, &v))
            o->buf_socket = (int)v;
        else if (!strncmp(a, "--cpu=", 6) && rc_conn_parse_uint(a + 6, 0, 4095, &v))
            o->cpu = (int)v;
        else if (a[0] == '-')
            return hb_usage(argv[0], a);
        /* a lone word: the server host on real hardware (host_posix.c) */
    }
    if (!o->threads_test && o->role == RC_CONN_ROLE_NONE)
        return hb_usage(argv[0], "(need --server, --client or --test=threads)");
    return 0;
}

/* ------------------------------------------------------------ threads */

struct hb_thread {
    const struct hb_opts *o;
    int cpu;             /* -1: where the OS put it */
    uint64_t t0_ns;      /* when the threads were started */
    uint64_t elapsed_ns; /* from t0_ns to its last computation */
    int failed;
};

static void hb_thread_fn(void *arg)
{
    struct hb_thread *t = arg;
    if (t->cpu >= 0 && host_pin_cpu(t->cpu)) {
        fprintf(stderr, "hostbench: host_pin_cpu(%d): %s\n", t->cpu, strerror(errno));
        t->failed = 1;
        return;
    }
    for (uint64_t i = 0; i < t->o->iters; i++)
        host_compute(t->o->work_ns);
    t->elapsed_ns = host_now_ns() - t->t0_ns;
}

static int hb_threads(const char *prog, const struct hb_opts *o)
{
    struct hb_thread th[HB_MAX_THREADS];
    int handle[HB_MAX_THREADS];
    uint64_t t0 = host_now_ns();
    for (uint64_t i = 0; i < o->nthreads; i++) {
        th[i] = (struct hb_thread){.o = o, .cpu = o->ncpus ? o->cpus[i] : -1, .t0_ns = t0};
        handle[i] = host_thread_start(hb_thread_fn, &th[i]);
        if (handle[i] < 0) {
            fprintf(stderr, "%s: host_thread_start: %s\n", prog, strerror(errno));
            return 1;
        }
    }
    uint64_t slowest = 0;
    int failed = 0;
    for (uint64_t i = 0; i < o->nthreads; i++) {
        host_thread_join(handle[i]);
        failed |= th[i].failed;
        slowest = th[i].elapsed_ns > slowest ? th[i].elapsed_ns : slowest;
    }
    if (failed)
        return 1;
    struct host_kv kv[] = {{"threads", (double)o->nthreads},
                           {"iters", (double)o->iters},
                           {"work_ns", (double)o->work_ns},
                           {"elapsed_us", (double)slowest / 1e3},
                           {"per_iter_ns", (double)slowest / (double)o->iters}};
    host_report("hostbench_threads", kv, sizeof(kv) / sizeof(kv[0]));
    printf("%s: %" PRIu64 " thread(s), %" PRIu64 " x %" PRIu64 " ns: %.1f ns per iteration\n", prog,
           o->nthreads, o->iters, o->work_ns, (double)slowest / (double)o->iters);
    return 0;
}

/* ------------------------------------------------------------ ping-pong */

struct hb {
    const char *prog;
    struct hb_opts o;
    struct rc_conn conn;
    size_t slot_bytes, buf_bytes;
};

/* A word the NIC writes, read afresh on every call (little-endian). */
static uint64_t hb_get64(const volatile uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int hb_post(struct hb *hb, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(hb->conn.qp, wr, &bad);
    if (err) {
        fprintf(stderr, "%s: ibv_post_send: %s\n", hb->prog, strerror(err));
        return 1;
    }
    struct ibv_wc wc;
    int n;
    while ((n = ibv_poll_cq(hb->conn.scq, 1, &wc)) == 0)
        ;
    if (n < 0 || wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: WRITE failed: %s\n", hb->prog,
                n < 0 ? "ibv_poll_cq" : ibv_wc_status_str(wc.status));
        return 1;
    }
    return 0;
}

static int hb_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p % at or below it. */
static double hb_pct_us(const uint64_t *s, uint64_t n, double p)
{
    uint64_t k = (uint64_t)((p / 100.0) * (double)n + 0.999999);
    return (double)s[(k ? k : 1) - 1] / 1e3;
}

static int hb_client(struct hb *hb)
{
    const struct hb_opts *o = &hb->o;
    uint8_t *buf = hb->conn.buf, *msg = buf + 64;
    volatile uint8_t *ack = buf;
    uint64_t total = o->warmup + o->iters, *samples = calloc(o->iters, sizeof(uint64_t));
    if (!samples)
        return 1;
    struct ibv_sge msg_sge = {.length = (uint32_t)o->size, .lkey = hb->conn.mr->lkey};
    struct ibv_sge tail_sge = {
        .addr = (uint64_t)(uintptr_t)(buf + 8), .length = 8, .lkey = hb->conn.mr->lkey};
    struct ibv_send_wr tail_wr = {.sg_list = &tail_sge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
    struct ibv_send_wr msg_wr = {
        .next = &tail_wr, .sg_list = &msg_sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
    tail_wr.wr.rdma.rkey = msg_wr.wr.rdma.rkey = hb->conn.peer.rkey;
    tail_wr.wr.rdma.remote_addr = hb->conn.peer.addr + HB_TAIL_OFF;
    int rc = 0;
    for (uint64_t i = 0; i < total && !rc; i++) {
        uint64_t seq = i + 1, slot = i % o->slots;
        uint64_t t0 = host_now_ns();
        /* the message: pattern, sequence number last; then the tail */
        memset(msg, (int)(seq & 0xff), (size_t)o->size - 8);
        rc_conn_put_le(msg + o->size - 8, seq, 8);
        host_touch_write(msg, (size_t)o->size);
        rc_conn_put_le(buf + 8, seq, 8);
        msg_sge.addr = (uint64_t)(uintptr_t)msg;
        msg_wr.wr.rdma.remote_addr =
            hb->conn.peer.addr + HB_CTRL_BYTES + slot * hb->slot_bytes + o->offset;
        if (hb_post(hb, &msg_wr)) {
            rc = 1;
            break;
        }
        while (hb_get64(ack) != seq)
            host_relax();
        if (i >= o->warmup)
            samples[i - o->warmup] = host_now_ns() - t0;
    }
    if (!rc) {
        double sum = 0;
        for (uint64_t i = 0; i < o->iters; i++)
            sum += (double)samples[i];
        qsort(samples, (size_t)o->iters, sizeof(*samples), hb_cmp_u64);
        struct host_kv kv[] = {{"size", (double)o->size},
                               {"iters", (double)o->iters},
                               {"t_avg_us", sum / (double)o->iters / 1e3},
                               {"t_p50_us", hb_pct_us(samples, o->iters, 50)},
                               {"t_p99_us", hb_pct_us(samples, o->iters, 99)},
                               {"t_p999_us", hb_pct_us(samples, o->iters, 99.9)},
                               {"t_max_us", (double)samples[o->iters - 1] / 1e3}};
        host_report("hostbench_rtt", kv, sizeof(kv) / sizeof(kv[0]));
        printf("%s: %" PRIu64 " B ping-pong: avg %.3f us, p99 %.3f us, max %.3f us\n", hb->prog,
               o->size, kv[2].value, kv[4].value, kv[6].value);
    }
    free(samples);
    return rc;
}

static int hb_server(struct hb *hb)
{
    const struct hb_opts *o = &hb->o;
    uint8_t *buf = hb->conn.buf;
    volatile uint8_t *tail = buf + HB_TAIL_OFF;
    uint8_t *head = buf + (o->packed ? 0 : HB_HEAD_SEPARATE_OFF);
    uint64_t total = o->warmup + o->iters, cost_ns = 0;
    struct ibv_sge sge = {
        .addr = (uint64_t)(uintptr_t)head, .length = 8, .lkey = hb->conn.mr->lkey};
    struct ibv_send_wr ack = {.sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE,
                              .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
    ack.wr.rdma.remote_addr = hb->conn.peer.addr;
    ack.wr.rdma.rkey = hb->conn.peer.rkey;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t seq = i + 1;
        const uint8_t *msg = buf + HB_CTRL_BYTES + (i % o->slots) * hb->slot_bytes + o->offset;
        while (hb_get64(tail) != seq)
            host_relax();
        uint64_t t0 = host_now_ns();
        host_touch(msg, (size_t)o->size);
        uint64_t got = hb_get64(msg + o->size - 8);
        if (got != seq || msg[0] != (uint8_t)(seq & 0xff)) {
            fprintf(stderr, "%s: VERIFY FAILED: message %" PRIu64 " carries %" PRIu64 "\n",
                    hb->prog, seq, got);
            return 1;
        }
        rc_conn_put_le(head, seq, 8);
        host_touch_write(head, 8);
        if (i >= o->warmup)
            cost_ns += host_now_ns() - t0;
        if (hb_post(hb, &ack))
            return 1;
    }
    uint64_t first = (HB_CTRL_BYTES + o->offset) / 64,
             last = (HB_CTRL_BYTES + o->offset + o->size - 1) / 64;
    struct host_kv kv[] = {{"size", (double)o->size},
                           {"offset", (double)o->offset},
                           {"packed", o->packed ? 1.0 : 0.0},
                           {"msgs", (double)o->iters},
                           {"read_ns", (double)cost_ns / (double)o->iters},
                           {"lines", (double)(last - first + 1)}};
    host_report("hostbench_server", kv, sizeof(kv) / sizeof(kv[0]));
    printf("%s: read %" PRIu64 " B at offset %" PRIu64 " (%s head): %.1f ns per message\n",
           hb->prog, o->size, o->offset, o->packed ? "packed" : "separate", kv[4].value);
    return 0;
}

static int hb_pingpong(struct hb *hb)
{
    struct hb_opts *o = &hb->o;
    struct rc_conn *c = &hb->conn;
    bool server = o->role == RC_CONN_ROLE_SERVER;
    rc_conn_init(c, hb->prog, o->role, "hostbench");
    if (o->cpu >= 0 && host_pin_cpu(o->cpu)) {
        fprintf(stderr, "%s: host_pin_cpu(%d): %s\n", hb->prog, o->cpu, strerror(errno));
        return 2;
    }
    if (rc_conn_open_device(c) || rc_conn_query(c, NULL, 0))
        return 1;
    int socket = o->buf_socket >= 0 ? o->buf_socket : host_nic_socket(c->dev_name);
    hb->slot_bytes = (size_t)((o->offset + o->size + 63) / 64 * 64);
    hb->buf_bytes =
        server ? HB_CTRL_BYTES + (size_t)o->slots * hb->slot_bytes : 64 + (size_t)o->size;
    c->buf = host_alloc(hb->buf_bytes, socket);
    if (!c->buf) {
        fprintf(stderr, "%s: host_alloc(%zu, socket %d): %s\n", hb->prog, hb->buf_bytes, socket,
                strerror(errno));
        rc_conn_close(c);
        return 2;
    }
    c->buf_bytes = hb->buf_bytes;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    uint64_t words[] = {o->size, o->offset, o->slots, o->iters, o->warmup};
    int rc = 1;
    if (!rc_conn_create_pd_mr(c, access) && !rc_conn_create_cqs(c, 16, 1) &&
        !rc_conn_create_qp(c, 16, 1, 64, NULL) &&
        !rc_conn_exchange(c, rc_conn_hash_words(words, 5), 0) && !rc_conn_connect(c, access, 1)) {
        if (c->peer.opts_hash != c->local.opts_hash) {
            fprintf(stderr, "%s: server and client disagree on --size/--offset/--slots/--iters\n",
                    hb->prog);
            rc = 2;
        } else if (rc_conn_barrier(c, 0, 1) == 0) {
            rc = server ? hb_server(hb) : hb_client(hb);
            rc = rc_conn_barrier(c, rc, 1) ? (rc ? rc : 1) : rc;
        }
    }
    host_free(c->buf, hb->buf_bytes);
    c->buf = NULL; /* host_alloc's, not rc_conn_close's to free */
    rc_conn_close(c);
    return rc;
}

int hostbench_main(int argc, char **argv)
{
    struct hb hb = {.prog = argv[0]};
    int p = hb_parse(argc, argv, &hb.o);
    if (p)
        return p == 1 ? 0 : 2;
    if (hb.o.threads_test)
        return hb_threads(argv[0], &hb.o);
    return hb_pingpong(&hb);
}
