/* Where the C default of every hardware parameter comes from (the
 * citation next to each default in sim/nic/nic.c, sim/pcie/pcie.c,
 * sim/host.c and the other blocks' *_default functions, in short), for
 * `rnicsim params` (param_source.c).  A key missing here prints
 * "see the block's default function"; test_params_source checks every key
 * of hw_params[] has one. */
#include <string.h>

#include "tools/rnicsim/rnicsim.h"

static const struct {
    const char *key, *source;
} default_sources[] = {
    {"nic.port_rate", "ConnectX-5 product brief: 100 Gb/s per port (CALIBRATION, NICs)"},
    {"nic.max_mtu", "IBA spec: largest IB path MTU (CALIBRATION, Transports)"},
    {"nic.doorbell_proc",
     "estimate: doorbell decode + QP context lookup, a few NIC clock cycles x pipeline depth"},
    {"nic.wqe_proc", "nic.c default: one QP processes one WQE per 133 ns -> 7.5 M msg/s per QP "
                     "(CALIBRATION, NICs: one QP with post lists ~7.5 M/s)"},
    {"nic.tx_pkt_proc", "ConnectX-5 brief: up to 200 M msg/s -> 5 ns per packet (CALIBRATION, "
                        "NICs: CX-6 215 M msg/s)"},
    {"nic.rx_pkt_proc", "16 processing units (nic.pus), each busy this long per received packet: "
                        "16 / 80 ns = 200 M msg/s, ConnectX-5 brief (CALIBRATION, NICs)"},
    {"nic.wqe", "mlx5 PRM: one 64 B WQE basic block (ctrl + remote address + one data segment)"},
    {"nic.wqe_sge", "mlx5 PRM: a data segment (scatter/gather entry) is 16 B"},
    {"nic.cqe", "mlx5 PRM: 64 B CQE (the default CQE size of the mlx5 provider)"},
    {"nic.max_inline",
     "estimate: mlx5 accepts perftest's inline defaults (write 220, send 236); nic.c default"},
    {"nic.blueflame",
     "mlx5 BlueFlame: small WQEs written with the doorbell (mlx5 PRM, rdma-core mlx5 provider)"},
    {"nic.max_qp_rd_atom", "ibv_devinfo -v on ConnectX-5: max_qp_rd_atom 16"},
    {"nic.max_qp_wr", "ibv_devinfo -v on ConnectX-5: max_qp_wr 32768"},
    {"nic.max_sge", "model limit NIC_MAX_SGE (sim/nic/nic.h); the device reports 30"},
    {"nic.max_cqe", "ibv_devinfo -v on ConnectX-5: max_cqe 4194303"},
    {"nic.max_qp", "ibv_devinfo -v on ConnectX-5: max_qp 262144"},
    {"nic.max_cq", "ibv_devinfo -v on ConnectX-5: max_cq 16777216"},
    {"nic.max_mr", "ibv_devinfo -v on ConnectX-5: max_mr 16777216"},
    {"nic.max_srq", "ibv_devinfo -v on ConnectX-5: max_srq 8388608"},
    {"nic.max_srq_wr", "ibv_devinfo -v on ConnectX-5: max_srq_wr 32767"},
    {"nic.max_srq_sge", "model limit NIC_MAX_SGE; the device reports 31"},
    {"nic.ack_every_pkts", "estimate: responder coalesces ACKs; perftest cq-mod default is 100, "
                           "mlx5 ACKs far more often"},
    {"nic.atomic_proc", "estimate: one atomic ALU operation plus ordering check, excluding the "
                        "PCIe read-modify-write"},
    {"nic.transport", "nic.c default: ConnectX-5 runs InfiniBand / RoCE RC (IBTA spec)"},
    {"nic.dma_ordering", "nic.c default: mlx5 relaxes PCIe ordering only for MRs registered with "
                         "IBV_ACCESS_RELAXED_ORDERING"},
    {"nic.link_layer", "nic.c default: RoCEv2 (ConnectX-5/6 Ethernet ports; ib reports an "
                       "InfiniBand port with LIDs, docs/emulation.md)"},
    {"nic.srd_rto", "nic.c default, used with nic.transport: efa-srd; estimate: a few loaded "
                    "datacenter RTTs (the SRD paper gives no number)"},
    {"nic.onerma_timeout", "nic.c default, used with nic.transport: 1rma; CALIBRATION, Transports: "
                           "1RMA fail-fast < 50 us"},
    {"nic.dma_ro_max_delay", "nic.c default, estimate: one more in-order commit time of the root "
                             "complex (pcie.write_latency) per relaxed chunk"},
    {"nic.ar_max_delay", "nic.c default, estimate: path skew of a few 4 KiB frames of queueing at "
                         "100 Gb/s (NVIDIA publishes no number)"},
    {"nic.ar_nak_delay",
     "nic.c default, estimate: 4x the reorder skew before a PSN hole counts as a loss"},
    {"nic.pus", "nic.c default, estimate: 16 context misses in flight (~29 M misses/s), the order "
                "of many-QP READ rates reported for ConnectX-6 (docs/calibration.md)"},
    {"nic.qpc_cache_entries", "nic.c default, estimate: QP-count cliff of ConnectX-4/5-class NICs "
                              "reported at hundreds to a few thousand QPs (docs/calibration.md)"},
    {"nic.qpc_entry", "nic.c default, estimate: mlx4 QP context (struct mlx4_qp_context) ~250 B; "
                      "mlx5's of the same order"},
    {"nic.mpt_cache_entries",
     "nic.c default, estimate: a few hundred memory keys cached (NVIDIA publishes no size)"},
    {"nic.mpt_entry", "mlx5 PRM: an mkey context is 64 B (mlx5_ifc.h struct mlx5_ifc_mkc_bits)"},
    {"nic.mtt_cache_entries",
     "nic.c default, estimate: 16 MiB of 4 KiB pages cached (NVIDIA publishes no size)"},
    {"nic.mtt_entry",
     "mlx5 PRM: one MTT entry is 8 B (struct mlx5_mtt); fetched 8 at a time (64 B line)"},
    {"nic.xlate_max_misses",
     "nic.c default, estimate: as many translation fetches in flight as processing units"},
    {"nic.qpc_ways", "nic.c default, estimate: 8-way set-associative (NVIDIA publishes no "
                     "organisation); gradual decline with QPs"},
    {"nic.mpt_ways", "nic.c default, estimate: 8-way"},
    {"nic.mtt_ways", "nic.c default, estimate: 8-way (lines of 8 translations)"},
    {"nic.cache_replacement", "nic.c default, estimate: random replacement inside a set (large "
                              "on-chip caches are rarely true LRU)"},
    {"nic.rd_ctx_entries",
     "nic.c default, estimate: READ collapses between 32 and 64 QPs on ConnectX-6 "
     "(docs/validation.md qp-cx6-read-*, a known limit: the model's collapse comes later)"},
    {"nic.rd_ctx_ways", "nic.c default, estimate"},
    {"nic.rd_ctx", "mlx5 PRM: a miss re-reads the READ's WQE basic block (64 B)"},
    {"nic.rd_req_proc", "nic.c default, fitted: SMART (ASPLOS'24) ConnectX-6 8 B READ peak 111 "
                        "Mops -> 9 ns; scaled by the briefs' message rates (200 vs 215 M/s)"},
    {"nic.max_rd_resp", "nic.c default: no per-NIC bound beyond max_dest_rd_atomic "
                        "(max_res_rd_atom 4194304 on ConnectX-5 never binds)"},
    {"nic.dm_banks", "nic.c default, estimate: device memory as 4 banks of nic.dm_access each"},
    {"nic.cmd_proc",
     "nic.c default, estimate: an mlx5 firmware command is a mailbox round trip of a few us"},
    {"nic.mtt_per_cmd",
     "nic.c default, estimate: a 4 KiB mailbox page of 8 B MTT entries (mlx5 PRM entry size)"},
    {"nic.mr_write_allocate",
     "nic.c default, estimate: registration writes its translations through the NIC caches (Husky, "
     "NSDI'23: control verbs evict other tenants' state)"},
    {"nic.dereg_flush", "nic.c default: deregistration invalidates the MR's own cached entries"},
    {"host.hugepages",
     "Linux default: registered memory on 4 KiB pages unless hugetlbfs/THP backs it"},
    {"nic.dm_size", "CALIBRATION, NICs: device memory on ConnectX-5 128 KiB usable (ibv_devinfo "
                    "max_dm_size 131072)"},
    {"nic.dm_access", "nic.c default, estimate: an on-chip SRAM access, ~25x below a PCIe round "
                      "trip (Taranov Fig. 8)"},
    {"nic.cqe_compression",
     "mlx5 default: CQE compression off unless enabled (mlx5dv / ethtool rx_cqe_compress)"},
    {"nic.dcqcn", "off unless a scenario studies congestion control (ConnectX enables it per "
                  "priority with mlnx_qos / sysfs ecn)"},
    {"nic.cnp_interval",
     "Zhu et al. (DCQCN, SIGCOMM'15): at most one CNP per flow every N = 50 us"},
    {"nic.dcqcn_timer", "Zhu et al.: rate-increase timer T and alpha timer K = 55 us"},
    {"nic.dcqcn_byte_counter", "Zhu et al.: byte counter B = 10 MB"},
    {"nic.dcqcn_rai", "Zhu et al.: additive increase R_AI = 40 Mb/s"},
    {"nic.dcqcn_rhai",
     "10 x R_AI, the ratio of HPCC's ns-3 DCQCN model (RdmaHw RateAI 5 Mb/s, RateHAI 50 Mb/s)"},
    {"nic.dcqcn_min_rate", "HPCC's ns-3 DCQCN model: RdmaHw MinRate 100 Mb/s"},
    {"nic.dcqcn_f", "Zhu et al.: F = 5 fast-recovery stages"},
    {"nic.cnp_prio", "NVIDIA RoCE configuration: CNPs on DSCP 48, priority 6"},
    {"rima.tpt_entries",
     "Xue et al. (RIMA) 3.2: the TPT \"is a small SRAM table (say 1K entries)\""},
    {"rima.tpt_latency",
     "Xue et al. 3.2: TPT lookup + add \"only 1-2 ns (as per CACTI 6.0)\"; upper end"},
    {"rima.alloc_latency",
     "Xue et al. 5.2.1: kalloc+mlock of 16 MB, median 0.97 ms, p90 1 ms; Table 4 L = 1 ms"},
    {"pcie.gen", "ConnectX-5 EN/VPI brief: PCIe Gen3 x16 host interface (CALIBRATION, PCIe)"},
    {"pcie.lanes", "same"},
    {"pcie.mps", "common server setting, and the pcie-bench configuration (CALIBRATION, PCIe)"},
    {"pcie.mrrs", "same (CALIBRATION, PCIe: \"effective x16, MPS 256, MRRS 512\")"},
    {"pcie.mwr_hdr", "CALIBRATION, PCIe: MWr/MRd with 64-bit address 24 B on the wire"},
    {"pcie.cpld_hdr", "CALIBRATION, PCIe: CplD 20 B on the wire"},
    {"pcie.dllp_overhead_permil",
     "CALIBRATION, PCIe: x16 raw 126 Gb/s -> 113.7 Gb/s after DLLP/ACK/SKP: 9.8 % lost"},
    {"pcie.tags", "PCIe 3.0 Extended Tag Field (8-bit tags), enabled by Linux on capable devices "
                  "(pci_configure_extended_tags)"},
    {"pcie.fc_ph_credits", "Intel Xeon C5500/C3500 datasheet vol. 1 (323103-001) Table 76, x16 "
                           "root port posted headers; estimate: later Xeons no smaller"},
    {"pcie.fc_pd_credits", "same table: posted data, 320 x 16 B = 5 KiB"},
    {"pcie.fc_nph_credits", "same table: non-posted headers"},
    {"pcie.read_latency",
     "fitted with pcie.read_fetch_rate to CALIBRATION, PCIe \"DMA read latency\" (pcie-bench Gen3 "
     "x8 Broadwell: 64 B 546 ns, 2 KiB 1133 ns); 256 B / 1 KiB checked (docs/pcie.md)"},
    {"pcie.read_fetch_rate",
     "same fit: the host returns one read's data at 30.4 Gb/s, its requests in turn; reads of "
     "different DMA operations in parallel (docs/pcie.md \"Read fetch rate\")"},
    {"pcie.write_latency",
     "estimate: half of the ~400 ns unloaded PCIe round trip (CALIBRATION, PCIe: 1RMA)"},
    {"pcie.mmio_latency", "estimate: CPU store through the root complex, half of the ~400 ns round "
                          "trip (CALIBRATION, PCIe)"},
    {"host.cpu.post_send", "host.c default, latency of the call; fitted (with post_send_wqe) to "
                           "ConnectX-4 EDR 32 B ib_send_lat 0.83 us (docs/validation.md "
                           "lat-cx4-send-32-m4096), checked on the other latency rows"},
    {"host.cpu.post_send_wqe",
     "host.c default: per WR, building the WQE (same fit); keeps post lists NIC-bound"},
    {"host.cpu.doorbell_gap",
     "host.c default, occupancy: one thread's doorbells drain 1 / 2.64 M apart, fitted to "
     "CALIBRATION, NICs \"one QP unbatched ~2.6 M writes/s\" (perftest issue 132: 2.64 Mpps)"},
    {"host.cpu.post_recv", "host.c default: receive WQE write, no doorbell MMIO"},
    {"host.cpu.poll_cq", "host.c default: an empty mlx5 poll is ~20-50 ns"},
    {"host.cpu.poll_cqe", "host.c default: parsing one CQE"},
    {"host.cpu.control_verb", "host.c default: create/modify/destroy/reg_mr are system calls"},
    {"host.cpu.mr_pin_page", "host.c default, fitted: one 256 GB ibv_reg_mr took ~20 s (libfabric "
                             "issue 4738); checked in docs/validation.md"},
    {"host.cpu.mr_unpin_page", "host.c default: Mooncake PR 855, 500 GB: deregistration took "
                               "0.239x registration (11.754 s vs 49.198 s)"},
    {"host.cpu.memcpy_rate", "host.c default: ~7 GB/s per core out of cache (CALIBRATION, Host)"},
    {"host.cpu.wakeup", "host.c default: a spinning poller notices a change"},
    {"host.cpu.wakeup_noise", "estimate: no noise unless a profile turns it on (sim/host.c; the "
                              "calibrated profiles use poll-wakeup, docs/noise.md)"},
};

const char *param_default_source(const char *key)
{
    for (size_t i = 0; i < sizeof(default_sources) / sizeof(default_sources[0]); i++)
        if (!strcmp(default_sources[i].key, key))
            return default_sources[i].source;
    return NULL;
}
