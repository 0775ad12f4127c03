/* rnicsim portability header for protocol code.
 *
 * Protocol code uses <infiniband/verbs.h> plus these few calls.  Inside the
 * simulator they act in simulated time on the simulated host the program
 * runs on; built against the system libibverbs (RNICSIM_REAL_VERBS) they
 * map to plain POSIX (clock_gettime, pthreads, TCP for out-of-band data).
 *
 * In simulation a busy loop must call host_relax() (or ibv_poll_cq) in its
 * body: the simulator parks the process there until something it could
 * observe changes (a DMA write into this host's memory, a CQE, or another
 * process of the host ran), and charges the elapsed time in one step. */
#ifndef RNICSIM_HOST_API_H
#define RNICSIM_HOST_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Current time in nanoseconds (simulated time in the simulator). */
uint64_t host_now_ns(void);
/* Spend `ns` nanoseconds of CPU time (declared computation). */
void host_compute(uint64_t ns);
/* Copy like memcpy and charge the host profile's memcpy cost. */
void *host_memcpy(void *dst, const void *src, size_t n);
/* Body of a spin loop: wait until memory of this host may have changed. */
void host_relax(void);

/* Threads of the same program (same host).  Returns a handle >= 0, or -1
 * with errno set. */
int host_thread_start(void (*fn)(void *arg), void *arg);
int host_thread_join(int handle);

/* Out-of-band exchange (QP numbers, keys, addresses) through a key/value
 * board shared by all programs of a run (TCP to the server program on real
 * hardware).  put stores a copy; get blocks until the key exists and then
 * copies exactly `len` bytes (-1 with errno EMSGSIZE if the stored value has
 * another length). */
int host_oob_put(const char *key, const void *buf, size_t len);
int host_oob_get(const char *key, void *buf, size_t len);

/* Memory of a PCIe device of this host ("gpu", "fpga") that the host's
 * RNIC reaches peer to peer: register it with ibv_reg_mr like host memory
 * (GPUDirect RDMA / PeerDirect); the NIC's DMA to it crosses the device's
 * own PCIe link.  The program itself may read and write it (it stands for
 * the device's kernels doing so).  NULL with errno ENODEV (no such device;
 * on real hardware: use the device's own allocator, e.g. cudaMalloc) or
 * ENOMEM (the device's memory is used up). */
void *host_device_alloc(const char *device, size_t bytes);
void host_device_free(void *p);

/* Name of the host the program runs on ("h0" ...; gethostname on real hw). */
const char *host_name(void);

/* Mark a point of the program in the simulator's event trace (a "note"
 * record with `static_text`, which must outlive the run, e.g. a string
 * literal, and `value`, e.g. a message number); `rnicsim table2` cuts its
 * per-message windows at such marks.  Costs no simulated time, and nothing
 * when the trace is off; a no-op on real hardware. */
void host_trace_mark(const char *static_text, uint64_t value);

/* Results: one row of a named table, as key/value pairs.  In the simulator
 * rows go into the run's JSON results ("tables"); on real hardware they are
 * printed as "table: key=value ..." lines. */
struct host_kv {
    const char *key;
    double value;
};
void host_report(const char *table, const struct host_kv *kv, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* RNICSIM_HOST_API_H */
