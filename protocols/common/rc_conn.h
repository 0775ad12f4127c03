/* One RC (or UC) queue pair between a server and a client program, connected out of
 * band: the part of the protocol drivers (perftest, litmus) that does not
 * depend on what they send.
 *
 * A driver embeds a struct rc_conn, calls rc_conn_init, then
 *   rc_conn_open_device, rc_conn_query (port, GID, MTU), rc_conn_alloc_buf,
 *   rc_conn_create_pd_mr, rc_conn_create_cqs, rc_conn_create_qp     (RESET)
 *   rc_conn_exchange ("<name>/server", "<name>/client")
 *   rc_conn_connect                                   (INIT -> RTR -> RTS)
 *   rc_conn_barrier ("<name>/sync/<k>/<role>") as often as it likes
 *   rc_conn_close.
 * Every step prints its reason on failure and returns -1 (0 on success), so
 * each driver keeps its own exit codes.  Written only against
 * <infiniband/verbs.h> and <rnicsim/host.h>, so it builds in the simulator
 * and against real libibverbs alike.  No globals (several instances run as
 * coroutines in one process). */
#ifndef RNICSIM_PROTOCOLS_COMMON_RC_CONN_H
#define RNICSIM_PROTOCOLS_COMMON_RC_CONN_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RC_CONN_PORT 1
#define RC_CONN_NAME_MAX 96 /* --name=PAIR, the out-of-band key prefix */
#define RC_CONN_KEY_MAX (RC_CONN_NAME_MAX + 48)
#define RC_CONN_INFO_BYTES 64       /* struct rc_conn_info on the wire */
#define RC_CONN_UD_QKEY 0x11111111u /* perftest's DEF_QKEY: the Q_Key of a UD pair */

enum rc_conn_role { RC_CONN_ROLE_NONE, RC_CONN_ROLE_SERVER, RC_CONN_ROLE_CLIENT };

/* Connection data exchanged out of band (serialised little-endian:
 * qpn@0 psn@4 rkey@8 opts_hash@12 lid@16 atomic_ok@18 gid@20 addr@36
 * buf_bytes@44). */
struct rc_conn_info {
    uint32_t qpn, psn, rkey, opts_hash;
    uint16_t lid;
    uint8_t gid[16];
    uint64_t addr, buf_bytes;
    uint8_t atomic_ok;
};

struct rc_conn {
    const char *prog;       /* prefix of every message */
    enum rc_conn_role role; /* server or client */
    const char *name;       /* out-of-band key prefix */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    struct ibv_port_attr port;
    union ibv_gid gid;
    enum ibv_mtu mtu;
    char dev_name[64]; /* the opened device */
    uint8_t *buf;      /* the one registered buffer */
    size_t buf_bytes;
    struct rc_conn_info local, peer;
    uint32_t sync_seq;
    enum ibv_qp_type qp_type; /* IBV_QPT_RC (rc_conn_init), IBV_QPT_UC or IBV_QPT_UD */
    struct ibv_ah *ah;        /* UD: the address handle of the peer (rc_conn_connect) */
};

const char *rc_conn_role_name(enum rc_conn_role role);
const char *rc_conn_peer_role_name(enum rc_conn_role role);

/* Little-endian integers of 1..8 bytes. */
void rc_conn_put_le(uint8_t *p, uint64_t v, int bytes);
uint64_t rc_conn_get_le(const uint8_t *p, int bytes);

void rc_conn_info_encode(const struct rc_conn_info *in, uint8_t out[RC_CONN_INFO_BYTES]);
void rc_conn_info_decode(const uint8_t in[RC_CONN_INFO_BYTES], struct rc_conn_info *out);

/* "123", "4K", "4KiB", "4KB", "1M", "1MiB", "1G" (binary multiples, as
 * message sizes are always meant).  False on anything else. */
bool rc_conn_parse_size(const char *s, uint64_t *out);
/* rc_conn_parse_size, and min <= value <= max. */
bool rc_conn_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "250ns", "10us", "2ms", "1s" (an integer and a unit) in nanoseconds. */
bool rc_conn_parse_time(const char *s, uint64_t *ns);
/* "12.5GBps", "100Gbps", "800MBps", "40Mbps", "1000Bps" or a plain number
 * (bytes per second) in bytes per second.  False on anything else. */
bool rc_conn_parse_rate(const char *s, uint64_t *bytes_per_s);

/* FNV-1a-32 over the 8 little-endian bytes of each word: the hash of the
 * options both sides must agree on. */
uint32_t rc_conn_hash_words(const uint64_t *words, size_t n);

enum ibv_mtu rc_conn_mtu_enum(uint32_t bytes);

void rc_conn_init(struct rc_conn *c, const char *prog, enum rc_conn_role role, const char *name);
/* Open the first device (its name in c->dev_name).  "no RDMA device found"
 * goes to stdout, as perftest prints it. */
int rc_conn_open_device(struct rc_conn *c);
/* Query port RC_CONN_PORT and GID 0 (and the device into *dev unless NULL),
 * and choose the path MTU: mtu_bytes, or the port's active MTU when 0. */
int rc_conn_query(struct rc_conn *c, struct ibv_device_attr *dev, uint32_t mtu_bytes);
/* A zeroed, page-aligned buffer of `bytes` into c->buf. */
int rc_conn_alloc_buf(struct rc_conn *c, size_t bytes);
/* PD, and the whole buffer registered with `access`. */
int rc_conn_create_pd_mr(struct rc_conn *c, int access);
int rc_conn_create_cqs(struct rc_conn *c, uint32_t send_depth, uint32_t recv_depth);
/* The QP of type c->qp_type (state RESET).  When want_inline is refused, retries once
 * without inline; the granted inline size goes to *got_inline unless NULL. */
int rc_conn_create_qp(struct rc_conn *c, uint32_t max_send_wr, uint32_t max_recv_wr,
                      uint32_t want_inline, uint32_t *got_inline);
/* Out-of-band put / get of one value under key (host_oob_put/get: the
 * simulator's key-value store, or TCP to the server on real hardware).
 * A failure is named on stderr with prog and the key; returns 0 or -1. */
int rc_conn_oob_put(const char *prog, const char *key, const void *buf, size_t len);
int rc_conn_oob_get(const char *prog, const char *key, void *buf, size_t len);
/* Fill c->local, put it under "<name>/<role>", get the peer's into c->peer.
 * The caller checks opts_hash and whatever else must match. */
int rc_conn_exchange(struct rc_conn *c, uint32_t opts_hash, uint8_t atomic_ok);
/* RESET -> INIT -> RTR -> RTS with the masks the kernel requires for RC;
 * rd_atomic is both max_dest_rd_atomic and max_rd_atomic.  A UC QP gets
 * the UC masks: no RDMA-read/atomic depths, RNR timer, timeout or retry
 * counts (rd_atomic is ignored).  A UD QP gets the Q_Key RC_CONN_UD_QKEY
 * and an address handle of the peer in c->ah (access, rd_atomic ignored). */
int rc_conn_connect(struct rc_conn *c, int access, uint8_t rd_atomic);
/* Barrier with the peer that also exchanges a status word.  Returns the
 * peer's status, or on_error if the exchange itself failed. */
int rc_conn_barrier(struct rc_conn *c, int status, int on_error);
/* Star barrier of many programs that also carries statuses: members put
 * "<name>/sync/<seq>/c<id>", the hub collects ids first_id ..
 * first_id + n_members - 1 and puts the largest as "<name>/sync/<seq>/s".
 * Everyone returns the largest status of the run, or 1 when the exchange
 * itself failed (named on stderr with prog). */
int rc_conn_star_barrier(const char *prog, const char *name, uint32_t seq, bool hub,
                         uint64_t first_id, uint64_t n_members, uint64_t my_id, int status);
/* Destroy whatever exists and free the buffer. */
void rc_conn_close(struct rc_conn *c);

#endif
