/* <rnicsim/host.h> in the simulator: the portability calls of protocol
 * code, acting in simulated time on the simulated host the calling
 * process runs on.  The run is reached from the running process
 * (host_thread.program -> struct prog_inst -> struct run); there is no
 * global state, so several runs (rnicsim bench) can live in one process.
 *
 * These functions are exported by the rnicsim executable (ENABLE_EXPORTS)
 * so that user programs loaded with dlopen resolve them.
 *
 * Every call except host_relax() counts as "another call" for the
 * spin-poll heuristic (host_note_call), so a loop that does real work
 * between empty polls is not mistaken for a pure spin. */
#include "rnicsim/host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/host/cpu.h"
#include "sim/host/mem.h"
#include "sim/trace.h"
#include "tools/rnicsim/rnicsim.h"

/* The out-of-band board: a hash table (open addressing, FNV-1a of the key,
 * grown at half load) of separately allocated entries, so an entry's wait
 * queue never moves.  A get of a key nobody has put yet creates the entry
 * without a value and waits on that key's own queue: a put wakes only the
 * programs waiting for its key.  (A linear array searched with strcmp, with
 * one queue for all keys, made a 1024-host permutation spend two thirds of
 * its CPU time in strcmp: every put woke every waiter to search again.) */
struct oob_entry {
    char *key;
    uint64_t hash;
    void *value; /* NULL until the first put */
    size_t len;
    bool present;
    struct sim_waitq wq; /* programs waiting for this key */
};

/* A thread started with host_thread_start. */
struct run_thread {
    struct prog_inst *pi;
    void (*fn)(void *arg);
    void *arg;
    struct sim_proc *proc;
    char name[112]; /* "h1/perftest#0.t3" (kept alive for the core) */
};

static struct prog_inst *current_inst(void)
{
    struct host_thread *t = host_thread_current();
    return t ? (struct prog_inst *)t->program : NULL;
}

uint64_t host_now_ns(void)
{
    struct sim_proc *p = sim_proc_current();
    host_note_call();
    return p ? sim_now(sim_proc_sim(p)) / SIM_NS : 0;
}

void host_compute(uint64_t ns)
{
    host_note_call();
    if (ns > SIM_TIME_NEVER / SIM_NS)
        ns = SIM_TIME_NEVER / SIM_NS;
    host_charge(ns * SIM_NS);
}

/* The core and socket of the running thread (the NIC's socket, core 0,
 * for a thread the CPU model has not placed). */
static void thread_where(const struct host_thread *t, uint32_t *core, uint32_t *socket)
{
    *core = t->vcpu ? t->vcpu->core : 0;
    *socket = t->vcpu ? t->vcpu->socket : t->host->cpu.topo.nic_socket;
}

void *host_memcpy(void *dst, const void *src, size_t n)
{
    host_note_call();
    if (n)
        memcpy(dst, src, n);
    struct host_thread *t = host_thread_current();
    if (t && n) {
        uint32_t core, socket;
        thread_where(t, &core, &socket);
        host_charge(host_mem_copy(t->host, core, socket, (uintptr_t)dst, (uintptr_t)src, n));
    }
    return dst;
}

void host_memcpy_bytewise(volatile void *dst, const void *src, size_t n, uint32_t ps_per_byte)
{
    host_note_call();
    volatile uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
    struct host_thread *t = host_thread_current();
    if (t && n) {
        uint32_t core, socket;
        thread_where(t, &core, &socket);
        host_charge(host_mem_copy_loop(t->host, core, socket, (uintptr_t)dst, (uintptr_t)src, n,
                                       ps_per_byte));
    }
}

void host_touch(const void *addr, size_t len)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t || !addr || !len)
        return;
    uint32_t core, socket;
    thread_where(t, &core, &socket);
    /* reading changes nothing another thread could see: wakes no spinner */
    host_charge_private(host_mem_access(t->host, core, socket, (uintptr_t)addr, len, false));
}

void host_touch_write(void *addr, size_t len)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t || !addr || !len)
        return;
    uint32_t core, socket;
    thread_where(t, &core, &socket);
    host_charge(host_mem_access(t->host, core, socket, (uintptr_t)addr, len, true));
}

void host_touch_add(struct host_touches *b, const void *addr, size_t len, size_t stride,
                    size_t count, int write)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t || !b || !addr || !len)
        return;
    uint32_t core, socket;
    thread_where(t, &core, &socket);
    host_mem_access_acc_n(t->host, core, socket, (uintptr_t)addr, len, stride, count, write != 0,
                          &b->hits_ps, &b->miss_sum_ps, &b->miss_max_ps);
    if (write)
        b->wrote = 1;
}

void host_touch_charge(struct host_touches *b)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!b)
        return;
    sim_time_t ps = 0;
    if (t && (b->hits_ps || b->miss_sum_ps))
        ps = b->hits_ps + host_mem_overlap(t->host, b->miss_sum_ps, b->miss_max_ps);
    int wrote = b->wrote;
    *b = (struct host_touches){0};
    if (!ps)
        return;
    /* only stores can change what another thread sees */
    if (wrote)
        host_charge(ps);
    else
        host_charge_private(ps);
}

/* ---------------------------------------------------------------- CPUs and sockets */

static struct host *host_or_eperm(void)
{
    struct host *h = host_of_current();
    if (!h)
        errno = EPERM;
    return h;
}

int host_cpus(void)
{
    host_note_call();
    struct host *h = host_or_eperm();
    return h ? (int)host_topo_ncpus(&h->cpu.topo) : -1;
}

int host_sockets(void)
{
    host_note_call();
    struct host *h = host_or_eperm();
    return h ? (int)h->cpu.topo.sockets : -1;
}

int host_cpu_socket(int cpu)
{
    host_note_call();
    struct host *h = host_or_eperm();
    if (!h)
        return -1;
    if (cpu < 0 || (uint32_t)cpu >= host_topo_ncpus(&h->cpu.topo)) {
        errno = EINVAL;
        return -1;
    }
    return (int)host_topo_cpu_socket(&h->cpu.topo, (uint32_t)cpu);
}

int host_cpu_core(int cpu)
{
    host_note_call();
    struct host *h = host_or_eperm();
    if (!h)
        return -1;
    if (cpu < 0 || (uint32_t)cpu >= host_topo_ncpus(&h->cpu.topo)) {
        errno = EINVAL;
        return -1;
    }
    return (int)host_topo_cpu_core(&h->cpu.topo, (uint32_t)cpu);
}

int host_nic_socket(const char *ibdev)
{
    (void)ibdev; /* a simulated host has one NIC */
    host_note_call();
    struct host *h = host_or_eperm();
    return h ? (int)h->cpu.topo.nic_socket : -1;
}

int host_pin_cpu(int cpu)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t) {
        errno = EPERM;
        return -1;
    }
    int rc = host_sched_pin(t, cpu);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

int host_current_cpu(void)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t || !t->vcpu) {
        errno = EPERM;
        return -1;
    }
    return (int)t->vcpu->id;
}

int host_current_socket(void)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t || !t->vcpu) {
        errno = EPERM;
        return -1;
    }
    return (int)t->vcpu->socket;
}

/* ---------------------------------------------------------------- memory on sockets */

#define HOST_ALLOC_ALIGN 4096u

static void *alloc_on(size_t len, int socket, bool huge)
{
    host_note_call();
    struct host_thread *t = host_thread_current();
    if (!t) {
        errno = EPERM;
        return NULL;
    }
    struct host *h = t->host;
    if (!len || len > SIZE_MAX - HOST_ALLOC_ALIGN || socket < HOST_SOCKET_LOCAL ||
        socket >= (int)h->cpu.topo.sockets) {
        errno = EINVAL;
        return NULL;
    }
    uint32_t core, s;
    thread_where(t, &core, &s);
    if (socket != HOST_SOCKET_LOCAL)
        s = (uint32_t)socket;
    struct host_mem *m = host_mem_get(h);
    size_t n = (len + HOST_ALLOC_ALIGN - 1) / HOST_ALLOC_ALIGN * HOST_ALLOC_ALIGN;
    void *p = NULL;
    if (!m || posix_memalign(&p, HOST_ALLOC_ALIGN, n)) {
        errno = ENOMEM;
        return NULL;
    }
    memset(p, 0, n);
    if (host_mem_add_range(m, (uintptr_t)p, n, s, huge)) {
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

void *host_alloc(size_t len, int socket)
{
    return alloc_on(len, socket, false);
}

/* The simulator keeps the buffer where host_alloc would and records its
 * pages as 2 MiB (the cores' TLBs, the NIC's page table): the length is
 * not rounded up, as no program may touch past it. */
void *host_alloc_huge(size_t len, int socket)
{
    return alloc_on(len, socket, true);
}

void host_free(void *p, size_t len)
{
    (void)len; /* the range knows its length */
    host_note_call();
    if (!p)
        return;
    struct host *h = host_of_current();
    if (h && h->mem)
        host_mem_remove_range(h->mem, (uintptr_t)p);
    free(p);
}

int host_mem_socket(const void *addr)
{
    host_note_call();
    struct host *h = host_or_eperm();
    if (!h)
        return -1;
    return (int)(h->mem ? host_mem_socket_of(h->mem, (uintptr_t)addr) : h->cpu.topo.nic_socket);
}

void host_relax(void)
{
    host_park("host_relax()");
}

/* ---------------------------------------------------------------- threads */

static void thread_entry(void *arg)
{
    struct run_thread *th = arg;
    th->fn(th->arg);
    run_process_finished(th->pi);
}

int host_thread_start(void (*fn)(void *arg), void *arg)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi) {
        errno = EPERM;
        return -1;
    }
    if (!fn) {
        errno = EINVAL;
        return -1;
    }
    struct run *r = pi->run;
    if (r->nthreads == r->threads_cap) {
        r->threads_cap = r->threads_cap ? 2 * r->threads_cap : 8;
        r->threads = xrealloc_or_die(r->threads, r->threads_cap * sizeof(*r->threads));
    }
    struct run_thread *th = xcalloc_or_die(1, sizeof(*th));
    th->pi = pi;
    th->fn = fn;
    th->arg = arg;
    snprintf(th->name, sizeof(th->name), "%s.t%zu", pi->proc_name, r->nthreads);
    /* the scenario's cpus: list, round robin after the main thread; else,
     * like pthread_create, the creator's affinity (its CPU if pinned, its
     * socket if bound) */
    const struct scn_program *d = pi->def;
    struct host_thread *me = host_thread_current();
    int cpu = d->ncpus                       ? d->cpus[++pi->threads_started % d->ncpus]
              : me && me->pinned && me->vcpu ? (int)me->vcpu->id
                                             : -1;
    int socket = me ? me->bind_socket : d->socket;
    th->proc = host_spawn_on(pi->host, th->name, thread_entry, th, pi, d->stack_bytes, cpu, socket);
    if (!th->proc) {
        free(th);
        errno = ENOMEM;
        return -1;
    }
    sim_proc_set_daemon(th->proc, pi->def->daemon);
    if (!pi->def->daemon)
        r->live_nondaemon++;
    r->threads[r->nthreads] = th;
    return (int)r->nthreads++;
}

int host_thread_join(int handle)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi) {
        errno = EPERM;
        return -1;
    }
    struct run *r = pi->run;
    if (handle < 0 || (size_t)handle >= r->nthreads) {
        errno = ESRCH;
        return -1;
    }
    struct run_thread *th = r->threads[handle];
    if (th->proc == sim_proc_current()) {
        errno = EDEADLK;
        return -1;
    }
    struct host_thread *t = host_thread_current();
    snprintf(t->why, sizeof(t->why), "host_thread_join(%d)", handle);
    host_block_begin(); /* pthread_join sleeps: the CPU is free for others */
    sim_proc_join(th->proc);
    host_block_end();
    return 0;
}

/* ---------------------------------------------------------------- out-of-band board */

static uint64_t oob_hash(const char *key)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */
    for (const unsigned char *c = (const unsigned char *)key; *c; c++)
        h = (h ^ *c) * 1099511628211ull;
    return h;
}

/* The slot of `key` in a table of `cap` (a power of two) slots: its entry,
 * or the empty slot where it would go. */
static size_t oob_slot(struct oob_entry **tab, size_t cap, const char *key, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    while (tab[i] && (tab[i]->hash != h || strcmp(tab[i]->key, key) != 0))
        i = (i + 1) & (cap - 1);
    return i;
}

/* The entry of `key`, created (without a value) if absent. */
static struct oob_entry *oob_entry_of(struct run *r, const char *key)
{
    uint64_t h = oob_hash(key);
    if (2 * (r->noob + 1) > r->oob_cap) {
        size_t cap = r->oob_cap ? 2 * r->oob_cap : 64;
        struct oob_entry **tab = xcalloc_or_die(cap, sizeof(*tab));
        for (size_t i = 0; i < r->oob_cap; i++)
            if (r->oob[i])
                tab[oob_slot(tab, cap, r->oob[i]->key, r->oob[i]->hash)] = r->oob[i];
        free(r->oob);
        r->oob = tab;
        r->oob_cap = cap;
    }
    size_t i = oob_slot(r->oob, r->oob_cap, key, h);
    if (!r->oob[i]) {
        struct oob_entry *e = xcalloc_or_die(1, sizeof(*e));
        e->key = xstrdup_or_die(key);
        e->hash = h;
        sim_waitq_init(&e->wq, "host_oob_get");
        r->oob[i] = e;
        r->noob++;
    }
    return r->oob[i];
}

int host_oob_put(const char *key, const void *buf, size_t len)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi) {
        errno = EPERM;
        return -1;
    }
    if (!key || (!buf && len)) {
        errno = EINVAL;
        return -1;
    }
    struct run *r = pi->run;
    void *copy = xcalloc_or_die(1, len ? len : 1);
    if (len)
        memcpy(copy, buf, len);
    struct oob_entry *e = oob_entry_of(r, key);
    free(e->value); /* a later put replaces the value */
    e->value = copy;
    e->len = len;
    e->present = true;
    if (!sim_waitq_empty(&e->wq))
        sim_waitq_wake_all(r->world->sim, &e->wq);
    return 0;
}

int host_oob_get(const char *key, void *buf, size_t len)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi) {
        errno = EPERM;
        return -1;
    }
    if (!key || (!buf && len)) {
        errno = EINVAL;
        return -1;
    }
    struct run *r = pi->run;
    struct oob_entry *e = oob_entry_of(r, key);
    for (;;) {
        if (e->present) {
            if (e->len != len) {
                errno = EMSGSIZE;
                return -1;
            }
            if (len)
                memcpy(buf, e->value, len);
            return 0;
        }
        struct host_thread *t = host_thread_current();
        snprintf(t->why, sizeof(t->why), "host_oob_get(\"%s\")", key);
        host_block_begin(); /* asleep in recv(2) on real hardware */
        sim_waitq_wait(&e->wq, t->why);
        host_block_end();
    }
}

/* ---------------------------------------------------------------- peer devices */

void *host_device_alloc(const char *device, size_t bytes)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    struct host *h = host_of_current();
    if (!pi || !h || !h->nic || !device || !bytes) {
        errno = pi && h && h->nic ? EINVAL : ENODEV;
        return NULL;
    }
    struct world *w = pi->run->world;
    size_t d = 0;
    while (hw_device_names[d] && strcmp(hw_device_names[d], device) != 0)
        d++;
    size_t slot = (size_t)h->id * HW_N_DEVICES + d;
    if (d >= HW_N_DEVICES || h->id >= w->nhosts || !w->dev_links[slot]) {
        errno = ENODEV;
        return NULL;
    }
    const struct pu_dev_params *dp = &pi->run->scn->hw.dev[d];
    if (bytes > dp->mem_bytes - w->dev_used[slot]) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, 65536, bytes) != 0) { /* GPU pages are 64 KiB */
        errno = ENOMEM;
        return NULL;
    }
    if (nic_peer_mem_add(h->nic, p, bytes, w->dev_links[slot])) {
        free(p);
        return NULL;
    }
    w->dev_allocs = xrealloc_or_die(w->dev_allocs, (w->n_dev_allocs + 1) * sizeof(*w->dev_allocs));
    w->dev_allocs[w->n_dev_allocs++] = (struct dev_alloc){p, bytes, slot};
    w->dev_used[slot] += bytes;
    host_charge(h->cpu.control_verb_ps); /* the driver call */
    return p;
}

void host_device_free(void *p)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi || !p)
        return;
    struct world *w = pi->run->world;
    for (size_t i = 0; i < w->n_dev_allocs; i++) {
        if (w->dev_allocs[i].p != p)
            continue;
        size_t slot = w->dev_allocs[i].slot;
        nic_peer_mem_remove(w->nics[slot / HW_N_DEVICES], p);
        w->dev_used[slot] -= w->dev_allocs[i].bytes;
        w->dev_allocs[i] = w->dev_allocs[--w->n_dev_allocs];
        free(p);
        return;
    }
}

const char *host_name(void)
{
    host_note_call();
    struct host *h = host_of_current();
    return h ? h->name : "";
}

/* ---------------------------------------------------------------- trace marks */

void host_trace_mark(const char *static_text, uint64_t value)
{
    struct host *h = host_of_current();
    if (h && sim_trace_enabled(h->sim))
        sim_trace_mark(h->sim, h->id, static_text, value);
}

/* ---------------------------------------------------------------- results */

void host_report(const char *table, const struct host_kv *kv, size_t n)
{
    host_note_call();
    struct prog_inst *pi = current_inst();
    if (!pi || !table || (!kv && n))
        return;
    struct run *r = pi->run;
    struct report_table *tb = NULL;
    for (size_t i = 0; i < r->ntables; i++)
        if (strcmp(r->tables[i].name, table) == 0)
            tb = &r->tables[i];
    if (!tb) {
        if (r->ntables == r->tables_cap) {
            r->tables_cap = r->tables_cap ? 2 * r->tables_cap : 8;
            r->tables = xrealloc_or_die(r->tables, r->tables_cap * sizeof(*r->tables));
        }
        tb = &r->tables[r->ntables++];
        memset(tb, 0, sizeof(*tb));
        tb->name = xstrdup_or_die(table);
    }
    if (tb->nrows == tb->cap) {
        tb->cap = tb->cap ? 2 * tb->cap : 16;
        tb->rows = xrealloc_or_die(tb->rows, tb->cap * sizeof(*tb->rows));
    }
    struct report_row *row = &tb->rows[tb->nrows++];
    row->n = n;
    row->keys = xcalloc_or_die(n, sizeof(char *));
    row->values = xcalloc_or_die(n, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        row->keys[i] = xstrdup_or_die(kv[i].key ? kv[i].key : "");
        row->values[i] = kv[i].value;
    }
}

void host_api_free_run(struct run *r)
{
    for (size_t i = 0; i < r->oob_cap; i++) {
        if (!r->oob[i])
            continue;
        free(r->oob[i]->key);
        free(r->oob[i]->value);
        free(r->oob[i]);
    }
    free(r->oob);
    r->oob = NULL;
    r->noob = r->oob_cap = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        free(r->threads[i]);
    free(r->threads);
    r->threads = NULL;
    r->nthreads = 0;
    for (size_t i = 0; i < r->ntables; i++) {
        struct report_table *tb = &r->tables[i];
        for (size_t k = 0; k < tb->nrows; k++) {
            for (size_t j = 0; j < tb->rows[k].n; j++)
                free(tb->rows[k].keys[j]);
            free(tb->rows[k].keys);
            free(tb->rows[k].values);
        }
        free(tb->rows);
        free(tb->name);
    }
    free(r->tables);
    r->tables = NULL;
    r->ntables = 0;
}
