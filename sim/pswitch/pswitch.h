/* A programmable switch (Tofino-class, P4 / TNA-shaped) in the fabric.
 *
 * The device takes over the ingress of an existing fabric switch
 * (switch_set_ingress_hook) and reuses its route table and egress queues
 * (switch_forward), so it is wired into any topology like the fixed switch.
 * What it adds:
 *
 *   front ports --+
 *   recirc port --+--> ingress pipeline --> traffic manager --> egress pipeline --> port queue
 *   pktgen -------+    (one pass: program     (unicast, drop,     (per replica:        (or the
 *   CPU port -----+     on_ingress, stages,    multicast groups    program on_egress)   recirc
 *                       registers, tables)     with replica ids)                        port)
 *
 *  - pipelines: a pass runs the program's ingress (egress) function when the
 *    packet enters, then holds the packet for the pass latency; one packet
 *    enters per pkt_interval_ps.  Payload bytes ride with the packet and are
 *    never copied into switch state.
 *  - stages, register arrays and match-action tables: every array and table
 *    lives in one stage of one pipeline (gress); within a pass a program may
 *    access each array at most once (one read-modify-write, as a stateful
 *    ALU does), apply each table at most once, and only in increasing stage
 *    order.  A program that breaks a rule fails the run with a message
 *    naming the array (a P4 compiler would reject it).
 *  - the traffic manager's packet replication engine copies a packet once
 *    per member (node, replica id) of a multicast group; each copy gets its
 *    own egress pass, where the program sees the replica id and the depth
 *    of the queue the copy will join (enq_qdepth_bytes), so it may mark
 *    ECN from it.
 *  - recirculation: a packet sent to the recirculation port is serialised
 *    at recirc_rate_bps (its frame plus the bridged header bytes) and
 *    enters ingress again.
 *  - the packet generator injects n packets every period (timer
 *    application); the control plane may inject single packets through the
 *    CPU port; the data plane may send digests to the control plane.
 *  - the switch has its own fabric address (node id, hence MAC, IPv4 and
 *    RoCEv2 GID like a NIC), so a host's RC QP can be connected to a QP
 *    number the switch program owns through ordinary verbs.
 *  - the control plane is a program running on the switch's CPU (a struct
 *    host with no NIC): it declares registers and tables, loads the data
 *    plane, writes table entries (each operation costs cp_op_ps of its
 *    time) and talks to hosts out of band.
 *
 * docs/pswitch.md describes the model, its defaults and their sources, and
 * how to write a switch program. */
#ifndef RNICSIM_PSWITCH_H
#define RNICSIM_PSWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../fabric/fabric.h"
#include "../host.h"
#include "../pkt.h"
#include "../sim.h"

struct ps_params {
    uint32_t stages;            /* MAU stages of each pipeline (ingress, egress) */
    uint32_t salus_per_stage;   /* register arrays (stateful ALUs) one stage holds */
    uint32_t tables_per_stage;  /* match-action tables one stage holds */
    uint64_t stage_sram_bytes;  /* register + table memory of one stage */
    sim_time_t ingress_ps;      /* ingress parser + stages + deparser: one pass */
    sim_time_t egress_ps;       /* egress parser + stages + deparser */
    sim_time_t pkt_interval_ps; /* a pipeline takes a new packet at most this often */
    uint64_t recirc_rate_bps;   /* recirculation port */
    uint64_t recirc_buffer_bytes;
    uint64_t pktgen_rate_bps;  /* packet generator port */
    uint32_t pktgen_pkt_bytes; /* frame of a generated / CPU-injected packet */
    sim_time_t cp_op_ps;       /* one control-plane operation (table entry, register, group) */
};

/* Tofino-1-like defaults; each field's source is in pswitch.c. */
void ps_params_default(struct ps_params *p);

enum ps_gress { PS_INGRESS, PS_EGRESS };

/* Where a packet entered ingress (ps_meta.ingress_port): a front port is
 * the fabric node it came from; the internal ports are these. */
#define PS_PORT_RECIRC 0xfffffff0u
#define PS_PORT_PKTGEN 0xfffffff1u
#define PS_PORT_CPU 0xfffffff2u

/* Bytes of the program-defined header a packet carries between passes
 * (bridged metadata; recirculated packets carry it on the wire). */
#define PS_BRIDGE_MAX_BYTES 48

/* Intrinsic metadata of a packet in a pass, and the bridged header. */
struct ps_meta {
    uint32_t ingress_port; /* node id of a front port, or PS_PORT_* */
    sim_time_t ingress_ps; /* when it entered this ingress pass */
    uint32_t recirculated; /* passes through the recirculation port so far */
    uint32_t pktgen_app;   /* PS_PORT_PKTGEN: the timer application */
    uint64_t pktgen_batch; /* ... the period number (0, 1, ...) */
    uint32_t pktgen_pkt;   /* ... the packet within the batch, 0..n-1 */
    uint32_t rid;          /* egress: replica id (0 for unicast) */
    /* egress: bytes queued on the port this packet will leave by (the
     * recirculation port's for a recirculating packet) when its egress
     * pass starts -- Tofino's enq_qdepth (docs/pswitch.md "Queue depth") */
    uint64_t enq_qdepth_bytes;
    uint32_t bridge_bytes; /* wire size of `bridge` when recirculated (set by the program) */
    uint8_t bridge[PS_BRIDGE_MAX_BYTES];
};

struct pswitch;
struct ps_pass; /* one packet's traversal of one pipeline */
struct ps_reg;
struct ps_table;

/* ---------------------------------------------------------------- data plane */

typedef void (*ps_pipe_fn)(struct ps_pass *x, struct pkt *p, void *prog);

/* A data-plane program: called once per pass with the packet's headers
 * (struct pkt: the parsed RoCEv2 headers; rewrite them in place, the
 * payload is never to be touched except where a header is inserted, see
 * ps_roce_set_inline).  `prog` is the pointer given to ps_load. */
struct ps_dataplane {
    const char *name;
    ps_pipe_fn ingress; /* required */
    ps_pipe_fn egress;  /* optional */
};

/* Register actions: what one stateful ALU does to one cell (P4
 * RegisterAction.apply): read, update in place, return one value.  Keep it
 * to compare / add / subtract / min / max / select. */
typedef uint64_t (*ps_reg_action)(uint64_t *cell, const void *arg);

uint64_t ps_reg_exec(struct ps_pass *x, struct ps_reg *r, uint32_t idx, ps_reg_action fn,
                     const void *arg);
uint64_t ps_reg_read(struct ps_pass *x, struct ps_reg *r, uint32_t idx);
void ps_reg_write(struct ps_pass *x, struct ps_reg *r, uint32_t idx, uint64_t v);
/* The Random extern: 64 uniformly distributed bits from the switch's own
 * stream (named after the switch, so a seed gives the same draws). */
uint64_t ps_random(struct ps_pass *x);
/* Exact-match lookup: the entry's action data, or NULL on a miss. */
const void *ps_table_apply(struct ps_pass *x, struct ps_table *t, uint64_t key);

struct ps_meta *ps_pass_meta(struct ps_pass *x);
enum ps_gress ps_pass_gress(const struct ps_pass *x);
sim_time_t ps_pass_now(const struct ps_pass *x);
struct pswitch *ps_pass_switch(const struct ps_pass *x);

/* Ingress decisions (the last one taken wins; without one a packet for
 * another node is forwarded to its dst_node, one for the switch itself is
 * dropped and counted as unhandled).  The egress port is fixed once the
 * packet leaves ingress: in egress only ps_drop is allowed, and a program
 * that changes pkt->dst_node there fails the run. */
void ps_fwd(struct ps_pass *x, uint32_t node); /* unicast; sets pkt->dst_node */
void ps_mcast(struct ps_pass *x, uint32_t group);
void ps_recirc(struct ps_pass *x);
void ps_drop(struct ps_pass *x);
/* A small message to the control plane (TNA digest), in addition to the
 * decision.  Dropped (and counted) when the CPU queue is full. */
void ps_digest(struct ps_pass *x, const void *data, size_t len);

/* ---------------------------------------------------------------- RoCEv2 header helpers */

/* Set the opcode and the headers it implies (extension headers, frame
 * size from the payload length): IBA opcode table of sim/nic/opcode.h. */
void ps_roce_set_opcode(struct pkt *p, uint8_t opcode);
/* Replace the payload by `len` bytes that the deparser emits (a pointer
 * value written by the switch); the frame size follows.  The bytes go in a
 * buffer from the switch's packet pool (pkt_payload_reserve). */
void ps_roce_set_inline(struct pswitch *ps, struct pkt *p, const void *data, uint32_t len);
/* The RDMA WRITE opcode a READ RESPONSE opcode becomes (FIRST -> FIRST,
 * MIDDLE -> MIDDLE, LAST -> LAST, ONLY -> ONLY); -1 if not a response. */
int ps_roce_resp_to_write(uint8_t opcode);
/* Address a packet the switch sends: source = the switch, destination
 * node and QP, PSN; UDP source port from the QP pair as RoCEv2 NICs do. */
void ps_roce_address(struct pswitch *ps, struct pkt *p, uint32_t dst_node, uint32_t dest_qpn,
                     uint32_t src_qpn, uint32_t psn);
/* The BTH opcode of a RoCEv2 congestion notification packet (IBA Annex
 * A17.9.3), which the NICs' DCQCN notification points send (the NIC's own
 * constant; roce.c checks that they agree). */
#define PS_ROCE_OPCODE_CNP 0x81u

/* ---------------------------------------------------------------- device */

struct pswitch *ps_create(struct sim *sim, struct fswitch *sw, uint32_t node_id,
                          const struct ps_params *p, const struct host_cpu_params *cpu,
                          struct pkt_pool *pool);
void ps_destroy(struct pswitch *ps);
const struct ps_params *ps_get_params(const struct pswitch *ps);
uint32_t ps_node_id(const struct pswitch *ps);
const char *ps_name(const struct pswitch *ps);
/* The switch CPU (runs the control-plane program). */
struct host *ps_cpu(struct pswitch *ps);
/* The switch whose CPU runs the calling process, or NULL. */
struct pswitch *ps_current(void);
/* The first program error (a broken pipeline rule), or NULL. */
const char *ps_error(const struct pswitch *ps);

/* ---------------------------------------------------------------- control plane */

/* Declarations, before ps_load: NULL with errno (EBUSY after load, EINVAL
 * bad stage / size, ENOSPC stage full or out of SRAM, EEXIST name) and the
 * reason in ps_last_error(). */
struct ps_reg *ps_reg_declare(struct pswitch *ps, const char *name, enum ps_gress g, uint32_t stage,
                              uint32_t entries, uint32_t width_bits);
struct ps_table *ps_table_declare(struct pswitch *ps, const char *name, enum ps_gress g,
                                  uint32_t stage, uint32_t entries, uint32_t data_bytes);
const char *ps_last_error(const struct pswitch *ps);
/* Install the data plane; -1 EBUSY if one is (or was) loaded: one per run.
 * `prog` (the program's state) must live until ps_unload; the data plane
 * is unloaded when the process that loaded it returns (ps_proc_exit). */
int ps_load(struct pswitch *ps, const struct ps_dataplane *dp, void *prog);
/* Remove the data plane: the packet generator stops, the switch forwards
 * like a fixed one and drops what is addressed to it (unhandled). */
void ps_unload(struct pswitch *ps);
/* A process ended (the runner calls it for every program): if it loaded
 * the data plane, unload it (its state is about to be freed). */
void ps_proc_exit(struct pswitch *ps, const struct sim_proc *proc);

/* Control-plane operations (each costs cp_op_ps of the calling process's
 * time; free outside a process).  0 or -1 with errno. */
int ps_table_add(struct ps_table *t, uint64_t key, const void *data); /* ENOSPC full */
int ps_table_del(struct ps_table *t, uint64_t key);                   /* ENOENT */
int ps_reg_set(struct ps_reg *r, uint32_t idx, uint64_t v);           /* EINVAL idx */
uint64_t ps_reg_get(struct ps_reg *r, uint32_t idx);
/* A cell's value for a program's end-of-run report (a measurement, not a
 * switch operation: free, and nothing a control plane could act on). */
uint64_t ps_reg_peek(const struct ps_reg *r, uint32_t idx);
struct ps_mcast_member {
    uint32_t node; /* egress: the port towards this node, or PS_PORT_RECIRC: the copy
                    * goes through egress (seeing its rid), then around to ingress */
    uint32_t rid;  /* replica id seen by the egress program */
};
int ps_mcast_set(struct pswitch *ps, uint32_t group, const struct ps_mcast_member *m, uint32_t n);
/* Packet generator timer application: every period_ps from now (first
 * batch after one period), n packets enter ingress from PS_PORT_PKTGEN,
 * spaced at the generator port's rate.  Enabling an enabled app restarts
 * it. */
int ps_pktgen_enable(struct pswitch *ps, uint32_t app, sim_time_t period_ps, uint32_t n);
int ps_pktgen_disable(struct pswitch *ps, uint32_t app);
/* One batch of n packets of application `app`, starting now. */
int ps_pktgen_once(struct pswitch *ps, uint32_t app, uint32_t n);
/* One packet from the CPU port carrying `bridge` (len <= PS_BRIDGE_MAX_BYTES). */
int ps_inject(struct pswitch *ps, const void *bridge, uint32_t len);
/* Wait for a digest (blocking the calling process, at most until
 * `deadline_ps`): its length, 0 on timeout; at most `cap` bytes copied. */
size_t ps_digest_recv(struct pswitch *ps, void *buf, size_t cap, sim_time_t deadline_ps);

/* ---------------------------------------------------------------- counters */

struct ps_counters {
    uint64_t ingress_passes, egress_passes;
    uint64_t recirculations, recirc_bytes, recirc_drops, recirc_max_queue_bytes;
    uint64_t pktgen_pkts, cpu_pkts;
    uint64_t replicas;      /* copies made by the replication engine */
    uint64_t program_drops; /* packets the program dropped */
    uint64_t unhandled;     /* packets for the switch itself with no program decision */
    uint64_t reg_accesses, table_lookups, table_hits;
    uint64_t digests, digest_drops;
    uint64_t cp_ops;
};
const struct ps_counters *ps_get_counters(const struct pswitch *ps);

/* Resource use, for results: arrays and tables in declaration order. */
struct ps_resource {
    const char *name;
    bool table;
    enum ps_gress gress;
    uint32_t stage, entries, width_bits; /* tables: width_bits = 8 x data bytes */
    uint64_t sram_bytes, accesses;
    uint32_t used; /* tables: entries installed */
};
uint32_t ps_n_resources(const struct pswitch *ps);
void ps_resource(const struct pswitch *ps, uint32_t i, struct ps_resource *out);

#endif /* RNICSIM_PSWITCH_H */
