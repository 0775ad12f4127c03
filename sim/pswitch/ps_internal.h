/* What the files of sim/pswitch share: the device, a packet inside it, a
 * pass, registers and tables.  Not for switch programs (pswitch.h). */
#ifndef RNICSIM_PS_INTERNAL_H
#define RNICSIM_PS_INTERNAL_H

#include "pswitch.h"

enum { PS_MAX_STAGES = 32 };
/* The opcode of internal packets (generator, CPU port): not an IBA opcode,
 * so a NIC would drop one a program forgot to rewrite. */
enum { PS_OPCODE_INTERNAL = 0xff };
enum { PS_DIGEST_SLOTS = 1024, PS_DIGEST_MAX_BYTES = 48 };

enum ps_action { PS_ACT_DEFAULT, PS_ACT_FWD, PS_ACT_MCAST, PS_ACT_RECIRC, PS_ACT_DROP };

struct ps_pkt {
    struct ps_pkt *next;
    struct pkt *pkt;
    struct ps_meta meta;
    sim_time_t at_ps;    /* FIFO time: entry, exit or end of serialisation */
    uint32_t wire_bytes; /* on the recirculation port */
    int action;          /* enum ps_action */
    uint32_t out_node;   /* PS_ACT_FWD */
    uint32_t group;      /* PS_ACT_MCAST */
    bool egress_drop;
};

struct ps_fifo {
    struct ps_pkt *head, *tail;
    struct sim_event ev;
};

struct ps_pass {
    struct pswitch *ps;
    struct ps_pkt *pp;
    enum ps_gress gress;
    uint64_t id;    /* unique per pass */
    uint32_t stage; /* highest stage touched so far */
    bool touched;
};

struct ps_reg {
    struct pswitch *ps;
    char *name;
    enum ps_gress gress;
    uint32_t stage, entries, width_bits;
    uint64_t mask;
    uint64_t *cells;
    uint64_t last_pass; /* the pass that touched it last */
    uint64_t accesses;
};

struct ps_table_ent {
    uint64_t key;
    bool used;
    uint8_t *data;
};

struct ps_table {
    struct pswitch *ps;
    char *name;
    enum ps_gress gress;
    uint32_t stage, entries, data_bytes;
    struct ps_table_ent *slots; /* open addressing, cap = power of two >= 2 x entries */
    uint32_t cap, used;
    uint8_t *data; /* entries x data_bytes, slot i -> data + i x data_bytes */
    uint64_t last_pass;
    uint64_t lookups;
};

struct ps_group {
    uint32_t id;
    struct ps_mcast_member *m;
    uint32_t n;
};

struct ps_pktgen {
    struct pswitch *ps;
    uint32_t app;
    sim_time_t period_ps, batch_start;
    uint32_t n, next_pkt;
    bool once; /* ps_pktgen_once: a single batch */
    uint64_t batch;
    struct sim_event ev;
};

struct ps_digest_slot {
    uint32_t len;
    uint8_t data[PS_DIGEST_MAX_BYTES];
};

/* One declared resource, in declaration order. */
struct ps_res_ref {
    struct ps_reg *reg;
    struct ps_table *tbl;
};

struct pswitch {
    struct sim *sim;
    struct fswitch *sw;
    char name[32];
    uint32_t node;
    struct ps_params p;
    struct pkt_pool *pool;
    struct host cpu; /* the control-plane CPU (cpu.device = this) */

    struct ps_dataplane dp;
    void *prog;
    const struct sim_proc *loader; /* the process that loaded the data plane */
    bool unloaded;                 /* its program returned: no data plane again */

    struct ps_fifo ing_wait, ing, eg_wait, eg, recirc;
    sim_time_t ing_next_free, eg_next_free, recirc_free;
    uint64_t recirc_queued;
    struct ps_pkt *pp_free;
    uint64_t pass_seq;

    struct ps_res_ref *res;
    uint32_t n_res;
    uint64_t stage_sram[PS_MAX_STAGES];
    uint32_t stage_salus[PS_MAX_STAGES], stage_tables[PS_MAX_STAGES];

    struct ps_group *groups;
    uint32_t n_groups;
    struct ps_pktgen **pktgen;
    uint32_t n_pktgen;

    struct ps_digest_slot *digests;
    uint32_t digest_head, digest_n;
    struct sim_waitq digest_wq;

    struct sim_rng rng; /* the Random extern (ps_random) */
    struct ps_counters c;
    char error[512];
    char last_error[256];
};

void ps_fail(struct pswitch *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ps_set_last_error(struct pswitch *ps, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ps_cp_charge(struct pswitch *ps);
const struct ps_group *ps_group_find(const struct pswitch *ps, uint32_t group);
void ps_resources_free(struct pswitch *ps);

#endif /* RNICSIM_PS_INTERNAL_H */
