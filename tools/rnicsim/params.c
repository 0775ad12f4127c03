/* The hardware parameter table: every settable parameter of the NIC, PCIe,
 * host CPU and programmable switch models, with its key, kind, place in struct hw_profile and a
 * one-line description.  Profile files, a scenario's `hardware:` map and
 * `--set hardware.<key>=...` all go through this one table.
 *
 * Key naming: "<block>.<field>" with the field's unit suffix dropped
 * (tx_pkt_proc_ps -> nic.tx_pkt_proc, mps_bytes -> pcie.mps); the unit is
 * written with the value instead ("5ns", "256B"). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tools/rnicsim/rnicsim.h"

#define P(k, kd, blk, fld, d)                                                                      \
    {                                                                                              \
        .key = (k), .kind = (kd), .offset = offsetof(struct hw_profile, blk.fld),                  \
        .width = sizeof(((struct hw_profile *)0)->blk.fld), .doc = (d)                             \
    }

#define PE(k, blk, fld, nm, d)                                                                     \
    {                                                                                              \
        .key = (k), .kind = PARAM_ENUM, .offset = offsetof(struct hw_profile, blk.fld),            \
        .width = sizeof(((struct hw_profile *)0)->blk.fld), .doc = (d), .names = (nm)              \
    }

/* A parameter with a list of allowed values (facts of the PCIe spec) or a
 * lower bound; a value outside is an error at its position. */
#define PC(k, kd, blk, fld, ch, d)                                                                 \
    {                                                                                              \
        .key = (k), .kind = (kd), .offset = offsetof(struct hw_profile, blk.fld),                  \
        .width = sizeof(((struct hw_profile *)0)->blk.fld), .doc = (d), .choices = (ch)            \
    }
/* A parameter with its own range [lo, hi] (base units), instead of its
 * kind's default (param_range). */
#define PR(k, kd, blk, fld, lo, hi, d)                                                             \
    {                                                                                              \
        .key = (k), .kind = (kd), .offset = offsetof(struct hw_profile, blk.fld),                  \
        .width = sizeof(((struct hw_profile *)0)->blk.fld), .doc = (d), .min = (lo), .max = (hi)   \
    }

/* A parameter with a lower bound and its kind's default upper bound. */
#define PMIN(k, kd, blk, fld, m, d)                                                                \
    {                                                                                              \
        .key = (k), .kind = (kd), .offset = offsetof(struct hw_profile, blk.fld),                  \
        .width = sizeof(((struct hw_profile *)0)->blk.fld), .doc = (d), .min = (m)                 \
    }

/* Default ranges by kind (docs/scenarios.md "Ranges"): a duration is at
 * most SIM_DURATION_MAX_PS (one hour) so that no sum of a few of them
 * with the current time can wrap the 64-bit clock; rates up to 100 Tb/s;
 * sizes up to 1 GiB; counts up to 2^24, the size of the largest tables
 * a NIC reports (max_cq, max_mr). */
#define PARAM_RATE_MAX_BPS 100000000000000ull
#define PARAM_SIZE_MAX_BYTES ((uint64_t)1 << 30)
#define PARAM_COUNT_MAX ((uint64_t)1 << 24)

/* PCIe base spec: generations 1..5, link widths x1..x32, MPS and MRRS
 * 128..4096 bytes in powers of two. */
static const uint64_t pcie_gens_allowed[] = {1, 2, 3, 4, 5, 0};
static const uint64_t pcie_lanes_allowed[] = {1, 2, 4, 8, 12, 16, 32, 0};
static const uint64_t pcie_sizes_allowed[] = {128, 256, 512, 1024, 2048, 4096, 0};
/* Hardware threads per core: none, or hyper-threading's two. */
static const uint64_t host_smt_allowed[] = {1, 2, 0};

/* Grouped by block, in the order of the C structs. */
const struct param_def hw_params[] = {
    /* NIC (sim/nic/nic.h, struct nic_params) */
    P("nic.port_rate", PARAM_RATE, nic, port_rate_bps,
      "port rate reported by ibv_query_port (the link sets the real rate)"),
    P("nic.vendor_id", PARAM_COUNT, nic, vendor_id,
      "vendor id ibv_query_device reports (0x02c9 Mellanox, 0x1d0f Amazon, 0: none)"),
    P("nic.vendor_part_id", PARAM_COUNT, nic, vendor_part_id,
      "vendor part id ibv_query_device reports (e.g. 4119 ConnectX-5)"),
    P("nic.max_mtu", PARAM_MTU, nic, max_mtu, "largest path MTU the port accepts (256..4096)"),
    P("nic.doorbell_proc", PARAM_TIME, nic, doorbell_proc_ps, "doorbell seen -> WQE fetch issued"),
    P("nic.wqe_proc", PARAM_TIME, nic, wqe_proc_ps, "per-WQE processing in the send engine"),
    P("nic.tx_pkt_proc", PARAM_TIME, nic, tx_pkt_proc_ps,
      "per packet built (send pipeline occupancy)"),
    P("nic.rx_pkt_proc", PARAM_TIME, nic, rx_pkt_proc_ps,
      "per packet received: time a processing unit (nic.pus) spends on it"),
    PR("nic.rx_buffer", PARAM_SIZE, nic, rx_buffer_bytes, 0, 64 << 20,
       "receive (port) buffer per VL; on InfiniBand ports the link's credits stop the sender "
       "when it is full (0 = unbounded; at least one 4 KiB-MTU packet, 4224 B)"),
    PR("nic.wqe", PARAM_SIZE, nic, wqe_bytes, 1, 4096, "WQE bytes fetched per WR (basic segment)"),
    PR("nic.wqe_sge", PARAM_SIZE, nic, wqe_sge_bytes, 0, 4096,
       "extra WQE bytes per scatter/gather entry"),
    PR("nic.cqe", PARAM_SIZE, nic, cqe_bytes, 1, 4096, "CQE DMA write size"),
    PR("nic.max_inline", PARAM_SIZE, nic, max_inline_bytes, 0, NIC_MAX_INLINE_BYTES,
       "max_inline_data reported / accepted"),
    P("nic.blueflame", PARAM_BOOL, nic, blueflame,
      "small WQEs are written through the doorbell (no WQE fetch)"),
    PR("nic.max_qp_rd_atom", PARAM_COUNT, nic, max_qp_rd_atom, 1, 255,
       "device limit for max_rd_atomic / max_dest_rd_atomic"),
    PR("nic.max_qp_wr", PARAM_COUNT, nic, max_qp_wr, 1, 1 << 20, "max work requests per queue"),
    PR("nic.max_sge", PARAM_COUNT, nic, max_sge, 1, NIC_MAX_SGE,
       "max scatter/gather entries per WR"),
    PR("nic.max_cqe", PARAM_COUNT, nic, max_cqe, 1, 1 << 24, "max CQ depth"),
    PR("nic.max_qp", PARAM_COUNT, nic, max_qp, 1, 1 << 23, "max queue pairs"),
    PR("nic.max_cq", PARAM_COUNT, nic, max_cq, 1, 1 << 24, "max completion queues"),
    PR("nic.max_mr", PARAM_COUNT, nic, max_mr, 1, 1 << 24, "max memory regions"),
    PR("nic.ack_every_pkts", PARAM_COUNT, nic, ack_every_pkts, 1, 65536,
       "responder ACK coalescing: ACK at least every N packets"),
    P("nic.atomic_proc", PARAM_TIME, nic, atomic_proc_ps,
      "atomic unit occupancy per operation (plus the PCIe read-modify-write)"),
    PE("nic.transport", nic, transport, nic_transport_names,
       "transport personality of RC QPs: ib, ib-ar (adaptive routing), efa-srd, 1rma"),
    PE("nic.link_layer", nic, link_layer, nic_link_layer_names,
       "link layer: ethernet (RoCEv2 framing; GIDs, no LIDs) or ib (InfiniBand framing: LRH, "
       "VCRC, no Ethernet/IP/UDP; LID = node + 1)"),
    PE("nic.dma_ordering", nic, dma_ordering, nic_dma_ordering_names,
       "payload DMA writes: strict (address order, before the CQE) or relaxed"),
    PR("nic.srd_rto", PARAM_TIME, nic, srd_rto_ps, SIM_NS, SIM_DURATION_MAX_PS,
       "efa-srd: a packet not acknowledged within this is sent again"),
    PR("nic.onerma_timeout", PARAM_TIME, nic, onerma_timeout_ps, SIM_NS, SIM_DURATION_MAX_PS,
       "1rma: an op not completed within this fails (fail-fast, no retransmission)"),
    P("nic.dma_ro_max_delay", PARAM_TIME, nic, dma_ro_max_delay_ps,
      "relaxed DMA ordering: extra visibility delay of a write chunk, uniform in [0, this]"),
    P("nic.ar_max_delay", PARAM_TIME, nic, ar_max_delay_ps,
      "ib-ar: extra delay of each arriving request packet, uniform in [0, this]"),
    P("nic.ar_nak_delay", PARAM_TIME, nic, ar_nak_delay_ps,
      "ib-ar: a PSN hole this old is taken for a loss (sequence NAK)"),
    P("nic.max_srq", PARAM_COUNT, nic, max_srq, "device limit: shared receive queues"),
    PR("nic.max_srq_wr", PARAM_COUNT, nic, max_srq_wr, 0, 1 << 20, "device limit: WRs per SRQ"),
    PR("nic.max_srq_sge", PARAM_COUNT, nic, max_srq_sge, 0, NIC_MAX_SGE,
       "device limit: SGEs per SRQ WR"),
    /* caches, processing units, device memory (sim/nic/ctx.c, xlate.c, dm.c) */
    PR("nic.pus", PARAM_COUNT, nic, pus, 1, 4096,
       "processing units: received packets in work at once; a QP-context miss holds one"),
    PR("nic.qpc_cache_entries", PARAM_COUNT, nic, qpc_cache_entries, 0, 1 << 20,
       "QP contexts cached on the NIC (0 = no cache model: never misses)"),
    PR("nic.qpc_entry", PARAM_SIZE, nic, qpc_bytes, 1, 4096,
       "one QP context, read over PCIe on a miss"),
    PR("nic.mpt_cache_entries", PARAM_COUNT, nic, mpt_cache_entries, 0, 1 << 20,
       "memory-key (MPT) entries cached (0 = no model)"),
    PR("nic.mpt_entry", PARAM_SIZE, nic, mpt_bytes, 1, 4096,
       "one MPT entry, read over PCIe on a miss"),
    PR("nic.mtt_cache_entries", PARAM_COUNT, nic, mtt_cache_entries, 0, 1 << 20,
       "page translations (MTT entries) cached (0 = no model)"),
    PR("nic.mtt_entry", PARAM_SIZE, nic, mtt_bytes, 1, 512,
       "one MTT entry, read over PCIe on a miss"),
    PR("nic.xlate_max_misses", PARAM_COUNT, nic, xlate_max_misses, 1, 4096,
       "MPT/MTT fetches in flight at most"),
    P("nic.qpc_ways", PARAM_COUNT, nic, qpc_ways,
      "QP-context cache entries per set (0 = fully associative)"),
    P("nic.mpt_ways", PARAM_COUNT, nic, mpt_ways,
      "MPT cache entries per set (0 = fully associative)"),
    P("nic.mtt_ways", PARAM_COUNT, nic, mtt_ways,
      "MTT cache lines per set (0 = fully associative)"),
    PE("nic.cache_replacement", nic, cache_replacement, nic_cache_replacement_names,
       "replacement inside a set of the NIC's caches: random or lru"),
    P("nic.rd_ctx_entries", PARAM_COUNT, nic, rd_ctx_entries,
      "requester: QPs with READs/atomics outstanding whose context is on chip (0 = no model)"),
    P("nic.rd_ctx_ways", PARAM_COUNT, nic, rd_ctx_ways,
      "requester READ/atomic context cache entries per set (0 = fully associative)"),
    P("nic.rd_ctx", PARAM_SIZE, nic, rd_ctx_bytes,
      "one requester READ/atomic context, read over PCIe on a miss"),
    PR("nic.rd_ctx_max_misses", PARAM_COUNT, nic, rd_ctx_max_misses, 0, 4096,
       "requester READ/atomic context and tracker misses handled at once, in one FIFO (0 = "
       "overlapped, nic.pus per table)"),
    PE("nic.rd_ctx_per", nic, rd_ctx_per, nic_rd_ctx_per_names,
       "requester READ/atomic context cache entry: per qp, or per outstanding read"),
    PR("nic.rd_qp_entries", PARAM_COUNT, nic, rd_qp_entries, 0, 1 << 20,
       "requester, contexts per read: QPs with READs outstanding whose READ-response tracker is "
       "also on chip (0 = none)"),
    PR("nic.rd_ctx_miss_proc", PARAM_TIME, nic, rd_ctx_miss_proc_ps, 0, 100 * SIM_US,
       "requester READ/atomic context miss: handler time after its PCIe read"),
    PR("nic.wqe_cache_entries", PARAM_COUNT, nic, wqe_cache_entries, 0, 1 << 20,
       "outstanding send WQEs the NIC holds until they complete (0 = no model)"),
    PR("nic.wqe_cache_ways", PARAM_COUNT, nic, wqe_cache_ways, 0, 1024,
       "outstanding-WQE cache entries per set (0 = fully associative)"),
    PR("nic.rwqe_cache_entries", PARAM_COUNT, nic, rwqe_cache_entries, 0, 1 << 20,
       "receive queues (QPs' or SRQs') whose prefetched receive WQEs the NIC holds (0 = no model)"),
    PR("nic.rwqe_ways", PARAM_COUNT, nic, rwqe_ways, 0, 1024,
       "receive-WQE cache entries per set (0 = fully associative)"),
    PR("nic.rwqe_prefetch", PARAM_COUNT, nic, rwqe_prefetch, 1, 1024,
       "receive WQEs fetched by one PCIe read when a queue has none on chip"),
    PR("nic.rwqe", PARAM_SIZE, nic, rwqe_bytes, 1, 4096, "one receive WQE, as read over PCIe"),
    PR("nic.tx_burst_pkts", PARAM_COUNT, nic, tx_burst_pkts, 1, 4096,
       "transmit arbitration: packets a QP's source sends in a row before the next source's turn"),
    P("nic.rd_req_proc", PARAM_TIME, nic, rd_req_proc_ps,
      "responder READ engine: occupancy per READ request, one at a time per NIC"),
    P("nic.max_rd_resp", PARAM_COUNT, nic, max_rd_resp,
      "responder: READs served at once per NIC (0 = only max_dest_rd_atomic per QP)"),
    PMIN("nic.dm_banks", PARAM_COUNT, nic, dm_banks, 1,
         "device memory banks, each busy nic.dm_access per access"),
    P("nic.cmd_proc", PARAM_TIME, nic, cmd_proc_ps,
      "one command of the NIC's command interface (MR create/destroy/translations)"),
    PMIN("nic.mtt_per_cmd", PARAM_COUNT, nic, mtt_per_cmd, 1,
         "page translations one registration command writes"),
    P("nic.mr_write_allocate", PARAM_BOOL, nic, mr_write_allocate,
      "registration puts the MR's key and translations in the NIC's caches (evicting others)"),
    PE("nic.dereg_flush", nic, dereg_flush, nic_dereg_flush_names,
       "what deregistration invalidates in the translation caches: mr (its entries) or all"),
    P("host.hugepages", PARAM_BOOL, nic, hugepages,
      "all host memory on 2 MiB pages (else only host_alloc_huge buffers): one MTT / TLB entry per "
      "2 MiB"),
    P("nic.dm_size", PARAM_SIZE, nic, dm_bytes, "device memory for ibv_alloc_dm (0 = none)"),
    P("nic.dm_access", PARAM_TIME, nic, dm_access_ps, "one NIC access to device memory"),
    P("nic.cqe_compression", PARAM_BOOL, nic, cqe_compression,
      "CQE compression: 7 of every 8 CQEs of a CQ written as 8 B mini-CQEs"),
    /* DCQCN congestion control (sim/nic/dcqcn.c, docs/lossless.md) */
    P("nic.dcqcn", PARAM_BOOL, nic, dcqcn,
      "DCQCN: ECT on sent packets, CNPs for CE-marked ones, per-QP rate control"),
    P("nic.cnp_interval", PARAM_TIME, nic, cnp_interval_ps,
      "DCQCN: a QP sends at most one CNP per this (Zhu et al. N = 50 us)"),
    PMIN("nic.dcqcn_timer", PARAM_TIME, nic, dcqcn_timer_ps, 1,
         "DCQCN: rate-increase timer T and alpha timer K (55 us)"),
    PMIN("nic.dcqcn_byte_counter", PARAM_SIZE, nic, dcqcn_byte_counter_bytes, 1,
         "DCQCN: byte counter B (10 MB)"),
    P("nic.dcqcn_rai", PARAM_RATE, nic, dcqcn_rai_bps, "DCQCN: additive increase R_AI (40 Mb/s)"),
    P("nic.dcqcn_rhai", PARAM_RATE, nic, dcqcn_rhai_bps, "DCQCN: hyper increase R_HAI (400 Mb/s)"),
    P("nic.dcqcn_min_rate", PARAM_RATE, nic, dcqcn_min_rate_bps,
      "DCQCN: a QP's rate is never cut below this (100 Mb/s)"),
    P("nic.dcqcn_f", PARAM_COUNT, nic, dcqcn_f, "DCQCN: fast-recovery stages F (5)"),
    PR("nic.cnp_prio", PARAM_COUNT, nic, cnp_prio, 0, PKT_PRIOS - 1, "priority (0..7) of CNPs (6)"),
    /* RIMA append queues (sim/nic/aq.c, docs/rima.md) */
    PR("rima.tpt_entries", PARAM_COUNT, nic, rima_tpt_entries, 0, NIC_AQ_MAX_TPT_ENTRIES,
       "RIMA tail pointer table entries = append queues at most (0 = no RIMA); Xue et al. 3.2 "
       "\"say 1K entries\""),
    P("rima.tpt_latency", PARAM_TIME, nic, rima_tpt_ps,
      "RIMA: one TPT lookup + tail add per appended message; Xue et al. 3.2: 1-2 ns (CACTI 6.0)"),
    P("rima.alloc_latency", PARAM_TIME, nic, rima_alloc_ps,
      "RIMA: host allocation of one chunk after a watermark interrupt; Xue et al. 5.2.1: "
      "kalloc+mlock of 16 MB, median 0.97 ms, p90 1 ms"),
    /* PCIe (sim/pcie/pcie.h, struct pcie_params) */
    PC("pcie.gen", PARAM_COUNT, pcie, gen, pcie_gens_allowed,
       "PCIe generation 1..5 (per-lane rate and encoding)"),
    PC("pcie.lanes", PARAM_COUNT, pcie, lanes, pcie_lanes_allowed,
       "link width: 1, 2, 4, 8, 12, 16 or 32 lanes"),
    PC("pcie.mps", PARAM_SIZE, pcie, mps_bytes, pcie_sizes_allowed,
       "max payload size of a TLP (128B..4KiB, a power of two)"),
    PC("pcie.mrrs", PARAM_SIZE, pcie, mrrs_bytes, pcie_sizes_allowed,
       "max read request size (128B..4KiB, a power of two)"),
    PR("pcie.mwr_hdr", PARAM_SIZE, pcie, mwr_hdr_bytes, 0, 256, "MWr/MRd TLP overhead on the wire"),
    PR("pcie.cpld_hdr", PARAM_SIZE, pcie, cpld_hdr_bytes, 0, 256, "CplD TLP overhead on the wire"),
    PR("pcie.dllp_overhead_permil", PARAM_COUNT, pcie, dllp_overhead_permil, 0, 999,
       "link-layer loss (ACK/FC DLLPs, SKP) in per mille"),
    PR("pcie.tags", PARAM_COUNT, pcie, tags, 0, 4096,
       "outstanding non-posted (read) requests at most: PCIe tags (0 = unlimited)"),
    PR("pcie.fc_ph_credits", PARAM_COUNT, pcie, fc_ph_credits, 0, 65536,
       "root complex posted-header flow-control credits (0 = unlimited)"),
    PR("pcie.fc_pd_credits", PARAM_COUNT, pcie, fc_pd_credits, 0, 65536,
       "root complex posted-data credits, 16 B each (0 = unlimited)"),
    PR("pcie.fc_nph_credits", PARAM_COUNT, pcie, fc_nph_credits, 0, 65536,
       "root complex non-posted-header credits (0 = unlimited)"),
    P("pcie.read_latency", PARAM_TIME, pcie, read_latency_ps,
      "DMA read request at device -> first completion back (excl. serialisation)"),
    P("pcie.read_fetch_rate", PARAM_RATE, pcie, read_fetch_bps,
      "host returns one DMA read's data at this rate, its requests in turn (0 = instantly)"),
    PE("pcie.read_noise", pcie, read_noise, noise_preset_names,
       "variation of pcie.read_latency per DMA read: a named distribution (docs/noise.md), none = "
       "off"),
    P("pcie.meta_reads_first", PARAM_BOOL, pcie, meta_reads_first,
      "the NIC's context / translation cache fills pass its queued data reads"),
    P("pcie.write_latency", PARAM_TIME, pcie, write_latency_ps,
      "last MWr byte leaves the device -> visible in host memory"),
    P("pcie.mmio_latency", PARAM_TIME, pcie, mmio_latency_ps,
      "CPU store -> doorbell seen by the device (excl. serialisation)"),
    /* Host CPU (sim/host.h, struct host_cpu_params) */
    P("host.cpu.post_send", PARAM_TIME, cpu, post_send_ps,
      "ibv_post_send, per call (barrier + doorbell store): latency"),
    P("host.cpu.post_send_wqe", PARAM_TIME, cpu, post_send_wqe_ps,
      "ibv_post_send, per WR (building and writing the WQE)"),
    P("host.cpu.doorbell_gap", PARAM_TIME, cpu, doorbell_gap_ps,
      "occupancy: a thread's next doorbell MMIO waits this long after its previous one"),
    P("host.cpu.bf_lock_context", PARAM_BOOL, cpu, bf_lock_context,
      "BlueFlame posts of one verbs context share one lock (libmlx4, ConnectX-3)"),
    P("host.cpu.bf_dedicated", PARAM_COUNT, cpu, bf_dedicated,
      "BlueFlame registers of their own for a context's first QPs: no lock (MLNX libmlx4: 7)"),
    PE("host.cpu.provider", cpu, post_provider, host_post_provider_names,
       "verbs provider's post path: mlx5 (every post flushes), mlx4 / mlx4-ofed (only BlueFlame "
       "posts)"),
    P("host.cpu.uc_doorbell_gap", PARAM_TIME, cpu, uc_doorbell_gap_ps,
      "mlx4 / mlx4-ofed: occupancy of the uncached doorbell store of a post that is not BlueFlame"),
    P("host.cpu.post_recv", PARAM_TIME, cpu, post_recv_ps, "ibv_post_recv, per WR"),
    P("host.cpu.poll_cq", PARAM_TIME, cpu, poll_cq_ps, "one ibv_poll_cq call"),
    P("host.cpu.poll_cqe", PARAM_TIME, cpu, poll_cqe_ps, "extra per CQE returned by ibv_poll_cq"),
    P("host.cpu.control_verb", PARAM_TIME, cpu, control_verb_ps,
      "create/modify/destroy/reg_mr (control path verbs)"),
    P("host.cpu.mr_pin_page", PARAM_TIME, cpu, mr_pin_page_ps, "ibv_reg_mr: pinning one page"),
    P("host.cpu.mr_unpin_page", PARAM_TIME, cpu, mr_unpin_page_ps,
      "ibv_dereg_mr: unpinning one page"),
    P("host.cpu.memcpy_rate", PARAM_BYTE_RATE, cpu, memcpy_bytes_per_s,
      "host_memcpy copy rate (written in bits/s, e.g. 56Gbps = 7 GB/s)"),
    P("host.cpu.wakeup", PARAM_TIME, cpu, wakeup_ps,
      "a parked poller notices new data (the median; host.cpu.wakeup_noise adds variation)"),
    PE("host.cpu.wakeup_noise", cpu, wakeup_noise, noise_preset_names,
       "variation of host.cpu.wakeup: a named distribution (docs/noise.md), none = off"),
    P("host.cpu.clock_read", PARAM_TIME, cpu, clock_read_ps,
      "clock_gettime/gettimeofday/time of a program (docs/user-programs.md)"),
    P("host.cpu.tsc_read", PARAM_TIME, cpu, tsc_read_ps, "an rdtsc/rdtscp of a program"),
    P("host.cpu.syscall", PARAM_TIME, cpu, syscall_ps,
      "any other system call of a program (sockets, sleep, poll)"),
    P("host.cpu.lock", PARAM_TIME, cpu, lock_ps,
      "a program's pthread mutex lock + unlock, uncontended"),
    P("host.mgmt.latency", PARAM_TIME, cpu, mgmt_latency_ps,
      "management network (programs' TCP sockets): one-way latency"),
    PMIN("host.mgmt.rate", PARAM_RATE, cpu, mgmt_rate_bps, 1, "management network: per-host rate"),
    /* Host CPUs, OS and memory (sim/host/, docs/host.md) */
    PR("host.sockets", PARAM_COUNT, cpu, topo.sockets, 1, HOST_MAX_SOCKETS, "NUMA sockets"),
    PR("host.cores", PARAM_COUNT, cpu, topo.cores_per_socket, 1, HOST_MAX_CORES,
       "physical cores per socket (sockets x cores at most 254)"),
    PC("host.threads_per_core", PARAM_COUNT, cpu, topo.threads_per_core, host_smt_allowed,
       "hardware threads per core: 2 = hyper-threading"),
    P("host.nic_socket", PARAM_COUNT, cpu, topo.nic_socket, "the socket the NIC is attached to"),
    PR("host.cpu.ht_share_permil", PARAM_COUNT, cpu, topo.ht_share_permil, 1, 1000,
       "each of two busy hyper-threads of a core runs at this per mille of the core"),
    P("host.os.sched_latency", PARAM_TIME, cpu, topo.sched_latency_ps,
      "CFS period: n threads sharing a CPU get turns of max(this / n, sched_min_granularity)"),
    PMIN("host.os.sched_min_granularity", PARAM_TIME, cpu, topo.sched_min_gran_ps, 1,
         "shortest turn of a thread sharing a CPU"),
    P("host.os.ctx_switch", PARAM_TIME, cpu, topo.ctx_switch_ps,
      "switching a CPU to another thread (turns, wakeup preemption, migration)"),
    PE("host.os.noise", cpu, topo.os_noise, noise_preset_names,
       "OS interruptions of every CPU: none, os-tick-250hz, os-tick-1000hz (docs/noise.md)"),
    PMIN("host.mem.l1", PARAM_SIZE, cpu, mem.l1_bytes, 64, "a core's L1 data cache"),
    P("host.mem.l1_hit", PARAM_TIME, cpu, mem.l1_ps, "a line in the core's L1"),
    PMIN("host.mem.l2", PARAM_SIZE, cpu, mem.l2_bytes, 64, "a core's L2 cache"),
    P("host.mem.l2_hit", PARAM_TIME, cpu, mem.l2_ps, "a line in the core's L2"),
    PMIN("host.mem.llc", PARAM_SIZE, cpu, mem.llc_bytes, 64, "a socket's last-level cache"),
    P("host.mem.llc_hit", PARAM_TIME, cpu, mem.llc_ps,
      "a line in the socket's LLC (a clean line of another core, a NIC write with DDIO)"),
    P("host.mem.dram", PARAM_TIME, cpu, mem.dram_ps, "a line from the socket's own memory"),
    P("host.mem.c2c", PARAM_TIME, cpu, mem.c2c_ps,
      "a line another core of the socket has modified (core-to-core transfer)"),
    PMIN("host.mem.mlp", PARAM_COUNT, cpu, mem.mlp, 1,
         "cache misses a core overlaps (line fill buffers)"),
    P("host.mem.ddio", PARAM_BOOL, cpu, mem.ddio,
      "NIC writes to the NIC socket's memory allocate in its LLC (Intel DDIO)"),
    P("host.mem.ddio_size", PARAM_SIZE, cpu, mem.ddio_bytes,
      "the part of the LLC DDIO writes may fill (older lines go to memory)"),
    P("host.numa.remote_dram", PARAM_TIME, cpu, mem.remote_dram_ps,
      "a line from the other socket's memory"),
    P("host.numa.remote_cache", PARAM_TIME, cpu, mem.remote_cache_ps,
      "a line from the other socket's caches"),
    P("host.numa.dma_hop", PARAM_TIME, cpu, mem.dma_hop_ps,
      "NIC DMA to the other socket's memory: one link traversal (a read makes two)"),
    PMIN("host.numa.link_rate", PARAM_RATE, cpu, mem.socket_link_bps, 1,
         "inter-socket link (UPI / QPI) per direction, shared by the NIC's remote DMA"),
    PR("host.tlb.l1_4k", PARAM_COUNT, cpu, mem.tlb_l1_4k, 0, 65536,
       "a core's first-level data TLB: entries for 4 KiB pages (0: no first level)"),
    PR("host.tlb.l1_2m", PARAM_COUNT, cpu, mem.tlb_l1_2m, 0, 65536,
       "... entries for 2 MiB pages (host_alloc_huge, host.hugepages)"),
    PR("host.tlb.stlb", PARAM_COUNT, cpu, mem.tlb_stlb, 0, 1048576,
       "a core's second-level TLB entries, both page sizes (0: none)"),
    P("host.tlb.stlb_hit", PARAM_TIME, cpu, mem.tlb_stlb_hit_ps,
      "a first-level TLB miss found in the second level"),
    P("host.tlb.walk", PARAM_TIME, cpu, mem.tlb_walk_ps,
      "a page walk, its page-table line in the L2 or nearer (further: + that line's latency)"),
    /* Programmable switch (sim/pswitch/pswitch.h, struct ps_params) */
    PMIN("pswitch.stages", PARAM_COUNT, pswitch, stages, 1,
         "match-action stages of each pipeline (at most 32)"),
    PMIN("pswitch.stage_salus", PARAM_COUNT, pswitch, salus_per_stage, 1,
         "register arrays (stateful ALUs) one stage holds"),
    PMIN("pswitch.stage_tables", PARAM_COUNT, pswitch, tables_per_stage, 1,
         "match-action tables one stage holds"),
    P("pswitch.stage_sram", PARAM_SIZE, pswitch, stage_sram_bytes,
      "register + table memory of one stage"),
    P("pswitch.ingress_latency", PARAM_TIME, pswitch, ingress_ps, "one ingress pipeline pass"),
    P("pswitch.egress_latency", PARAM_TIME, pswitch, egress_ps, "one egress pipeline pass"),
    P("pswitch.pkt_interval", PARAM_TIME, pswitch, pkt_interval_ps,
      "a pipeline takes a new packet at most this often"),
    PMIN("pswitch.recirc_rate", PARAM_RATE, pswitch, recirc_rate_bps, 1, "recirculation port rate"),
    P("pswitch.recirc_buffer", PARAM_SIZE, pswitch, recirc_buffer_bytes,
      "recirculation port queue (drop beyond)"),
    PMIN("pswitch.pktgen_rate", PARAM_RATE, pswitch, pktgen_rate_bps, 1,
         "packet generator port rate"),
    P("pswitch.pktgen_pkt", PARAM_SIZE, pswitch, pktgen_pkt_bytes,
      "frame of a generated or CPU-injected packet"),
    P("pswitch.cp_op", PARAM_TIME, pswitch, cp_op_ps,
      "one control-plane operation (table entry, register, group) on the switch CPU"),
    /* Peer devices of every host (struct pu_dev_params; sim/nic/peer.c) */
    PC("gpu.pcie_gen", PARAM_COUNT, dev[0], gen, pcie_gens_allowed,
       "GPU: PCIe generation of its link (peer-to-peer DMA of the NIC)"),
    PC("gpu.pcie_lanes", PARAM_COUNT, dev[0], lanes, pcie_lanes_allowed, "GPU: PCIe lanes"),
    P("gpu.read_latency", PARAM_TIME, dev[0], read_latency_ps,
      "GPU: NIC read of GPU memory, request to first completion"),
    P("gpu.write_latency", PARAM_TIME, dev[0], write_latency_ps,
      "GPU: NIC write to GPU memory until visible"),
    PR("gpu.memory", PARAM_SIZE, dev[0], mem_bytes, 0,
       (uint64_t)1 << 40, /* a budget, not allocated up front */
       "GPU memory host_device_alloc(\"gpu\") hands out (0: no GPU)"),
    PC("fpga.pcie_gen", PARAM_COUNT, dev[1], gen, pcie_gens_allowed,
       "FPGA: PCIe generation of its link"),
    PC("fpga.pcie_lanes", PARAM_COUNT, dev[1], lanes, pcie_lanes_allowed, "FPGA: PCIe lanes"),
    P("fpga.read_latency", PARAM_TIME, dev[1], read_latency_ps,
      "FPGA: NIC read of FPGA memory (HBM behind a BAR), request to first completion"),
    P("fpga.write_latency", PARAM_TIME, dev[1], write_latency_ps,
      "FPGA: NIC write to FPGA memory until visible"),
    PR("fpga.memory", PARAM_SIZE, dev[1], mem_bytes, 0,
       (uint64_t)1 << 40, /* a budget, not allocated up front */
       "FPGA memory host_device_alloc(\"fpga\") hands out (0: no FPGA)"),
};

const char *const hw_device_names[] = {"gpu", "fpga", NULL};

/* Peer devices.  GPU: NVIDIA V100 (the paper's GPU) sits on PCIe Gen3 x16
 * (V100 datasheet: 32 GB/s interconnect) with 16 GB of HBM2; a NIC's read
 * of GPU memory crosses the GPU's BAR and memory controller, estimated at
 * ~900 ns to the first completion (vs. 531 ns for host DRAM, pcie.c),
 * which GPUDirect RDMA users observe as slightly slower peer reads than
 * host reads.  FPGA: Xilinx Alveo U55C (the paper's FPGA), PCIe Gen3 x16
 * (U55C datasheet) with 16 GB of HBM2, its memory behind a PCIe BAR and
 * the shell's AXI interconnect: estimated 1.5 us per read. */
static void pu_dev_defaults(struct pu_dev_params *gpu, struct pu_dev_params *fpga)
{
    *gpu = (struct pu_dev_params){.gen = 3,
                                  .lanes = 16,
                                  .read_latency_ps = 900 * SIM_NS,
                                  .write_latency_ps = 250 * SIM_NS,
                                  .mem_bytes = 16ull << 30};
    *fpga = (struct pu_dev_params){.gen = 3,
                                   .lanes = 16,
                                   .read_latency_ps = 1500 * SIM_NS,
                                   .write_latency_ps = 400 * SIM_NS,
                                   .mem_bytes = 16ull << 30};
}

const size_t hw_params_count = sizeof(hw_params) / sizeof(hw_params[0]);

void hw_profile_default(struct hw_profile *hw)
{
    memset(hw, 0, sizeof(*hw));
    nic_params_default(&hw->nic);
    pcie_params_default(&hw->pcie);
    host_cpu_params_default(&hw->cpu);
    ps_params_default(&hw->pswitch);
    pu_dev_defaults(&hw->dev[0], &hw->dev[1]);
}

const struct param_def *param_find(const char *key)
{
    for (size_t i = 0; i < hw_params_count; i++)
        if (strcmp(hw_params[i].key, key) == 0)
            return &hw_params[i];
    return NULL;
}

const char *param_suggest(const char *key)
{
    const char *keys[sizeof(hw_params) / sizeof(hw_params[0])];
    for (size_t i = 0; i < hw_params_count; i++)
        keys[i] = hw_params[i].key;
    const char *s = suggest_word(key, keys, hw_params_count);
    if (s)
        return s;
    /* "tx_pkt_proc" without its block: match on the last component. */
    for (size_t i = 0; i < hw_params_count; i++) {
        const char *dot = strrchr(hw_params[i].key, '.');
        if (dot && strcmp(dot + 1, key) == 0)
            return hw_params[i].key;
    }
    return NULL;
}

const char *param_kind_name(enum param_kind k)
{
    static const char *const names[] = {
        [PARAM_TIME] = "time", [PARAM_RATE] = "rate",   [PARAM_BYTE_RATE] = "rate",
        [PARAM_SIZE] = "size", [PARAM_COUNT] = "count", [PARAM_BOOL] = "bool",
        [PARAM_MTU] = "mtu",   [PARAM_ENUM] = "enum",
    };
    return names[k];
}

/* Integer fields of width 1 (bool), 4 or 8 bytes. */
static void field_store(struct hw_profile *hw, const struct param_def *d, uint64_t v)
{
    unsigned char *p = (unsigned char *)hw + d->offset;
    if (d->kind == PARAM_BOOL) {
        bool b = v != 0;
        memcpy(p, &b, sizeof(b));
    } else if (d->width == sizeof(uint32_t)) {
        uint32_t w = (uint32_t)v;
        memcpy(p, &w, sizeof(w));
    } else {
        memcpy(p, &v, sizeof(v));
    }
}

static uint64_t field_load(const struct hw_profile *hw, const struct param_def *d)
{
    const unsigned char *p = (const unsigned char *)hw + d->offset;
    if (d->kind == PARAM_BOOL) {
        bool b;
        memcpy(&b, p, sizeof(b));
        return b;
    }
    if (d->width == sizeof(uint32_t)) {
        uint32_t w;
        memcpy(&w, p, sizeof(w));
        return w;
    }
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* ibv_mtu enum <-> bytes. */
static const struct {
    uint64_t bytes;
    enum ibv_mtu mtu;
} mtu_table[] = {
    {256, IBV_MTU_256},   {512, IBV_MTU_512},   {1024, IBV_MTU_1024},
    {2048, IBV_MTU_2048}, {4096, IBV_MTU_4096},
};

static enum cfg_quantity kind_quantity(enum param_kind k)
{
    switch (k) {
    case PARAM_TIME:
        return CFG_Q_TIME;
    case PARAM_RATE:
    case PARAM_BYTE_RATE:
        return CFG_Q_RATE;
    case PARAM_SIZE:
        return CFG_Q_SIZE;
    default:
        return CFG_Q_COUNT;
    }
}

static void format_value(enum param_kind kind, uint64_t v, char *buf, size_t len)
{
    cfg_format_quantity(kind_quantity(kind), v, buf, len);
}

int param_set_node(struct hw_profile *hw, const struct param_def *d, struct cfg_node *n,
                   struct cfg_error *err)
{
    uint64_t v = 0;
    int rc = 0;
    switch (d->kind) {
    case PARAM_TIME:
        rc = cfg_node_time(n, &v, err);
        break;
    case PARAM_RATE:
        rc = cfg_node_rate(n, &v, err);
        break;
    case PARAM_BYTE_RATE:
        rc = cfg_node_rate(n, &v, err);
        if (rc == 0 && v % 8)
            return cfg_errorf(err, n, "'%s': %s is not a whole number of bytes per second", d->key,
                              n->scalar);
        v /= 8;
        break;
    case PARAM_SIZE:
        rc = cfg_node_size(n, &v, err);
        break;
    case PARAM_COUNT:
        rc = cfg_node_u64(n, &v, err);
        break;
    case PARAM_BOOL: {
        /* Unquoted true/false (yes/no, on/off), as cfg_get_bool. */
        const char *s = NULL;
        if (cfg_node_str(n, &s, err))
            return -1;
        if (!n->quoted && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
            v = 1;
        else if (!n->quoted && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")))
            v = 0;
        else
            return cfg_errorf(err, n, "bad boolean '%s' for '%s': expected true or false", s,
                              d->key);
        break;
    }
    case PARAM_ENUM: {
        const char *s = NULL;
        if (cfg_node_str(n, &s, err))
            return -1;
        char list[160] = "";
        for (size_t i = 0; d->names[i]; i++) {
            if (strcmp(s, d->names[i]) == 0) {
                field_store(hw, d, i);
                return 0;
            }
            size_t l = strlen(list);
            snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", d->names[i]);
        }
        return cfg_errorf(err, n, "bad value '%s' for '%s': expected one of %s", s, d->key, list);
    }
    case PARAM_MTU: {
        if (cfg_node_size(n, &v, err))
            return -1;
        for (size_t i = 0; i < sizeof(mtu_table) / sizeof(mtu_table[0]); i++) {
            if (mtu_table[i].bytes == v) {
                field_store(hw, d, (uint64_t)mtu_table[i].mtu);
                return 0;
            }
        }
        return cfg_errorf(err, n, "bad MTU '%s' for '%s': expected 256, 512, 1024, 2048 or 4096",
                          n->scalar, d->key);
    }
    }
    if (rc)
        return -1;
    uint64_t lo, hi;
    if (param_range(d, &lo, &hi) &&
        cfg_check_range(n, d->key, kind_quantity(d->kind), d->kind == PARAM_BYTE_RATE ? v * 8 : v,
                        d->kind == PARAM_BYTE_RATE ? lo * 8 : lo,
                        d->kind == PARAM_BYTE_RATE ? hi * 8 : hi, err))
        return -1;
    if (d->choices) {
        char list[160] = "";
        for (size_t i = 0; d->choices[i]; i++) {
            if (d->choices[i] == v) {
                field_store(hw, d, v);
                return 0;
            }
            size_t l = strlen(list);
            snprintf(list + l, sizeof(list) - l, "%s%llu", i ? ", " : "",
                     (unsigned long long)d->choices[i]);
        }
        return cfg_errorf(err, n, "bad value '%s' for '%s': expected one of %s", n->scalar, d->key,
                          list);
    }
    field_store(hw, d, v);
    return 0;
}

bool param_range(const struct param_def *d, uint64_t *min, uint64_t *max)
{
    uint64_t hi;
    switch (d->kind) {
    case PARAM_TIME:
        hi = SIM_DURATION_MAX_PS;
        break;
    case PARAM_RATE:
        hi = PARAM_RATE_MAX_BPS;
        break;
    case PARAM_BYTE_RATE:
        hi = PARAM_RATE_MAX_BPS / 8; /* stored in bytes/s */
        break;
    case PARAM_SIZE:
        hi = PARAM_SIZE_MAX_BYTES;
        break;
    case PARAM_COUNT:
        hi = PARAM_COUNT_MAX;
        break;
    default:
        return false;
    }
    *min = d->min;
    *max = d->max ? d->max : hi;
    if (d->width == sizeof(uint32_t) && *max > UINT32_MAX)
        *max = UINT32_MAX;
    return true;
}

void param_format_range(const struct param_def *d, char *buf, size_t len)
{
    if (d->choices) { /* "1,2,4,8": the values allowed */
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; d->choices[i] && off < len; i++) {
            char v[32];
            format_value(d->kind, d->choices[i], v, sizeof(v));
            int k = snprintf(buf + off, len - off, "%s%s", i ? "," : "", v);
            off += k > 0 ? (size_t)k : 0;
        }
        return;
    }
    uint64_t lo, hi;
    if (!param_range(d, &lo, &hi)) {
        snprintf(buf, len, "%s", "");
        return;
    }
    char a[32], b[32];
    format_value(d->kind, d->kind == PARAM_BYTE_RATE ? lo * 8 : lo, a, sizeof(a));
    format_value(d->kind, d->kind == PARAM_BYTE_RATE ? hi * 8 : hi, b, sizeof(b));
    snprintf(buf, len, "%s..%s", a, b);
}

uint64_t param_value(const struct hw_profile *hw, const struct param_def *d)
{
    uint64_t v = field_load(hw, d);
    if (d->kind == PARAM_MTU) {
        for (size_t i = 0; i < sizeof(mtu_table) / sizeof(mtu_table[0]); i++)
            if ((uint64_t)mtu_table[i].mtu == v)
                return mtu_table[i].bytes;
        return 0;
    }
    if (d->kind == PARAM_BYTE_RATE)
        return v * 8;
    return v;
}

void param_format(const struct hw_profile *hw, const struct param_def *d, char *buf, size_t len)
{
    uint64_t v = param_value(hw, d);
    if (d->kind == PARAM_BOOL)
        snprintf(buf, len, "%s", v ? "true" : "false");
    else if (d->kind == PARAM_ENUM)
        snprintf(buf, len, "%s", d->names[v]);
    else
        format_value(d->kind, v, buf, len);
}

/* Is `prefix` + "." the start of some parameter key? */
static bool is_param_prefix(const char *prefix)
{
    size_t n = strlen(prefix);
    for (size_t i = 0; i < hw_params_count; i++)
        if (strncmp(hw_params[i].key, prefix, n) == 0 && hw_params[i].key[n] == '.')
            return true;
    return false;
}

static int unknown_param(struct cfg_node *map, size_t i, const char *full, const char *where,
                         struct cfg_error *err)
{
    const char *s = param_suggest(full);
    char hint[160] = "";
    if (s)
        snprintf(hint, sizeof(hint), " (did you mean '%s'?)", s);
    struct cfg_node at = {.file = map->key_file ? map->key_file[i] : map->file,
                          .line = map->key_line[i],
                          .col = map->key_col[i]};
    return cfg_errorf(err, &at, "unknown hardware parameter '%s' in '%s'%s", full, where, hint);
}

/* Walk `map` whose keys extend `prefix`. */
static int apply_level(struct hw_profile *hw, struct cfg_node *map, const char *prefix,
                       const char *where, struct cfg_error *err)
{
    if (map->kind != CFG_MAP)
        return cfg_errorf(err, map, "'%s': expected a mapping of hardware parameters, got %s",
                          map->path, cfg_kind_name(map));
    for (size_t i = 0; i < map->n; i++) {
        char full[256];
        snprintf(full, sizeof(full), "%s%s%s", prefix, prefix[0] ? "." : "", map->keys[i]);
        const struct param_def *d = param_find(full);
        if (d) {
            struct cfg_node *n = cfg_child(map, map->keys[i]);
            if (param_set_node(hw, d, n, err))
                return -1;
        } else if (is_param_prefix(full)) {
            struct cfg_node *n = cfg_child(map, map->keys[i]);
            if (apply_level(hw, n, full, where, err))
                return -1;
        } else {
            return unknown_param(map, i, full, where, err);
        }
    }
    return 0;
}

/* The node that set parameter `key` in a hardware map (dotted or nested),
 * or NULL. */
static struct cfg_node *param_node(struct cfg_node *map, const char *key)
{
    if (!map || map->kind != CFG_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++) {
        size_t n = strlen(map->keys[i]);
        if (strcmp(map->keys[i], key) == 0)
            return map->items[i];
        if (strncmp(map->keys[i], key, n) == 0 && key[n] == '.') {
            struct cfg_node *in = param_node(map->items[i], key + n + 1);
            if (in)
                return in;
        }
    }
    return NULL;
}

int params_check(const struct hw_profile *hw, struct cfg_node *map, struct cfg_node *fallback,
                 struct cfg_error *err)
{
    /* posted-data credits (16 B each) must hold one MPS-sized write, or
     * no write could ever be sent (pcie.c) */
    uint64_t need = (hw->pcie.mps_bytes + 15) / 16;
    if (hw->pcie.fc_pd_credits && hw->pcie.fc_pd_credits < need) {
        struct cfg_node *at = param_node(map, "pcie.fc_pd_credits");
        if (!at)
            at = param_node(map, "pcie.mps");
        return cfg_errorf(err, at ? at : fallback,
                          "'pcie.fc_pd_credits': %u credits of 16 B cannot hold one TLP of "
                          "pcie.mps = %u bytes (at least %llu, or 0 for unlimited)",
                          hw->pcie.fc_pd_credits, hw->pcie.mps_bytes, (unsigned long long)need);
    }
    /* a bounded receive buffer gives its space back as InfiniBand link
     * credits (nic.c, link.c); a RoCE NIC would need PFC from the NIC,
     * which is not built */
    if (hw->nic.rx_buffer_bytes && hw->nic.link_layer != NIC_LINK_IB) {
        struct cfg_node *at = param_node(map, "nic.rx_buffer");
        if (!at)
            at = param_node(map, "nic.link_layer");
        return cfg_errorf(err, at ? at : fallback,
                          "'nic.rx_buffer': a bounded receive buffer is modelled on InfiniBand "
                          "ports only (nic.link_layer: ib, credit flow control); a RoCE NIC's "
                          "PFC is not built: set nic.rx_buffer to 0");
    }
    return 0;
}

int params_apply_map(struct hw_profile *hw, struct cfg_node *map, const char *where,
                     struct cfg_error *err)
{
    if (!map)
        return 0;
    return apply_level(hw, map, "", where, err);
}
