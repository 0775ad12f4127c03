/* Ordering litmus protocols over one RC (--qp=uc: UC) queue pair
 * (docs/ordering.md).
 *
 * A client (the sender) sends --messages messages through a ring of --slots
 * fixed-size slots in the server's (the receiver's) memory; message i
 * (seq = i + 1) has size sizes[i % nsizes] and goes to slot i % slots.
 * Every message carries, written by the sender,
 *
 *   [0,4)  seq       u32 little-endian, 1, 2, 3, ...
 *   [4,8)  length    u32, the message size in bytes
 *   [8,12) checksum  FNV-1a-32 over bytes [0,8) and [12,size)
 *   [12,size) body   a pseudo-random stream seeded by seq (for last-byte,
 *                    the final byte is the flag, lt_flag(seq), never 0)
 *
 * and the receiver checks every message: the sequence number it expects,
 * the length, the checksum over the bytes as they are in its memory at the
 * moment the protocol says the message is there, and the flag.  The
 * protocols differ only in how the receiver learns that a message is there
 * (Taranov et al., Table 2, "RDMA transport requirements"):
 *
 *   last-byte    WRITE; the receiver polls the last byte of the slot (write
 *                slot, inlined bell).  Needs in-order bytes within a message.
 *   flag         WRITE of the data, then an 8-byte WRITE of seq to the
 *                slot's bell; the receiver polls the bell (write slot,
 *                detached bell).  Needs in-order messages.
 *   imm          WRITE_WITH_IMM, imm = seq; the receiver waits for the
 *                receive completion (write slot, IMM).  Needs nothing.
 *   send         SEND into a pre-posted receive per slot; the receiver waits
 *                for the completion (send/recv).  Needs nothing.
 *   send-in-order  like send, but the receiver takes the completions in
 *                sequence (the next one must be the next message).  Needs
 *                in-order messages.
 *
 * and two deliberately broken ones (negative controls that must fail even
 * on an in-order transport, so the checker's failure path is exercised):
 *
 *   header-flag  like last-byte, but the receiver polls the sequence number
 *                at the START of the slot: a multi-packet message is seen
 *                after its first packet has landed.
 *   flag-first   like flag, but the bell WRITE is posted BEFORE the data.
 *
 * The completion-based receivers accept messages in any order (each CQE
 * names its message: imm = seq, or the seq in the received header), as the
 * protocols allow; the polling receivers process slots in sequence.
 *
 * Flow control: the sender has at most --slots messages not yet consumed;
 * the receiver zeroes a consumed slot (so that nothing of an old message can
 * pass for a new one), reposts its receive, and every slots/2 messages
 * RDMA-WRITEs its consumed count into the sender's credit word
 * (--credits=send: SENDs it into one of the receives the sender keeps
 * posted; EFA SRD has no WRITE, and may deliver credits out of order, so
 * the sender keeps the largest).
 *
 * --timeout-us=N (UC loses messages): the receiver reports message N as a
 * violation ("never arrived", check 6) when nothing arrives for N us; the
 * sender stops after 2N us without a credit.
 *
 * On the first invalid message the receiver prints one line
 * "<prog> server: VIOLATION: ..." on stderr, reports it as a row of the
 * table "order_violation" (host_report; keys below), writes an abort marker
 * into the sender's credit word, and both sides exit with status 1.  A
 * clean receiver reports one row of "order_check" (messages_checked,
 * bytes_checked, violations = 0, messages_out_of_order = completions that
 * named a later message than the next one, CQE protocols only).  These two
 * tables are the contract with `rnicsim check-order`.
 *
 * --swap-pairs makes the client post messages 2,1,4,3,...: an emulated
 * message reordering that any transport delivers, to check that the
 * completion-based receivers really accept messages in any order.
 *
 * No globals: several instances run as coroutines in one simulator process;
 * getopt's globals are used only while parsing, before any blocking call. */
#include "protocols/litmus/litmus.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/common/rc_conn.h"
#include "rnicsim/host.h"

#define LT_MAX_SIZES 16
#define LT_HDR_BYTES 12
#define LT_MIN_SIZE 16         /* header + at least 4 body bytes */
#define LT_MAX_SIZE (1u << 30) /* RC max message is 2^31; keep slots sane */
#define LT_MAX_SLOTS 4096u     /* receive queue depth stays well under max_qp_wr */
#define LT_SQ_DEPTH 128u       /* perftest's tx-depth default (DEF_TX_BW) */
#define LT_CQ_MOD 32u          /* signal every 32nd WR: half perftest's cq-mod 64 */
#define LT_POLL_BATCH 16       /* CQEs taken per ibv_poll_cq */
#define LT_ABORT UINT64_MAX    /* credit value meaning "the receiver stopped" */
/* --credits=send: receives the client keeps posted.  The receiver sends at
 * most slots/(slots/2) + 2 credits (and one abort) that the client has not
 * yet polled: it only consumes messages the client's last credit allowed. */
#define LT_CREDIT_RECVS(slots) ((slots) + 4u)
#define LT_SPIN_NS 100u /* estimate: one turn of a polling loop, ~ a DRAM miss */
#define LT_EXIT_VIOLATION 1
#define LT_EXIT_ERROR 2
/* The buffer and the QP: the peer only WRITEs (and SENDs) into it. */
#define LT_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* How the receiver learns that message seq is there. */
enum lt_notify {
    LT_NOTIFY_LAST_BYTE, /* the slot's last byte becomes lt_flag(seq) */
    LT_NOTIFY_HEADER,    /* the slot's first word becomes seq (broken) */
    LT_NOTIFY_BELL,      /* the slot's 8-byte bell becomes seq */
    LT_NOTIFY_CQE,       /* a receive completion */
};

enum lt_proto {
    LT_LAST_BYTE,
    LT_HEADER_FLAG,
    LT_FLAG,
    LT_FLAG_FIRST,
    LT_IMM,
    LT_SEND,
    LT_SEND_IN_ORDER,
    LT_PROTO_COUNT
};

struct lt_proto_info {
    const char *name;
    const char *needs; /* what the protocol requires of the transport */
    enum lt_notify notify;
    enum ibv_wr_opcode opcode;     /* the data WR */
    enum ibv_wc_opcode recv_wc_op; /* expected receive completion (CQE protocols) */
    bool bell;                     /* an 8-byte bell WRITE per message */
    bool bell_first;               /* broken: the bell is posted before the data */
    bool flag_last;                /* the message's last byte is the flag */
    bool in_order;                 /* CQE protocol that takes completions in sequence */
    bool broken;                   /* a negative control */
};

static const struct lt_proto_info lt_protos[LT_PROTO_COUNT] = {
    [LT_LAST_BYTE] = {.name = "last-byte",
                      .needs = "in-order bytes within a message",
                      .notify = LT_NOTIFY_LAST_BYTE,
                      .opcode = IBV_WR_RDMA_WRITE,
                      .flag_last = true},
    [LT_HEADER_FLAG] = {.name = "header-flag",
                        .needs = "the whole message to land at once (no transport promises it)",
                        .notify = LT_NOTIFY_HEADER,
                        .opcode = IBV_WR_RDMA_WRITE,
                        .broken = true},
    [LT_FLAG] = {.name = "flag",
                 .needs = "in-order messages",
                 .notify = LT_NOTIFY_BELL,
                 .opcode = IBV_WR_RDMA_WRITE,
                 .bell = true},
    [LT_FLAG_FIRST] = {.name = "flag-first",
                       .needs = "the bell to land after data posted after it (never true)",
                       .notify = LT_NOTIFY_BELL,
                       .opcode = IBV_WR_RDMA_WRITE,
                       .bell = true,
                       .bell_first = true,
                       .broken = true},
    [LT_IMM] = {.name = "imm",
                .needs = "nothing",
                .notify = LT_NOTIFY_CQE,
                .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                .recv_wc_op = IBV_WC_RECV_RDMA_WITH_IMM},
    [LT_SEND] = {.name = "send",
                 .needs = "nothing",
                 .notify = LT_NOTIFY_CQE,
                 .opcode = IBV_WR_SEND,
                 .recv_wc_op = IBV_WC_RECV},
    [LT_SEND_IN_ORDER] = {.name = "send-in-order",
                          .needs = "in-order messages",
                          .notify = LT_NOTIFY_CQE,
                          .opcode = IBV_WR_SEND,
                          .recv_wc_op = IBV_WC_RECV,
                          .in_order = true},
};

/* What a receiver found wrong with a message (the "check" column of the
 * order_violation row). */
enum lt_check {
    LT_OK,
    LT_BAD_SEQ,
    LT_BAD_LEN,
    LT_BAD_CSUM,
    LT_BAD_FLAG,
    LT_BAD_CQE,
    LT_MISSING /* --timeout-us: the message never arrived */
};
static const char *const lt_check_names[] = {
    [LT_OK] = "ok",
    [LT_BAD_SEQ] = "sequence number",
    [LT_BAD_LEN] = "length",
    [LT_BAD_CSUM] = "checksum",
    [LT_BAD_FLAG] = "flag byte",
    [LT_BAD_CQE] = "completion",
    [LT_MISSING] = "arrival",
};

/* How the receiver returns credits to the sender. */
enum lt_credits {
    LT_CREDITS_WRITE, /* an 8-byte RDMA WRITE into the sender's credit word */
    LT_CREDITS_SEND,  /* an 8-byte SEND into a receive the sender posted */
};

struct lt_opts {
    enum rc_conn_role role;
    enum lt_proto proto;
    char name[RC_CONN_NAME_MAX];
    uint64_t messages;
    uint32_t sizes[LT_MAX_SIZES];
    unsigned nsizes;
    uint32_t slots;
    uint32_t mtu_bytes; /* 0 = the port's active MTU */
    bool swap_pairs;    /* client: post messages 2,1,4,3,... (emulated reordering) */
    enum lt_credits credits;
    bool uc;             /* UC QPs instead of RC */
    uint64_t timeout_us; /* 0 = wait forever for the next message / credit */
    bool verbose;
};

/* A send queue under flow control: WR k (1-based) has wr_id k; a signaled
 * completion of k means every WR up to k is done. */
struct lt_sq {
    uint64_t posted, completed;
};

struct lt {
    struct lt_opts o;
    const struct lt_proto_info *p;
    const char *prog;
    struct rc_conn conn; /* device, PD, MR, CQs, QP, buffer, peer info */
    /* One registered buffer on each side, same layout:
     *   [0, slots*slot_bytes)   slots (server: the ring; client: staging)
     *   bells_off               slots x 8 bytes (server: bells; client: bell sources)
     *   credit_off              8 bytes (client: credit word; server: its source)
     *   credit_off + 8          8 bytes (server: the abort marker source) */
    size_t slot_bytes, bells_off, credit_off;
    uint8_t *expect;  /* server: the expected message, for diagnostics */
    uint64_t *got;    /* server, CQE protocols: got[(seq-1) % slots] = seq once received */
    size_t crecv_off; /* client, --credits=send: LT_CREDIT_RECVS x 8-byte receives */
    struct lt_sq sq;
};

/* The body of a spin loop.  With --timeout-us the loop must see time pass
 * even when nothing will ever arrive (host_relax parks until memory may have
 * changed: a lost message would end the run as a deadlock), so it charges
 * LT_SPIN_NS per turn instead. */
static void lt_relax(const struct lt *lt)
{
    if (lt->o.timeout_us)
        host_compute(LT_SPIN_NS);
    else
        host_relax();
}

/* ------------------------------------------------------------ message format */

static void lt_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t lt_get32(const volatile uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t lt_flag(uint64_t seq)
{
    return (uint8_t)(seq % 255u + 1u);
}

static uint32_t lt_size_of(const struct lt_opts *o, uint64_t seq)
{
    return o->sizes[(seq - 1) % o->nsizes];
}

static uint32_t lt_slot_of(const struct lt_opts *o, uint64_t seq)
{
    return (uint32_t)((seq - 1) % o->slots);
}

/* FNV-1a-32 over [0,8) and [12,size): everything but the checksum field. */
static uint32_t lt_checksum(const volatile uint8_t *p, uint32_t size)
{
    uint32_t h = 2166136261u;
    for (uint32_t j = 0; j < size; j++) {
        if (j == 8)
            j = LT_HDR_BYTES;
        h ^= p[j];
        h *= 16777619u;
    }
    return h;
}

/* Write message `seq` of `size` bytes at p. */
static void lt_fill(uint8_t *p, uint64_t seq, uint32_t size, bool flag_last)
{
    lt_put32(p, (uint32_t)seq);
    lt_put32(p + 4, size);
    uint32_t x = (uint32_t)seq * 2654435761u ^ 0x5bd1e995u; /* LCG seeded by seq */
    for (uint32_t j = LT_HDR_BYTES; j < size; j++) {
        x = x * 1664525u + 1013904223u;
        p[j] = (uint8_t)(x >> 24);
    }
    if (flag_last)
        p[size - 1] = lt_flag(seq);
    lt_put32(p + 8, lt_checksum(p, size));
}

/* ------------------------------------------------------------ option parsing */

static void lt_usage(const char *prog)
{
    printf("usage: %s --server | --client [options] [server-host]\n"
           "  --protocol=P       last-byte, flag, imm, send, send-in-order (correct), or the\n"
           "                     deliberately broken header-flag, flag-first (default last-byte)\n"
           "  --name=PAIR        out-of-band key prefix (default litmus)\n"
           "  --messages=N       messages to send and check (default 1000)\n"
           "  --sizes=LIST       message sizes, used in turn, >= 16 (default 64,4096,16384)\n"
           "  --slots=N          ring slots = messages in flight (default 8)\n"
           "  --mtu=BYTES        256..4096 (default: the port's active MTU)\n"
           "  --swap-pairs       client: post each pair of messages in reverse order, to\n"
           "                     check that a receiver does not rely on message order\n"
           "  --credits=HOW      write (default): credits return as an RDMA WRITE; send: as\n"
           "                     SENDs into receives the client posts (EFA has no WRITE)\n"
           "  --qp=TYPE          rc (default) or uc (unreliable connected)\n"
           "  --timeout-us=N     receiver: report message N as a violation when nothing\n"
           "                     arrives for N us (a lost message); 0 = wait forever\n"
           "  --verbose          print a line when every message was valid\n"
           "exit status: 0 all valid, 1 ordering violation, 2 usage/setup/transport error\n",
           prog);
}

static bool lt_parse_sizes(const char *s, struct lt_opts *o)
{
    char tmp[256];
    if (strlen(s) >= sizeof(tmp))
        return false;
    strcpy(tmp, s);
    o->nsizes = 0;
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nsizes == LT_MAX_SIZES || !rc_conn_parse_uint(tok, LT_MIN_SIZE, LT_MAX_SIZE, &v))
            return false;
        o->sizes[o->nsizes++] = (uint32_t)v;
    }
    return o->nsizes > 0;
}

static bool lt_parse_proto(const char *s, enum lt_proto *out)
{
    for (int i = 0; i < LT_PROTO_COUNT; i++) {
        if (strcmp(s, lt_protos[i].name) == 0) {
            *out = (enum lt_proto)i;
            return true;
        }
    }
    return false;
}

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_PROTOCOL,
    OPT_NAME,
    OPT_MESSAGES,
    OPT_SIZES,
    OPT_SLOTS,
    OPT_MTU,
    OPT_SWAP_PAIRS,
    OPT_CREDITS,
    OPT_QP,
    OPT_TIMEOUT_US,
    OPT_VERBOSE,
    OPT_HELP
};

/* Parse argv completely (no verbs or host_* call happens before this
 * returns).  0 to run, LT_EXIT_ERROR on a usage error, -1 after --help. */
static int lt_parse_args(int argc, char **argv, struct lt_opts *o)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"protocol", required_argument, NULL, OPT_PROTOCOL},
        {"name", required_argument, NULL, OPT_NAME},
        {"messages", required_argument, NULL, OPT_MESSAGES},
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"slots", required_argument, NULL, OPT_SLOTS},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"swap-pairs", no_argument, NULL, OPT_SWAP_PAIRS},
        {"credits", required_argument, NULL, OPT_CREDITS},
        {"qp", required_argument, NULL, OPT_QP},
        {"timeout-us", required_argument, NULL, OPT_TIMEOUT_US},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argc > 0 && argv[0] ? argv[0] : "litmus";
    memset(o, 0, sizeof(*o));
    o->proto = LT_LAST_BYTE;
    snprintf(o->name, sizeof(o->name), "litmus");
    o->messages = 1000; /* estimate: enough laps of the ring to see every slot reused */
    /* One packet, one full 4 KiB MTU packet, and a 4-packet message. */
    lt_parse_sizes("64,4096,16384", o);
    o->slots = 8; /* estimate: a small ring, so slots are reused often */

    optind = 0; /* GNU getopt: full re-initialisation for each instance */
    opterr = 1;
    for (;;) {
        uint64_t v = 0;
        bool ok = true;
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case OPT_SERVER:
            o->role = RC_CONN_ROLE_SERVER;
            break;
        case OPT_CLIENT:
            o->role = RC_CONN_ROLE_CLIENT;
            break;
        case OPT_PROTOCOL:
            ok = lt_parse_proto(optarg, &o->proto);
            break;
        case OPT_NAME:
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name);
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_MESSAGES:
            ok = rc_conn_parse_uint(optarg, 1, UINT32_MAX, &o->messages);
            break;
        case OPT_SIZES:
            ok = lt_parse_sizes(optarg, o);
            break;
        case OPT_SLOTS:
            ok = rc_conn_parse_uint(optarg, 1, LT_MAX_SLOTS, &v);
            o->slots = (uint32_t)v;
            break;
        case OPT_MTU:
            ok = rc_conn_parse_uint(optarg, 256, 4096, &v) && (v & (v - 1)) == 0;
            o->mtu_bytes = (uint32_t)v;
            break;
        case OPT_SWAP_PAIRS:
            o->swap_pairs = true;
            break;
        case OPT_CREDITS:
            ok = strcmp(optarg, "write") == 0 || strcmp(optarg, "send") == 0;
            o->credits = strcmp(optarg, "send") == 0 ? LT_CREDITS_SEND : LT_CREDITS_WRITE;
            break;
        case OPT_QP:
            ok = strcmp(optarg, "rc") == 0 || strcmp(optarg, "uc") == 0;
            o->uc = strcmp(optarg, "uc") == 0;
            break;
        case OPT_TIMEOUT_US:
            ok = rc_conn_parse_uint(optarg, 0, UINT32_MAX, &o->timeout_us);
            break;
        case OPT_VERBOSE:
            o->verbose = true;
            break;
        case OPT_HELP:
            lt_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: try --help\n", prog);
            return LT_EXIT_ERROR;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad value for --%s: '%s'\n", prog, longopts[c - OPT_SERVER].name,
                    optarg ? optarg : "");
            return LT_EXIT_ERROR;
        }
    }
    /* At most one positional argument: the server host on real hardware. */
    if (argc - optind > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind + 1]);
        return LT_EXIT_ERROR;
    }
    if (o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server or --client (try --help)\n", prog);
        return LT_EXIT_ERROR;
    }
    if (o->swap_pairs && o->slots < 2) {
        fprintf(stderr, "%s: --swap-pairs needs --slots >= 2\n", prog);
        return LT_EXIT_ERROR;
    }
    return 0;
}

/* FNV-1a over the options both sides must agree on. */
static uint32_t lt_opts_hash(const struct lt_opts *o)
{
    uint64_t words[LT_MAX_SIZES + 10];
    size_t n = 0;
    words[n++] = (uint64_t)o->proto;
    words[n++] = o->messages;
    words[n++] = o->slots;
    words[n++] = o->nsizes;
    words[n++] = o->credits;
    words[n++] = o->uc;
    for (unsigned i = 0; i < o->nsizes; i++)
        words[n++] = o->sizes[i];
    return rc_conn_hash_words(words, n);
}

/* ------------------------------------------------------------ resources */

/* Open the first device, allocate PD, buffer, MR, CQs and the RC QP. */
static int lt_open(struct lt *lt)
{
    struct rc_conn *c = &lt->conn;
    if (rc_conn_open_device(c) || rc_conn_query(c, NULL, lt->o.mtu_bytes))
        return LT_EXIT_ERROR;

    uint32_t max_size = 0;
    for (unsigned i = 0; i < lt->o.nsizes; i++)
        if (lt->o.sizes[i] > max_size)
            max_size = lt->o.sizes[i];
    lt->slot_bytes = ((size_t)max_size + 63) & ~(size_t)63;
    lt->bells_off = lt->slot_bytes * lt->o.slots;
    lt->credit_off = lt->bells_off + 8 * (size_t)lt->o.slots;
    lt->crecv_off = lt->credit_off + 16;
    if (rc_conn_alloc_buf(c, lt->crecv_off + 8 * (size_t)LT_CREDIT_RECVS(lt->o.slots) + 64))
        return LT_EXIT_ERROR;
    if (lt->o.role == RC_CONN_ROLE_SERVER) {
        lt->expect = malloc(lt->slot_bytes);
        lt->got = calloc(lt->o.slots, sizeof(*lt->got));
        if (!lt->expect || !lt->got) {
            fprintf(stderr, "%s: out of memory\n", lt->prog);
            return LT_EXIT_ERROR;
        }
        uint64_t abort_marker = LT_ABORT;
        memcpy(lt->conn.buf + lt->credit_off + 8, &abort_marker, 8);
    }

    uint32_t recv_depth = lt->o.slots;
    if (lt->o.role == RC_CONN_ROLE_CLIENT && lt->o.credits == LT_CREDITS_SEND)
        recv_depth = LT_CREDIT_RECVS(lt->o.slots);
    if (rc_conn_create_pd_mr(c, LT_ACCESS) || rc_conn_create_cqs(c, LT_SQ_DEPTH, recv_depth) ||
        rc_conn_create_qp(c, LT_SQ_DEPTH, recv_depth, 0, NULL))
        return LT_EXIT_ERROR;
    return 0;
}

/* Exchange connection data with the peer and connect the QP
 * (RESET -> INIT -> RTR -> RTS; no READ or atomics: one rd_atomic). */
static int lt_exchange(struct lt *lt)
{
    struct rc_conn *c = &lt->conn;
    if (rc_conn_exchange(c, lt_opts_hash(&lt->o), 0))
        return LT_EXIT_ERROR;
    if (c->peer.opts_hash != c->local.opts_hash || c->peer.buf_bytes != c->buf_bytes) {
        fprintf(stderr, "%s: server and client were given different options\n", lt->prog);
        return LT_EXIT_ERROR;
    }
    return rc_conn_connect(c, LT_ACCESS, 1) ? LT_EXIT_ERROR : 0; /* UC: rd_atomic unused */
}

static void lt_close(struct lt *lt)
{
    rc_conn_close(&lt->conn);
    free(lt->expect);
    free(lt->got);
}

/* ------------------------------------------------------------ send queue */

static int lt_wc_ok(const struct lt *lt, const struct ibv_wc *wc, const char *what)
{
    if (wc->status == IBV_WC_SUCCESS)
        return 0;
    fprintf(stderr, "%s %s: %s completion failed: %s (status %d)\n", lt->prog,
            rc_conn_role_name(lt->o.role), what, ibv_wc_status_str(wc->status), (int)wc->status);
    return LT_EXIT_ERROR;
}

/* Wait for at least one send completion. */
static int lt_poll_send(struct lt *lt)
{
    struct ibv_wc wc[LT_POLL_BATCH];
    int n;
    do {
        n = ibv_poll_cq(lt->conn.scq, LT_POLL_BATCH, wc);
    } while (n == 0);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", lt->prog);
        return LT_EXIT_ERROR;
    }
    for (int i = 0; i < n; i++) {
        if (lt_wc_ok(lt, &wc[i], "send"))
            return LT_EXIT_ERROR;
        if (wc[i].wr_id > lt->sq.completed)
            lt->sq.completed = wc[i].wr_id;
    }
    return 0;
}

/* Post a chain of n WRs (linked through .next) under flow control: waits
 * while the queue is full; WR k is signaled when k is a multiple of
 * LT_CQ_MOD, and the last of the chain when `signal_last`. */
static int lt_post(struct lt *lt, struct ibv_send_wr *chain, unsigned n, bool signal_last)
{
    while (lt->sq.posted + n - lt->sq.completed > LT_SQ_DEPTH)
        if (lt_poll_send(lt))
            return LT_EXIT_ERROR;
    uint64_t k = lt->sq.posted;
    for (struct ibv_send_wr *wr = chain; wr; wr = wr->next) {
        wr->wr_id = ++k;
        wr->send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
        if (k % LT_CQ_MOD == 0 || (signal_last && !wr->next))
            wr->send_flags |= IBV_SEND_SIGNALED;
    }
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(lt->conn.qp, chain, &bad);
    if (err) {
        fprintf(stderr, "%s %s: ibv_post_send (%s): %s\n", lt->prog, rc_conn_role_name(lt->o.role),
                lt->p->name, strerror(err));
        return LT_EXIT_ERROR;
    }
    lt->sq.posted = k;
    return 0;
}

/* Wait until every posted WR completed (the last one must be signaled). */
static int lt_drain(struct lt *lt)
{
    while (lt->sq.completed < lt->sq.posted)
        if (lt_poll_send(lt))
            return LT_EXIT_ERROR;
    return 0;
}

/* An 8-byte WRITE from our buffer at `src_off` to the peer's at `dst_off`. */
static void lt_word_wr(struct lt *lt, struct ibv_send_wr *wr, struct ibv_sge *sge, size_t src_off,
                       size_t dst_off)
{
    memset(wr, 0, sizeof(*wr));
    *sge = (struct ibv_sge){.addr = (uint64_t)(uintptr_t)(lt->conn.buf + src_off),
                            .length = 8,
                            .lkey = lt->conn.mr->lkey};
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = IBV_WR_RDMA_WRITE;
    wr->wr.rdma.remote_addr = lt->conn.peer.addr + dst_off;
    wr->wr.rdma.rkey = lt->conn.peer.rkey;
}

/* ------------------------------------------------------------ receiver */

static int lt_post_recv(struct lt *lt, uint32_t slot)
{
    struct ibv_sge sge = {.addr =
                              (uint64_t)(uintptr_t)(lt->conn.buf + (size_t)slot * lt->slot_bytes),
                          .length = (uint32_t)lt->slot_bytes,
                          .lkey = lt->conn.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    if (lt->p->opcode != IBV_WR_SEND) /* WRITE_WITH_IMM consumes a receive but no buffer */
        wr.num_sge = 0;
    int err = ibv_post_recv(lt->conn.qp, &wr, &bad);
    if (err) {
        fprintf(stderr, "%s server: ibv_post_recv: %s\n", lt->prog, strerror(err));
        return LT_EXIT_ERROR;
    }
    return 0;
}

/* Tell the sender how many messages are consumed (or LT_ABORT). */
static int lt_send_credit(struct lt *lt, uint64_t consumed, bool last)
{
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    size_t src = lt->credit_off;
    if (consumed == LT_ABORT)
        src = lt->credit_off + 8;
    else
        memcpy(lt->conn.buf + src, &consumed, 8);
    lt_word_wr(lt, &wr, &sge, src, lt->credit_off);
    if (lt->o.credits == LT_CREDITS_SEND) {
        wr.opcode = IBV_WR_SEND;
        wr.wr.rdma.remote_addr = 0;
        wr.wr.rdma.rkey = 0;
    }
    return lt_post(lt, &wr, 1, last);
}

/* What the receiver saw of one message. */
struct lt_seen {
    uint64_t seq; /* the message it expected (or the CQE named) */
    uint32_t slot, size;
    enum lt_check check;
    uint32_t seq_got, len_got, csum_stored, csum_computed;
    int flag_got;     /* -1 if the protocol has no flag */
    char cqe_why[96]; /* LT_BAD_CQE: what was wrong */
};

/* Check the message in `m` (it should be message s->seq of s->size bytes). */
static enum lt_check lt_validate(const struct lt *lt, const uint8_t *m, struct lt_seen *s)
{
    s->seq_got = lt_get32(m);
    s->len_got = lt_get32(m + 4);
    s->csum_stored = lt_get32(m + 8);
    s->csum_computed = lt_checksum(m, s->size);
    s->flag_got = lt->p->flag_last ? m[s->size - 1] : -1;
    if (s->seq_got != (uint32_t)s->seq)
        return LT_BAD_SEQ;
    if (s->len_got != s->size)
        return LT_BAD_LEN;
    if (s->csum_computed != s->csum_stored)
        return LT_BAD_CSUM;
    if (lt->p->flag_last && s->flag_got != lt_flag(s->seq))
        return LT_BAD_FLAG;
    return LT_OK;
}

/* Report the first violation: one line on stderr, one order_violation row,
 * then stop the sender.  Returns LT_EXIT_VIOLATION. */
static int lt_violation(struct lt *lt, const uint8_t *m, const struct lt_seen *s)
{
    uint64_t t_ns = host_now_ns();
    uint32_t landed = 0; /* bytes equal to what the sender wrote */
    int64_t first_bad = -1;
    lt_fill(lt->expect, s->seq, s->size, lt->p->flag_last);
    for (uint32_t j = 0; j < s->size; j++) {
        if (m[j] == lt->expect[j])
            landed++;
        else if (first_bad < 0)
            first_bad = j;
    }
    char what[160];
    switch (s->check) {
    case LT_BAD_SEQ:
        snprintf(what, sizeof(what), "sequence number is %" PRIu32 ", expected %" PRIu64,
                 s->seq_got, s->seq);
        break;
    case LT_BAD_LEN:
        snprintf(what, sizeof(what), "length field is %" PRIu32 ", expected %" PRIu32, s->len_got,
                 s->size);
        break;
    case LT_BAD_CSUM:
        snprintf(what, sizeof(what),
                 "checksum of the bytes is 0x%08" PRIx32 ", the sender's 0x%08" PRIx32,
                 s->csum_computed, s->csum_stored);
        break;
    case LT_BAD_FLAG:
        snprintf(what, sizeof(what), "flag byte is 0x%02x, expected 0x%02x", s->flag_got,
                 lt_flag(s->seq));
        break;
    case LT_MISSING:
        snprintf(what, sizeof(what),
                 "message %" PRIu64 " never arrived (nothing for %" PRIu64 " us)", s->seq,
                 lt->o.timeout_us);
        break;
    case LT_BAD_CQE:
    case LT_OK:
        snprintf(what, sizeof(what), "%s", s->cqe_why);
        break;
    }
    fprintf(stderr,
            "%s server: VIOLATION: %s message %" PRIu64 " (slot %" PRIu32 ", %" PRIu32
            " bytes): bad %s: %s; %" PRIu32 " of %" PRIu32 " bytes were as sent (t=%" PRIu64
            " ns)\n",
            lt->prog, lt->p->name, s->seq, s->slot, s->size, lt_check_names[s->check], what, landed,
            s->size, t_ns);
    struct host_kv kv[] = {
        {"message", (double)s->seq},
        {"slot", (double)s->slot},
        {"size_bytes", (double)s->size},
        {"check", (double)s->check},
        {"seq_got", (double)s->seq_got},
        {"len_got", (double)s->len_got},
        {"checksum_stored", (double)s->csum_stored},
        {"checksum_computed", (double)s->csum_computed},
        {"bytes_as_sent", (double)landed},
        {"first_bad_byte", (double)first_bad},
        {"t_ns", (double)t_ns},
    };
    host_report("order_violation", kv, sizeof(kv) / sizeof(kv[0]));
    /* Stop the sender (it waits for credits) and wait for that WRITE. */
    if (lt_send_credit(lt, LT_ABORT, true) == 0)
        lt_drain(lt);
    return LT_EXIT_VIOLATION;
}

/* --timeout-us: how long the receiver has waited for message base + 1. */
struct lt_wait {
    uint64_t since_ns; /* the last progress */
    bool resent;       /* the credit was re-sent during this wait */
};

/* One turn of the receiver's wait for message base + 1: 0 to keep waiting,
 * -1 when --timeout-us passed without progress (the message is lost), or
 * an exit code.  Half-way it re-sends the credit for `base` once: credits
 * are cumulative, and on UC a lost credit would stall the sender. */
static int lt_wait_tick(struct lt *lt, struct lt_wait *w, uint64_t base)
{
    if (lt->o.timeout_us == 0)
        return 0;
    uint64_t waited_ns = host_now_ns() - w->since_ns;
    if (!w->resent && waited_ns > lt->o.timeout_us * 500u) {
        w->resent = true;
        if (base && lt_send_credit(lt, base, false))
            return LT_EXIT_ERROR;
    }
    return waited_ns > lt->o.timeout_us * 1000u ? -1 : 0;
}

/* Wait for the next receive completion and check it names a message the
 * receiver may get now.  Fills s (seq, slot, size) from the completion.
 * -1 when --timeout-us passed without one. */
static int lt_wait_cqe(struct lt *lt, uint64_t base, struct lt_seen *s, bool *bad,
                       struct lt_wait *w)
{
    struct ibv_wc wc;
    int n, t;
    do {
        n = ibv_poll_cq(lt->conn.rcq, 1, &wc);
        if (n == 0 && (t = lt_wait_tick(lt, w, base)) != 0)
            return t;
    } while (n == 0);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", lt->prog);
        return LT_EXIT_ERROR;
    }
    if (lt_wc_ok(lt, &wc, "receive"))
        return LT_EXIT_ERROR;
    *bad = false;
    uint32_t slot = (uint32_t)wc.wr_id;
    uint64_t seq;
    if (lt->p->opcode == IBV_WR_SEND) /* the buffer says which message it holds */
        seq = lt_get32(lt->conn.buf + (size_t)slot * lt->slot_bytes);
    else
        seq = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    s->seq = seq;
    if (seq <= base || seq > base + lt->o.slots || seq > lt->o.messages) {
        /* Not a message the sender may have sent now: name the next one. */
        s->seq = base + 1;
        s->slot = lt_slot_of(&lt->o, s->seq);
        s->size = lt_size_of(&lt->o, s->seq);
        snprintf(s->cqe_why, sizeof(s->cqe_why),
                 "completion names message %" PRIu64 ", outside the window %" PRIu64 "..%" PRIu64,
                 seq, base + 1, base + lt->o.slots);
        *bad = true;
        return 0;
    }
    s->size = lt_size_of(&lt->o, seq);
    if (lt->p->opcode != IBV_WR_SEND)
        slot = lt_slot_of(&lt->o, seq);
    s->slot = slot;
    if (wc.opcode != lt->p->recv_wc_op) {
        snprintf(s->cqe_why, sizeof(s->cqe_why), "completion opcode %d, expected %d",
                 (int)wc.opcode, (int)lt->p->recv_wc_op);
        *bad = true;
    } else if (wc.byte_len != s->size) {
        snprintf(s->cqe_why, sizeof(s->cqe_why),
                 "completion byte_len %" PRIu32 ", expected %" PRIu32, wc.byte_len, s->size);
        *bad = true;
    } else if (lt->got[lt_slot_of(&lt->o, seq)] == seq) {
        snprintf(s->cqe_why, sizeof(s->cqe_why), "message %" PRIu64 " completed twice", seq);
        *bad = true;
    }
    return 0;
}

static int lt_run_server(struct lt *lt)
{
    const struct lt_opts *o = &lt->o;
    uint64_t base = 0, bytes = 0; /* messages consumed in sequence */
    uint64_t out_of_order = 0;    /* CQE protocols: completions ahead of the next message */
    uint32_t credit_every = o->slots / 2 ? o->slots / 2 : 1;
    struct lt_wait w = {.since_ns = host_now_ns()};
    int rc;
    while (base < o->messages) {
        struct lt_seen s = {.seq = base + 1, .flag_got = -1};
        rc = 0;
        s.slot = lt_slot_of(o, s.seq);
        s.size = lt_size_of(o, s.seq);
        bool bad_cqe = false;
        uint8_t *m = lt->conn.buf + (size_t)s.slot * lt->slot_bytes;
        switch (lt->p->notify) {
        case LT_NOTIFY_LAST_BYTE: {
            const volatile uint8_t *flag = m + s.size - 1;
            while (*flag != lt_flag(s.seq) && (rc = lt_wait_tick(lt, &w, base)) == 0)
                lt_relax(lt);
            break;
        }
        case LT_NOTIFY_HEADER:
            while (lt_get32(m) != (uint32_t)s.seq && (rc = lt_wait_tick(lt, &w, base)) == 0)
                lt_relax(lt);
            break;
        case LT_NOTIFY_BELL: {
            const volatile uint64_t *bell =
                (const volatile uint64_t *)(void *)(lt->conn.buf + lt->bells_off +
                                                    8 * (size_t)s.slot);
            while (*bell != s.seq && (rc = lt_wait_tick(lt, &w, base)) == 0)
                lt_relax(lt);
            break;
        }
        case LT_NOTIFY_CQE:
            if ((rc = lt_wait_cqe(lt, base, &s, &bad_cqe, &w)) != 0)
                break;
            m = lt->conn.buf + (size_t)s.slot * lt->slot_bytes;
            if (s.seq != base + 1) {
                out_of_order++;
                /* send-in-order takes the completion as message base + 1 */
                if (lt->p->in_order && !bad_cqe) {
                    s.seq = base + 1;
                    s.size = lt_size_of(o, s.seq);
                }
            }
            break;
        }
        if (rc > 0)
            return rc;
        if (rc < 0) { /* --timeout-us: message base + 1 is lost */
            s.check = LT_MISSING;
            return lt_violation(lt, m, &s);
        }
        w = (struct lt_wait){.since_ns = host_now_ns()};
        /* The notification is seen: everything the sender wrote before it
         * must be visible now (on real hardware: no load before this fence
         * may be satisfied early). */
        atomic_thread_fence(memory_order_acquire);
        s.check = bad_cqe ? LT_BAD_CQE : lt_validate(lt, m, &s);
        if (s.check != LT_OK)
            return lt_violation(lt, m, &s);
        bytes += s.size;
        memset(m, 0, s.size); /* nothing of this message may pass for a later one */
        if (lt->p->notify == LT_NOTIFY_CQE) {
            lt->got[lt_slot_of(o, s.seq)] = s.seq; /* by window position, not buffer */
            if ((rc = lt_post_recv(lt, s.slot)) != 0)
                return rc;
            uint64_t before = base;
            while (base < o->messages && lt->got[lt_slot_of(o, base + 1)] == base + 1)
                base++;
            if (base / credit_every == before / credit_every && base != o->messages)
                continue;
        } else {
            base++;
            if (base % credit_every && base != o->messages)
                continue;
        }
        if ((rc = lt_send_credit(lt, base, base == o->messages)) != 0)
            return rc;
    }
    if ((rc = lt_drain(lt)) != 0)
        return rc;
    struct host_kv kv[] = {
        {"messages_checked", (double)base},
        {"bytes_checked", (double)bytes},
        {"violations", 0.0},
        {"messages_out_of_order", (double)out_of_order},
    };
    host_report("order_check", kv, sizeof(kv) / sizeof(kv[0]));
    if (o->verbose)
        printf("%s server: %s: %" PRIu64 " messages, %" PRIu64 " bytes, all valid\n", lt->prog,
               lt->p->name, base, bytes);
    return 0;
}

/* ------------------------------------------------------------ sender */

/* --credits=send: receive i of the client's credit receives. */
static int lt_post_credit_recv(struct lt *lt, uint32_t i)
{
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(lt->conn.buf + lt->crecv_off + 8 * i),
                          .length = 8,
                          .lkey = lt->conn.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    int err = ibv_post_recv(lt->conn.qp, &wr, &bad);
    if (err) {
        fprintf(stderr, "%s client: ibv_post_recv: %s\n", lt->prog, strerror(err));
        return LT_EXIT_ERROR;
    }
    return 0;
}

/* --credits=send: take the credits that arrived into the credit word.
 * They may arrive in any order (EFA SRD): the word keeps the largest, or
 * the abort marker. */
static int lt_poll_credits(struct lt *lt)
{
    struct ibv_wc wc[LT_POLL_BATCH];
    int n = ibv_poll_cq(lt->conn.rcq, LT_POLL_BATCH, wc);
    if (n < 0) {
        fprintf(stderr, "%s: ibv_poll_cq failed\n", lt->prog);
        return LT_EXIT_ERROR;
    }
    uint8_t *word = lt->conn.buf + lt->credit_off;
    for (int i = 0; i < n; i++) {
        if (lt_wc_ok(lt, &wc[i], "credit receive"))
            return LT_EXIT_ERROR;
        uint32_t r = (uint32_t)wc[i].wr_id;
        uint64_t v, cur;
        memcpy(&v, lt->conn.buf + lt->crecv_off + 8 * (size_t)r, 8);
        memcpy(&cur, word, 8);
        if (v == LT_ABORT || (cur != LT_ABORT && v > cur))
            memcpy(word, &v, 8);
        if (lt_post_credit_recv(lt, r))
            return LT_EXIT_ERROR;
    }
    return 0;
}

static int lt_run_client(struct lt *lt)
{
    const struct lt_opts *o = &lt->o;
    const volatile uint64_t *credit =
        (const volatile uint64_t *)(void *)(lt->conn.buf + lt->credit_off);
    int rc;
    for (uint64_t k = 0; k < o->messages; k++) {
        uint64_t i = k; /* the message posted k-th */
        if (o->swap_pairs && (k ^ 1) < o->messages)
            i = k ^ 1;
        uint64_t seq = i + 1, c, since_ns = host_now_ns();
        while ((c = *credit) != LT_ABORT && i - c >= o->slots) {
            if (o->credits == LT_CREDITS_SEND) {
                if ((rc = lt_poll_credits(lt)) != 0)
                    return rc;
            } else {
                lt_relax(lt);
            }
            /* --timeout-us: the receiver reports a lost message after one
             * timeout; give up after two (its abort may be lost too). */
            if (o->timeout_us && host_now_ns() - since_ns > 2000u * o->timeout_us) {
                fprintf(stderr, "%s client: no credit for %" PRIu64 " us, stopping\n", lt->prog,
                        2 * o->timeout_us);
                return 0;
            }
        }
        if (c == LT_ABORT)
            break;
        uint32_t slot = lt_slot_of(o, seq), size = lt_size_of(o, seq);
        size_t off = (size_t)slot * lt->slot_bytes;
        lt_fill(lt->conn.buf + off, seq, size, lt->p->flag_last);

        struct ibv_sge dsge = {.addr = (uint64_t)(uintptr_t)(lt->conn.buf + off),
                               .length = size,
                               .lkey = lt->conn.mr->lkey};
        struct ibv_send_wr data = {.sg_list = &dsge, .num_sge = 1, .opcode = lt->p->opcode};
        if (lt->p->opcode != IBV_WR_SEND) {
            data.wr.rdma.remote_addr = lt->conn.peer.addr + off;
            data.wr.rdma.rkey = lt->conn.peer.rkey;
        }
        if (lt->p->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
            data.imm_data = htonl((uint32_t)seq);
        struct ibv_send_wr bell, *chain = &data;
        struct ibv_sge bsge;
        unsigned n = 1;
        if (lt->p->bell) {
            size_t boff = lt->bells_off + 8 * (size_t)slot;
            memcpy(lt->conn.buf + boff, &seq, 8);
            lt_word_wr(lt, &bell, &bsge, boff, boff);
            if (lt->p->bell_first) { /* the bug: bell, then data */
                bell.next = &data;
                chain = &bell;
            } else {
                data.next = &bell;
            }
            n = 2;
        }
        if ((rc = lt_post(lt, chain, n, k + 1 == o->messages)) != 0)
            return rc;
    }
    /* Stopped by the receiver: WRs may be in flight unsignaled; the final
     * barrier tells the receiver we are done posting. */
    if (*credit == LT_ABORT)
        return 0;
    return lt_drain(lt); /* the last WR was signaled */
}

/* ------------------------------------------------------------ main */

int litmus_main(int argc, char **argv)
{
    struct lt *lt = calloc(1, sizeof(*lt));
    if (!lt)
        return LT_EXIT_ERROR;
    int rc = lt_parse_args(argc, argv, &lt->o);
    if (rc) {
        free(lt);
        return rc < 0 ? 0 : rc;
    }
    lt->prog = argc > 0 && argv[0] ? argv[0] : "litmus";
    rc_conn_init(&lt->conn, lt->prog, lt->o.role, lt->o.name);
    if (lt->o.uc)
        lt->conn.qp_type = IBV_QPT_UC;
    lt->p = &lt_protos[lt->o.proto];
    bool server = lt->o.role == RC_CONN_ROLE_SERVER;

    rc = lt_open(lt);
    if (rc == 0)
        rc = lt_exchange(lt);
    if (rc == 0 && server && lt->p->notify == LT_NOTIFY_CQE)
        for (uint32_t s = 0; rc == 0 && s < lt->o.slots; s++)
            rc = lt_post_recv(lt, s);
    if (rc == 0 && !server && lt->o.credits == LT_CREDITS_SEND)
        for (uint32_t r = 0; rc == 0 && r < LT_CREDIT_RECVS(lt->o.slots); r++)
            rc = lt_post_credit_recv(lt, r);
    if (rc == 0) { /* both QPs are in RTS, receives are posted */
        int peer_rc = rc_conn_barrier(&lt->conn, 0, LT_EXIT_ERROR);
        rc = peer_rc ? LT_EXIT_ERROR : 0;
    }
    if (rc == 0) {
        rc = server ? lt_run_server(lt) : lt_run_client(lt);
        int peer_rc =
            rc_conn_barrier(&lt->conn, rc, LT_EXIT_ERROR); /* peer done before we tear down */
        if (rc == 0 && peer_rc) {
            if (!server && peer_rc == LT_EXIT_VIOLATION)
                fprintf(stderr, "%s client: the server found an ordering violation\n", lt->prog);
            rc = peer_rc;
        }
    }
    lt_close(lt);
    free(lt);
    return rc;
}
