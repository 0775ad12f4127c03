/* fastkv's parts shared by its three files: the options, the wire
 * formats, the server's and the client's state (fastkv.c: options,
 * resources, results; fastkv_server.c; fastkv_client.c). */
#ifndef RNICSIM_FASTKV_PRIV_H
#define RNICSIM_FASTKV_PRIV_H

#include "protocols/rima/fastkv.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/common/rc_conn.h"
#include "protocols/rima/rima.h"
#include "protocols/rima/workload.h"
#include "rnicsim/host.h"

#define FK_KEY_MAX (RC_CONN_NAME_MAX + 64)
#define FK_POLL_BATCH 32
#define FK_HDR_SLOT_BYTES 64 /* one response header in the server's ring */
#define FK_ALIGN 64u         /* faa ring allocations: one cache line */
#define FK_IMM_KIND_SHIFT 30 /* imm = kind << 30 | index */
#define FK_IMM_INDEX_MASK ((1u << FK_IMM_KIND_SHIFT) - 1)
#define FK_SLAB_MIN_SHIFT 6  /* store classes 64 B .. 2^FK_SLAB_MAX_SHIFT */
#define FK_SLAB_MAX_SHIFT 21 /* 2 MiB: holds the largest 1 MiB value */
#define FK_MAX_PEERS 1024    /* servers, clients (estimate: far above a run) */
#define FK_MAX_ALLOC_THREADS 4096
#define FK_WORDS_PER_CLIENT 2 /* server control: done word, spare */

enum fk_transport {
    FK_SRQ,
    FK_RIMA,
    FK_RIMA_SW,
    FK_SPLIT_ALLOC,
    FK_SPLIT_FAA,
    FK_SPLIT_PRESEND,
    FK_TRANSPORT_COUNT
};

/* Per-transport facts. */
struct fk_transport_info {
    const char *name;
    bool rima;  /* requests are appends */
    bool split; /* small via SRQ of small-max buffers, large another way */
    int table6_row;
};
extern const struct fk_transport_info fk_transports[FK_TRANSPORT_COUNT];

/* Wire formats (host byte order: both ends are the same program). */
enum fk_op { FK_OP_GET = 1, FK_OP_SET = 2, FK_OP_RTS = 3 };
enum fk_status {
    FK_ST_HIT = 1,
    FK_ST_MISS,
    FK_ST_STORED,
    FK_ST_NOT_STORED, /* the store is full: the key is gone (a cache evicts) */
    FK_ST_GRANT,      /* split-alloc: the buffer is ready */
    FK_ST_ERROR,      /* the SET arrived corrupted */
};
enum fk_imm_kind { FK_IMM_ALLOC = 1, FK_IMM_FAA = 2, FK_IMM_PRESEND = 3 };

struct fk_req {
    uint32_t op, client, slot, value_len;
    uint64_t key;
    uint32_t checksum, pad;
};
struct fk_resp {
    uint32_t status, slot, value_len, checksum;
    uint64_t key;
    uint64_t addr; /* GRANT: where to write */
    uint32_t rkey, grant;
};
#define FK_REQ_BYTES ((uint32_t)sizeof(struct fk_req))
#define FK_RESP_BYTES ((uint32_t)sizeof(struct fk_resp))

/* Connection data.  Server: gid, lid, qpn per client, rkey+addr of its
 * control words, ring / slots MR, aq number.  Client: gid, lid, qpn per
 * server. */
struct fk_conn_hdr {
    uint8_t gid[16];
    uint16_t lid, failed;
    uint32_t n, opts_hash;
    uint32_t ctrl_rkey, big_rkey, aq_num;
    uint64_t ctrl_addr, big_addr, big_bytes;
    uint8_t rima_remote[64]; /* what the RIMA layer's sender needs */
};

/* What a program publishes at the end (server 0 aggregates). */
struct fk_client_result {
    uint64_t requests, start_ns, end_ns, bytes, large, sets, gets, hits, failed, peak_inflight,
        window, faa_retries;
};
struct fk_server_result {
    uint64_t requests, footprint_bytes, peak_outstanding, posted_bytes, large_bytes_peak,
        small_bytes, failed, allocs, faa_wasted;
};

struct fk_opts {
    enum rc_conn_role role;
    char name[RC_CONN_NAME_MAX];
    enum fk_transport transport;
    uint64_t servers, clients, id;
    uint64_t window, requests, warmup, keys;
    double get_ratio, rate;
    char dist[128];
    uint64_t max_msg, small_max, footprint, store_bytes, shared_bytes;
    uint64_t alloc_ns, alloc_threads, seed, mtu_bytes, aq_region_bytes, idle_max_ns;
    uint64_t inject_every; /* test: the server corrupts every N-th stored value */
    bool verbose;
};

/* ------------------------------------------------------------ server parts */

struct fk_item {
    uint64_t key; /* 0 = empty (keys are never 0: client id + 1 in the top) */
    uint64_t off; /* in the arena */
    uint32_t len, checksum;
    uint8_t cls;
    bool used;
};

/* One allocator thread of split-alloc (Table 6 row 3). */
enum fk_alloc_state { FK_ALLOC_IDLE, FK_ALLOC_JOB, FK_ALLOC_DONE, FK_ALLOC_EXIT };
struct fk_grant {
    uint32_t client, slot, len;
    void *buf;
    struct ibv_mr *mr;
    bool busy;
};
/* The bytes a large message's own buffer spans (fastkv_server.c takes
 * each grant's buffer from host_alloc, page aligned): whole pages. */
static inline size_t fk_grant_map_bytes(uint32_t len)
{
    return ((size_t)len + 4095) & ~(size_t)4095;
}
struct fk_allocator {
    struct fk_server *srv;
    _Atomic int state;
    uint32_t grant;
    uint64_t alloc_ns;
    int handle;
    bool failed;
};

struct fk_server {
    struct ibv_qp **qps; /* one per client */
    struct ibv_srq *srq; /* srq / split: the request SRQ */
    uint8_t *rbuf;       /* receive buffers: nbufs x buf_bytes */
    struct ibv_mr *rbuf_mr;
    uint64_t nbufs, buf_bytes;
    uint64_t *ctrl; /* done words, then the faa tail word */
    struct ibv_mr *ctrl_mr;
    uint8_t *big; /* faa ring or presend slots */
    struct ibv_mr *big_mr;
    uint64_t big_bytes;
    uint8_t *arena; /* the store: values, registered (GET replies SEND from it) */
    struct ibv_mr *arena_mr;
    uint64_t arena_bytes, arena_top;
    uint64_t free_head[FK_SLAB_MAX_SHIFT + 1]; /* free chunk lists (offset + 1) */
    struct fk_item *table;
    uint64_t table_cap, items;
    uint8_t *hdrs; /* response headers: nhdr x FK_HDR_SLOT_BYTES */
    struct ibv_mr *hdrs_mr;
    uint32_t *hdr_free;
    uint64_t nhdr, hdr_top;
    struct fk_grant *grants;
    uint64_t ngrants;
    struct fk_allocator *alloc;
    uint32_t *alloc_queue; /* grants waiting for an allocator thread */
    uint64_t aq_head, aq_tail;
    struct rima_aq *aq;
    uint64_t aq_peak_footprint, aq_samples;
    uint64_t injected; /* SETs counted for --inject-corruption */
    uint64_t outstanding, peak_outstanding;
    uint64_t large_bytes, large_bytes_peak;
    struct fk_server_result res;
};

/* ------------------------------------------------------------ client parts */

struct fk_key {
    uint32_t version; /* 0: absent (never stored, or evicted) */
    uint32_t len;
    bool inflight;
};

enum fk_phase { FK_FREE, FK_WAIT_FAA, FK_WAIT_GRANT, FK_WAIT_RESP };

struct fk_slot {
    enum fk_phase phase;
    uint32_t key_idx, server, len, version;
    enum fk_op op;
    bool large, timed;
    uint64_t t0_ns;
    uint64_t faa_result;
};

struct fk_client {
    struct ibv_qp **qps; /* one per server */
    struct ibv_srq *srq; /* response receives */
    uint8_t *sbuf;       /* requests: W x max_msg, then W x 8 B of FAA results */
    uint8_t *rbuf;       /* responses: W x max_msg */
    struct ibv_mr *sbuf_mr, *rbuf_mr;
    struct fk_slot *slots;
    struct fk_key *keys;
    uint64_t win;       /* outstanding requests allowed (srq: the footprint-priority share) */
    bool *presend_busy; /* split-presend: my slot at each server */
    uint64_t *srv_ctrl_addr, *srv_big_addr;
    uint32_t *srv_ctrl_rkey, *srv_big_rkey;
    uint64_t *srv_big_bytes;
    struct rima_sender **snd; /* rima: one sender per server (owns scqs[s]) */
    struct ibv_cq **scqs;
    struct wl_size_dist dist;
    struct wl_arrival arrival;
    struct wl_rng rng;
    uint64_t next_arrival_ns;
    bool have_next;
    uint32_t next_key;
    bool next_get;
    uint32_t next_len;
    uint64_t issued, completed, inflight, total;
    uint64_t *lat_all, *lat_large;
    uint64_t n_all, n_large;
    struct fk_client_result res;
};

struct fk {
    struct fk_opts o;
    const char *prog;
    struct rc_conn conn;
    struct ibv_device_attr dev;
    struct ibv_cq *cq;  /* receive completions */
    struct ibv_cq *scq; /* send completions (server; client srq/split) */
    int access;
    uint8_t rd_atomic;
    uint32_t npeers;
    struct fk_conn_hdr *peer; /* per peer */
    struct fk_server s;
    struct fk_client c;
    uint64_t idle_ns; /* current idle step (fk_idle) */
    bool infeasible;
    int status;
};

/* fastkv.c */
uint64_t fk_mix(uint64_t x);
void fk_fill(uint8_t *p, uint32_t len, uint64_t key, uint32_t version);
int64_t fk_check(const uint8_t *p, uint32_t len, uint64_t key, uint32_t version);
uint32_t fk_fnv(const uint8_t *p, uint32_t len);
uint32_t fk_key_server(uint64_t key, uint64_t servers);
uint64_t fk_client_key(uint64_t client, uint64_t idx);
int fk_put(struct fk *f, const char *key, const void *buf, size_t len);
int fk_get(struct fk *f, const char *key, void *buf, size_t len);
bool fk_wc_ok(struct fk *f, const struct ibv_wc *wc);
void fk_idle(struct fk *f, bool progressed);
int fk_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc);
uint64_t fk_srq_buffers(const struct fk_opts *o);
uint64_t fk_client_window(const struct fk_opts *o, uint64_t c);
struct ibv_cq *fk_cq(struct fk *f, uint64_t cqe);
int fk_alloc_mr(struct fk *f, uint64_t bytes, int access, uint8_t **buf, struct ibv_mr **mr);
struct ibv_srq *fk_srq(struct fk *f, uint64_t wr);
int fk_post_recv(struct fk *f, struct ibv_srq *srq, uint8_t *base, uint64_t bytes, uint32_t lkey,
                 uint64_t i);
struct ibv_qp *fk_qp(struct fk *f, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
                     uint32_t send_wr);
int fk_exchange_connect(struct fk *f, struct ibv_qp **qps, struct fk_conn_hdr *mine);

/* fastkv_server.c */
int fk_server_setup(struct fk *f);
void fk_server_footprint(struct fk *f);
int fk_server_loop(struct fk *f);

/* fastkv_client.c */
int fk_client_setup(struct fk *f);
int fk_client_loop(struct fk *f);
int fk_client_done(struct fk *f);
int fk_client_drain(struct fk *f);

#endif
