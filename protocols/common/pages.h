/* Buffers on pages of their own, for the memory a program's results depend
 * on.
 *
 * The host model prices a CPU access by the lines and pages it touches, and
 * the NIC its MTT entries by the pages a registered buffer spans; pages are
 * renumbered deterministically (docs/host.md), a buffer's place inside its
 * page is not.  A block from malloc lands wherever the heap's earlier
 * allocations left room (the simulator's own strings among them, such as
 * the scenario's path), and the allocator decides whether a large block is
 * a mapping of its own (glibc's threshold moves as blocks are freed; ASan's
 * allocator has other rules).  So a malloc'd buffer the model touches can
 * give the same scenario other line, page and MTT counts, and other
 * results, under another path spelling or allocator.  A buffer from here
 * starts a page and spans whole pages whatever the allocator.
 *
 * Give such memory back with pages_free / pages_unmap only at the end of a
 * run: the host model keeps the line state of pages it has seen, and memory
 * given back and taken again may come back at the same address (warm) or
 * not, depending on the allocator.  A buffer taken and given back per
 * message belongs in host_alloc / host_free (rnicsim/host.h), whose pages
 * the host model forgets when they are freed.
 *
 * Only libc (and mmap): builds in the simulator and against real rdma-core.
 * No state: safe in programs that run as coroutines in one process. */
#ifndef RNICSIM_PROTOCOLS_COMMON_PAGES_H
#define RNICSIM_PROTOCOLS_COMMON_PAGES_H

#include <stddef.h>

#define PAGES_BYTES 4096u

/* Page aligned, rounded up to whole pages (one at least); not zeroed.  NULL
 * when out of memory.  Free with pages_free. */
void *pages_alloc(size_t bytes);

/* pages_alloc, zeroed. */
void *pages_zalloc(size_t bytes);

void pages_free(void *p);

/* A zeroed mapping of its own: pages never written are never backed (a
 * receive area sized for a queue's depth that mostly stays empty).  NULL
 * when the mapping fails.  Give back with pages_unmap(p, the same bytes). */
void *pages_map(size_t bytes);
void pages_unmap(void *p, size_t bytes);

#endif
