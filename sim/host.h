/* A simulated host: CPU cost model, the processes (programs) it runs, its
 * memory (real memory of the simulator process) and its RNIC.
 *
 * Memory visibility: every DMA write the NIC performs into host memory
 * (payload, CQE) calls host_dma_landed() at the simulated instant the data
 * become visible; that wakes processes parked in host_relax().  Every CQE
 * additionally calls host_cqe_landed(), waking processes parked in an empty
 * ibv_poll_cq().
 *
 * The host model proper (docs/host.md) is in sim/host/: the CPUs
 * (sockets, cores, hyper-threads, the threads pinned to them, time slices,
 * OS interruptions: cpu.c) that every CPU cost of a thread goes through,
 * and the memory (NUMA placement, the cache-line state between the CPUs
 * and the NIC's DMA, the inter-socket link the NIC's DMA may cross:
 * mem.c). */
#ifndef RNICSIM_HOST_H
#define RNICSIM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "noise.h"
#include "sim.h"

struct nic;
struct host;
struct host_vcpu;
struct host_mem;

/* Limits of the topology parameters (docs/host.md). */
#define HOST_MAX_SOCKETS 8u
#define HOST_MAX_CORES 254u /* sockets x cores_per_socket: a line's owner is a byte */

/* Sockets, cores, hyper-threads and the OS scheduler (docs/host.md "CPUs").
 * Each default's source is in sim/host/cpu.c. */
struct host_topo_params {
    uint32_t sockets;          /* NUMA nodes, 1..HOST_MAX_SOCKETS */
    uint32_t cores_per_socket; /* physical cores per socket */
    uint32_t threads_per_core; /* hardware threads per core: 1, or 2 (hyper-threading) */
    uint32_t nic_socket;       /* the socket the NIC's PCIe root port is on */
    /* Each of two hyper-threads of one core that are both busy runs at
     * this fraction (per mille) of the core's one-thread speed. */
    uint32_t ht_share_permil;
    /* Time slices of threads sharing one hardware thread (Linux CFS): each
     * of n runnable threads gets max(sched_latency / n, min_granularity). */
    sim_time_t sched_latency_ps;
    sim_time_t sched_min_gran_ps;
    sim_time_t ctx_switch_ps; /* switching a hardware thread to another thread */
    uint32_t os_noise;        /* interruptions of every CPU: a periodic noise preset, 0 = none */
};

/* Caches, memory and NUMA (docs/host.md "Memory").  Latencies are of one
 * 64 B line; each default's source is in sim/host/mem.c. */
struct host_mem_params {
    uint64_t l1_bytes, l2_bytes; /* a core's private caches */
    uint64_t llc_bytes;          /* a socket's shared last-level cache */
    sim_time_t l1_ps, l2_ps, llc_ps;
    sim_time_t dram_ps;         /* memory of the core's own socket */
    sim_time_t c2c_ps;          /* a line another core of the socket has modified */
    uint32_t mlp;               /* misses one core has outstanding at once (fill buffers) */
    bool ddio;                  /* NIC writes allocate into the NIC socket's LLC */
    uint64_t ddio_bytes;        /* how much of the LLC such writes may use */
    sim_time_t remote_dram_ps;  /* memory of the other socket */
    sim_time_t remote_cache_ps; /* a line in the other socket's caches */
    sim_time_t dma_hop_ps;      /* NIC DMA to / from the other socket: one link traversal */
    uint64_t socket_link_bps;   /* the inter-socket link, per direction */
    /* a core's data TLBs (sim/host/tlb.c): entries of the first level for
     * 4 KiB and for 2 MiB pages, of the second level (both sizes) */
    uint32_t tlb_l1_4k, tlb_l1_2m, tlb_stlb;
    sim_time_t tlb_stlb_hit_ps; /* a first-level miss found in the second level */
    sim_time_t tlb_walk_ps;     /* a page walk, its page-table line in the L2 or nearer */
};

/* The verbs provider whose ibv_post_send costs are modelled
 * (host.cpu.provider; verbs_shim/post.c decides per post). */
enum host_post_provider {
    HOST_PROVIDER_MLX5 = 0, /* rdma-core providers/mlx5: ConnectX-4 and later */
    HOST_PROVIDER_MLX4 = 1, /* rdma-core providers/mlx4 (libmlx4): ConnectX-3 */
    /* MLNX_OFED's libmlx4: prefer_bf on unless MLX4_POST_SEND_PREFER_BF=0,
     * so any single WR whose WQE fits goes through BlueFlame */
    HOST_PROVIDER_MLX4_OFED = 2,
};
extern const char *const host_post_provider_names[]; /* "mlx5", "mlx4", "mlx4-ofed", NULL */

/* CPU time charged for verbs calls and declared work (host profile), and
 * the host's topology and memory.  Each default's source is in host.c,
 * sim/host/cpu.c and sim/host/mem.c. */
struct host_cpu_params {
    sim_time_t post_send_ps;     /* ibv_post_send, per call (barrier + doorbell store): latency */
    sim_time_t post_send_wqe_ps; /* ibv_post_send, per WR (building and writing the WQE) */
    /* Occupancy, not latency: after a doorbell (or BlueFlame) MMIO store the
     * thread's write-combining path drains for this long; the thread's next
     * doorbell waits until it has (sim/host.c, host_doorbell). */
    sim_time_t doorbell_gap_ps;
    /* BlueFlame posts (one inline WR) of all threads of one verbs context
     * take one spin lock around the copy and the drain (libmlx4, the
     * ConnectX-3 provider: ctx->bf_lock); false: per thread (mlx5 gives
     * each QP's thread its own BlueFlame register). */
    bool bf_lock_context;
    /* BlueFlame registers of their own that a verbs context hands to its
     * first QPs (MLNX_OFED's libmlx4: 7); those QPs' posts take no lock */
    uint32_t bf_dedicated;
    /* The verbs provider whose post path is charged (host_post_provider):
     * mlx5 writes every post's doorbell through the write-combining
     * BlueFlame register and flushes it (doorbell_gap_ps); mlx4 (libmlx4,
     * ConnectX-3) does that only for a single BlueFlame-eligible WR and
     * rings an uncached doorbell store for the rest (uc_doorbell_gap_ps). */
    uint32_t post_provider;
    /* Occupancy of that uncached doorbell store (mlx4 provider only): the
     * thread's next doorbell waits this long after it. */
    sim_time_t uc_doorbell_gap_ps;
    sim_time_t post_recv_ps;     /* ibv_post_recv, per WR */
    sim_time_t poll_cq_ps;       /* one ibv_poll_cq call */
    sim_time_t poll_cqe_ps;      /* extra per CQE returned */
    sim_time_t control_verb_ps;  /* create/modify/destroy/reg_mr (non data path) */
    sim_time_t mr_pin_page_ps;   /* ibv_reg_mr: pinning one page of the region */
    sim_time_t mr_unpin_page_ps; /* ibv_dereg_mr: unpinning one page */
    uint64_t memcpy_bytes_per_s; /* host_memcpy cost */
    sim_time_t wakeup_ps;        /* a parked poller notices new data (median) */
    uint32_t wakeup_noise;       /* its variation: a noise preset (sim/noise.h), 0 = none */
    /* The simulated POSIX layer of programs loaded from shared objects
     * (posix/, docs/user-programs.md) */
    sim_time_t clock_read_ps; /* clock_gettime / gettimeofday / time */
    sim_time_t tsc_read_ps;   /* an rdtsc / rdtscp instruction */
    sim_time_t syscall_ps;    /* any other system call (sockets, sleep, poll entry) */
    sim_time_t lock_ps;       /* an uncontended pthread mutex lock + unlock */
    /* The management network (TCP sockets between hosts): one-way latency
     * of a segment and the rate it is serialised at */
    sim_time_t mgmt_latency_ps;
    uint64_t mgmt_rate_bps;
    struct host_topo_params topo;
    struct host_mem_params mem;
};

void host_cpu_params_default(struct host_cpu_params *p);
/* Cross-parameter checks (nic_socket < sockets, ...): 0, or -1 with a
 * message "host.x: why" in `why`. */
int host_params_check(const struct host_cpu_params *p, char *why, size_t why_len);

/* What the host model counted (results JSON "counters.hosts.<h>.host"). */
struct host_counters {
    uint64_t ht_shared_ps;     /* CPU work done while the sibling hyper-thread was busy */
    uint64_t slice_waits;      /* a thread waited for its time slice */
    uint64_t slice_wait_ps;    /* ... for this long in all */
    uint64_t ctx_switches;     /* time-slice rotations and switches after a block */
    uint64_t os_stalls_ps;     /* CPU time taken by OS interruptions from charged work */
    uint64_t lines_touched;    /* cache lines read or written through host_touch / host_memcpy */
    uint64_t lines_hit;        /* ... that were in the core's L1 or L2 */
    uint64_t lines_dma_miss;   /* ... last written by the NIC (LLC with DDIO, else memory) */
    uint64_t lines_c2c;        /* ... held by another core */
    uint64_t lines_remote;     /* ... served by the other socket (memory or caches) */
    uint64_t tlb_l1_misses;    /* pages those accesses translated outside the DTLB */
    uint64_t tlb_walks;        /* ... and outside the STLB: page walks */
    uint64_t dma_remote;       /* NIC DMA operations to / from the other socket's memory */
    uint64_t dma_link_wait_ps; /* ... time they queued for the inter-socket link */
};

struct host {
    struct sim *sim;
    uint32_t id;
    char name[32];
    struct host_cpu_params cpu;
    struct nic *nic;
    /* The device this host is the CPU of when it is not a server (the
     * control-plane CPU of a programmable switch, sim/pswitch), else NULL. */
    void *device;
    struct sim_waitq relax_wq; /* host_relax(): woken by any DMA write / CQE / local proc */
    struct sim_waitq cqe_wq;   /* empty ibv_poll_cq(): woken by any CQE on this host */
    /* poll()/select()/epoll_wait() of the simulated POSIX layer (posix/):
     * woken whenever a file descriptor of this host may have become ready
     * (a socket segment arrived, a completion or async event was queued) */
    struct sim_waitq fd_wq;
    uint64_t dma_writes_landed, cqes_landed;
    /* Changes a parked thread could observe: DMA writes and CQEs landed and
     * CPU time charged by any thread of the host (host_park compares). */
    uint64_t activity_gen;
    /* The least time an action of a process on another host takes to
     * change what a process here observes without calling into the
     * simulator (sim_horizon; host_charge_soon).  0: no lookahead. */
    sim_time_t lookahead_ps;
    struct noise wakeup_noise; /* draws for cpu.wakeup_ps (stream "noise/wakeup/<name>") */
    /* sim/host/cpu.c: the hardware threads, created with the first thread */
    struct host_vcpu *vcpus;
    uint32_t nvcpus;
    uint32_t n_remote_threads; /* live threads on a socket other than the NIC's */
    bool hugepages;            /* all memory on 2 MiB pages (host.hugepages), else per range */
    /* sim/host/mem.c: NUMA placement and cache-line state (NULL until a
     * program first allocates on a socket, touches or copies memory) */
    struct host_mem *mem;
    struct host_counters cnt;
    uint32_t n_threads; /* threads spawned so far (host_thread.tl_index) */
};

/* Per-process state of a program running on a host (the sim_proc user
 * pointer).  The poll heuristic: an empty ibv_poll_cq of a CQ the same
 * thread already polled empty with no other verbs or host_* call in between
 * (`other_calls` unchanged) is a spin loop, so the thread
 * parks on host->relax_wq until something it could observe changes, then
 * is charged the elapsed time in one step. */
#define HOST_EMPTY_CQS_MAX 8 /* CQs one polling loop may alternate between */

/* A thread and its CPU (sim/host/cpu.c). */
enum host_cpu_state {
    HOST_CPU_OFF,   /* blocked in the kernel, or finished: needs no CPU */
    HOST_CPU_READY, /* runnable, waiting for its hardware thread (time slice) */
    HOST_CPU_ON,    /* holds its hardware thread (computing, spinning or between calls) */
};

struct host_thread {
    struct host *host;
    void *program;            /* owned by the runner (tools/rnicsim) */
    uint64_t other_calls;     /* verbs / host_* calls other than poll_cq */
    uint64_t empty_poll_mark; /* other_calls + 1 when empty_cqs was started; 0 = none */
    /* CQs polled empty since then (no other call in between): a loop that
     * polls several CQs has spun once it comes back to one of them. */
    const void *empty_cqs[HOST_EMPTY_CQS_MAX];
    unsigned n_empty_cqs;
    char why[128];         /* blocking point shown in deadlock reports */
    sim_time_t db_free_ps; /* host_doorbell: the thread's MMIO path is free from then */
    /* Lost-wakeup guard: host->activity_gen when this thread last looked at
     * memory or a CQ (a poll, or waking from host_park), and how many of the
     * increments since were its own charges.  If anything else changed since
     * (a CQE landed while its poll was being charged), host_park returns at
     * once instead of parking: the thread has not seen it yet. */
    uint64_t seen_gen, own_gen;
    /* Nothing but waiting since the thread last woke from a park: empty
     * polls (host_charge_private) and parks.  Such a thread changed nothing
     * a sibling could be waiting for, so parking it wakes nobody; without
     * this, idle threads of one host kept waking each other at every poll
     * and none ever parked (docs/huang.md "Simulator speed"). */
    bool quiet;
    /* CPU time used but not slept yet (host_charge_soon): paid by the next
     * host_charge / host_note_call / host_park, or as soon as it would
     * reach the next pending event. */
    sim_time_t owed_ps;
    /* Calls into the simulator (host_note_call, host_charge,
     * host_charge_soon): the spin preemption of posix/guard.c looks for a
     * thread that makes none. */
    uint64_t entries;
    /* sim_next_event_time and sim_horizon cached by host_charge_soon while
     * sim_switches() + sim_scheduled() equals next_key / horizon_key
     * (UINT64_MAX: not cached) */
    sim_time_t next_ps, horizon_ps;
    uint64_t next_key, horizon_key;
    /* The simulated POSIX state of a program loaded from a shared object
     * (posix/), or NULL; its hook runs whenever the thread enters the
     * simulator (host_note_call, after a park): pending simulated signals
     * are delivered there. */
    void *os;
    void (*on_enter)(struct host_thread *t);

    /* The CPU it runs on (sim/host/cpu.c) */
    struct sim_proc *proc;
    struct host_vcpu *vcpu; /* placed at spawn, moved by host_sched_pin */
    enum host_cpu_state cpu_state;
    bool pinned;                 /* by host_pin_cpu or the scenario: never placed again */
    bool parked;                 /* spinning in host_park (holds its CPU, computes nothing) */
    bool blocked;                /* inside host_block_begin .. host_block_end */
    int bind_socket;             /* placement restricted to this socket (-1: any) */
    struct host_thread *rq_next; /* the hardware thread's queue of READY threads */
    struct sim_waitq cpu_wq;     /* waiting to get its hardware thread back */
    char cpu_why[64];
    /* the computation in progress (host_sched_run) */
    bool charging, stretch;
    uint32_t rate_permil;
    sim_time_t work_left_ps, seg_start_ps, seg_end_ps;
    uint32_t tl_index; /* its index on the host: its track in traces (TRK_THREAD) */
};

/* Returns 0, or ENOMEM. */
int host_init(struct host *h, struct sim *sim, uint32_t id, const char *name,
              const struct host_cpu_params *cpu);
/* Frees what host_init and the host model allocated (not the struct). */
void host_fini(struct host *h);
void host_dma_landed(struct host *h);
void host_cqe_landed(struct host *h);
/* The NIC wrote [addr, addr + len) of host memory (cache-line state:
 * those lines are no longer in any core's cache).  Cheap when no program
 * of the host uses the memory model. */
void host_dma_wrote(struct host *h, const void *addr, size_t len);
/* The root complex's merge of the partly written lines of a NIC write of
 * [addr, addr + len) (docs/host.md "Partial-line DMA writes"): 0 without
 * the memory model or when those lines are in the NIC socket's LLC. */
sim_time_t host_dma_rmw_ps(struct host *h, const void *addr, size_t len);
/* Extra time a NIC DMA of [addr, addr + len) takes because that memory is
 * on a socket other than the NIC's: one link traversal for a write, two
 * for a read, plus queueing for the inter-socket link (host.numa.*).  0
 * for local memory; the link's occupancy is reserved by the call. */
sim_time_t host_dma_numa_delay(struct host *h, const void *addr, size_t len, bool write);
/* Is addr memory on another socket than the NIC's? */
bool host_mem_is_remote(const struct host *h, const void *addr);
/* Is all of [addr, addr + len) on 2 MiB pages: memory of one
 * host_alloc_huge range (false without the memory model)?  The NIC's
 * page table then gets 2 MiB entries for an MR over it (sim/nic/mr.c);
 * host.hugepages puts all memory on 2 MiB pages without asking. */
bool host_mem_huge(const struct host *h, const void *addr, size_t len);
/* Extra time a CPU store to the NIC (a doorbell) from the running thread
 * takes to reach the NIC's socket: host.numa.dma_hop when the thread runs
 * on another socket, else 0. */
sim_time_t host_mmio_numa_delay(struct host *h);
/* The thread / host of the running process (NULL outside a simulated
 * process, e.g. in unit tests that drive the NIC directly). */
struct host_thread *host_thread_current(void);
struct host *host_of_current(void);
/* Start a process running fn(arg) on host h (its user pointer is a new
 * host_thread owned by the simulator run; freed with the sim).  It is
 * placed on a hardware thread now (sim/host/cpu.c, host_sched_place). */
struct sim_proc *host_spawn(struct host *h, const char *name, sim_proc_fn fn, void *arg,
                            void *program, size_t stack_bytes);
/* The same pinned to hardware thread `cpu` (-1: placed), and with its
 * placement, and that of the threads it starts, kept on `socket` (-1:
 * any): a scenario's `cpus:` and `socket:`.  NULL with errno EINVAL for a
 * cpu or socket the host does not have. */
struct sim_proc *host_spawn_on(struct host *h, const char *name, sim_proc_fn fn, void *arg,
                               void *program, size_t stack_bytes, int cpu, int socket);
/* Record a call other than an empty poll (resets the poll heuristic); pays
 * the thread's owed CPU time first and runs its on_enter hook. */
void host_note_call(void);
/* Account `ps` of CPU time to the running process without yielding, unless
 * that would reach the next pending event that could change what it
 * observes (sim_horizon with host->lookahead_ps), or a cap (then it sleeps
 * it all off now).  Exact: nothing can change what the thread observes
 * without calling into the simulator before that event.
 * Used for cheap frequent calls (clock reads, locks) so that a loop over
 * them does not cost a context switch per call. */
void host_charge_soon(sim_time_t ps);
/* The running thread's view of the current time: sim_now plus its owed
 * CPU time (plain sim_now outside a process). */
sim_time_t host_now_ps(void);
/* Something a poll()/select() of this host's programs may wait for
 * happened: wake them (posix/fd.c). */
void host_fd_activity(struct host *h);
/* Charge `ps` of CPU time to the running process (sleeps it).  Before
 * giving up the CPU it wakes this host's host_relax() waiters, since the
 * running thread may have written memory they poll.  The time is work at
 * the speed of one core alone: it runs slower while the sibling
 * hyper-thread is busy, waits for the thread's time slice when threads
 * share a hardware thread, and stops during OS interruptions
 * (sim/host/cpu.c). */
void host_charge(sim_time_t ps);
/* The same for work that changed nothing another thread could observe (it
 * only read memory: host_touch): wakes no parked thread. */
void host_charge_private(sim_time_t ps);
/* The running thread is about to store a doorbell: wait (charged as CPU
 * time) until its previous doorbell store has drained
 * (host_cpu_params.doorbell_gap_ps). */
void host_doorbell(void);
/* The same for an uncached doorbell store without a write-combining flush
 * (libmlx4's plain send doorbell): the thread's next doorbell waits
 * host_cpu_params.uc_doorbell_gap_ps after it. */
void host_doorbell_uc(void);
/* The same for a BlueFlame post under a lock shared by the threads of one
 * verbs context (host.cpu.bf_lock_context): the store waits until the
 * lock is free (*lock_free_ps) and holds it for the drain, plus the lock's
 * line from the core that held it last (host.mem.c2c); *last_core is that
 * core + 1 (0: none yet). */
void host_doorbell_locked(sim_time_t *lock_free_ps, uint32_t *last_core);
/* Park the running process on h->relax_wq (host_relax and spinning polls),
 * unless something it could observe changed since its last observation
 * (host_observed); then it returns at once.  A parked thread spins: it
 * keeps its hardware thread busy. */
void host_park(const char *why);
/* Trace (TRACE_G_HOST, sim/trace.h): a span of thread t from t0_ps to
 * t1_ps named `call` (a string valid during the call), with the other
 * fields of *r (qpn, len, val, status: the call's arguments and result).
 * Callers test sim_trace_on(sim, TRACE_G_HOST) first. */
struct trace_rec;
void host_trace_call(struct host_thread *t, sim_time_t t0_ps, sim_time_t t1_ps, const char *call,
                     struct trace_rec *r);
/* The running thread looked at memory / a CQ now (ibv_poll_cq calls it
 * where it reads the CQ). */
void host_observed(void);
/* The running thread blocks in the kernel (a wait that is not a spin:
 * ibv_get_cq_event, a join, an out-of-band get, a firmware command): it
 * leaves its hardware thread to others until host_block_end. */
void host_block_begin(void);
void host_block_end(void);
/* Extra CPU time the running thread pays per line of NIC-written memory
 * it reads (a CQE, a polled flag) because it runs on a socket other than
 * the NIC's (host.numa.remote_cache - host.mem.llc; 0 on the NIC's
 * socket).  The calibrated poll costs already hold the local read. */
sim_time_t host_remote_line_extra(void);

#endif /* RNICSIM_HOST_H */
