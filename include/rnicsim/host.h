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
 * process of the host ran), and charges the elapsed time in one step.
 *
 * The host model (docs/host.md) also knows the host's CPUs and memory:
 * threads run on hardware threads of cores of sockets (hyper-threads
 * share their core, more threads than hardware threads take turns), and
 * memory has a socket and cache lines whose state the NIC's DMA and the
 * CPUs change.  A program tells it where it runs and what it allocates and
 * reads with the calls of the second half of this file; on real hardware
 * they map to pthread_setaffinity_np, libnuma and plain loads. */
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
/* Copy like memcpy and charge the host profile's memcpy cost: len at
 * host.cpu.memcpy_rate (slower from / to the other socket's memory) plus
 * the first cache miss of each side (docs/host.md "Memory"). */
void *host_memcpy(void *dst, const void *src, size_t n);
/* Copy with a loop of one-byte stores, as a copy into a volatile
 * destination compiles (C++ std::copy into a volatile uint8_t *: no
 * memmove, no vector or merged stores), on a core that issues one byte
 * every `ps_per_byte` picoseconds: charged like host_memcpy, but the
 * streaming term no faster than the loop.  On real hardware: that loop. */
void host_memcpy_bytewise(volatile void *dst, const void *src, size_t n, uint32_t ps_per_byte);
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

/* ---- CPUs (docs/host.md "CPUs").  CPU numbers are Linux's: on a host of
 * S sockets x C cores x 2 hyper-threads, CPU c is core c % (S C) (socket
 * (c % (S C)) / C) and CPUs c and c + S C are the two hyper-threads of one
 * core.  A thread starts on an idle core of the NIC's socket while there
 * is one (then an idle core elsewhere, an idle hyper-thread, the least
 * loaded CPU), unless the scenario pins it (`cpus:` / `socket:`). */

/* Hardware threads / sockets of this host (-1 with errno on failure). */
int host_cpus(void);
int host_sockets(void);
/* Socket / physical core of CPU `cpu`; -1 with errno EINVAL if the host
 * has no such CPU. */
int host_cpu_socket(int cpu);
int host_cpu_core(int cpu);
/* The socket the RDMA device `ibdev` (e.g. "mlx5_0"; NULL: the first /
 * the simulated host's NIC) is attached to: 0 when unknown. */
int host_nic_socket(const char *ibdev);
/* Pin the calling thread to CPU `cpu` (it moves there now).  0, or -1
 * with errno EINVAL (no such CPU) or what pthread_setaffinity_np says. */
int host_pin_cpu(int cpu);
/* The CPU / socket the calling thread runs on (-1 with errno if unknown). */
int host_current_cpu(void);
int host_current_socket(void);

/* ---- Memory (docs/host.md "Memory"). */

/* `socket` argument of host_alloc: the calling thread's socket. */
#define HOST_SOCKET_LOCAL (-1)
/* `len` bytes of zeroed, page-aligned memory on socket `socket`
 * (HOST_SOCKET_LOCAL: the caller's).  NULL with errno EINVAL (no such
 * socket, len 0) or ENOMEM.  Free with host_free(p, len).  Memory from
 * anywhere else (malloc, the stack) counts as on the NIC's socket. */
void *host_alloc(size_t len, int socket);
/* The same on 2 MiB pages: the cores' TLBs and the NIC's page table (an
 * MR over it) hold one entry per 2 MiB instead of per 4 KiB.  On real
 * hardware: a 2 MiB-aligned mapping of len rounded up to 2 MiB, advised
 * MADV_HUGEPAGE before its first touch (transparent huge pages, which the
 * kernel may refuse: then 4 KiB pages, as host_alloc).  Free with
 * host_free(p, len). */
void *host_alloc_huge(size_t len, int socket);
void host_free(void *p, size_t len);
/* Socket of the memory at `addr` (-1 with errno if unknown). */
int host_mem_socket(const void *addr);
/* The calling thread reads [addr, addr + len), in order: charges the CPU
 * time of every 64 B cache line it spans by the line's state - a few ns
 * for a line in its caches, a miss for a line the NIC wrote since it last
 * read it (or another core wrote), memory latency for a line never
 * touched, more from the other socket.  Misses of one call overlap
 * (host.mem.mlp).  On real hardware: one load per line. */
void host_touch(const void *addr, size_t len);
/* The calling thread has written [addr, addr + len) (with its own
 * stores): charges like host_touch, and the lines become this core's,
 * modified.  On real hardware a no-op (the stores were the cost). */
void host_touch_write(void *addr, size_t len);
/* Many accesses of one loop, charged once: a pass over an array of slots
 * (a thread scanning message slots for markers, reading and zeroing the
 * messages it finds).  host_touch_add records `count` accesses of `len`
 * bytes, `stride` bytes apart from `addr` (write: the thread's stores),
 * costed per line like host_touch; host_touch_charge charges the batch as
 * one computation, its misses overlapping (host.mem.mlp) across the whole
 * batch, as a loop's independent loads do, and empties it.  Zero-initialise
 * a batch before use.  On real hardware: host_touch per read access;
 * host_touch_charge does nothing. */
struct host_touches {
    uint64_t hits_ps, miss_sum_ps, miss_max_ps;
    int wrote;
};
void host_touch_add(struct host_touches *b, const void *addr, size_t len, size_t stride,
                    size_t count, int write);
void host_touch_charge(struct host_touches *b);

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
