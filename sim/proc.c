/* Processes: coroutines on their own mmap()ed stacks, each with a
 * PROT_NONE guard page below it so an overflow faults instead of silently
 * corrupting a neighbour.  Switching is a dozen instructions of assembly
 * (ctx_switch_<arch>.S: save callee-saved registers, swap stack pointers);
 * ucontext is the fallback for other architectures (it also saves the
 * signal mask with a system call, which is why it is not the default).
 *
 * Under AddressSanitizer every switch is announced with
 * __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber so ASan
 * knows which stack is live (otherwise it reports false stack overflows and
 * misses fake-stack frames). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

#ifdef RNICSIM_USE_UCONTEXT
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define RNICSIM_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNICSIM_ASAN_FIBERS 1
#endif
#endif

#ifdef RNICSIM_ASAN_FIBERS
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
#endif

enum proc_state {
    PROC_READY,    /* wake event pending, not started or resumed yet */
    PROC_RUNNING,  /* on the CPU */
    PROC_SLEEPING, /* wake event pending at a future time */
    PROC_WAITING,  /* on a wait queue (maybe with a deadline) */
    PROC_FINISHED,
};

struct sim_proc {
    struct sim *sim;
    char *name;
    sim_proc_fn fn;
    void *arg;
    enum proc_state state;
    bool daemon;
    void *user, *user_owned;

    /* stack: [map, map + page) guard, [map + page, map + map_bytes) usable */
    void *map;
    size_t map_bytes, page_bytes;
    void *sp; /* saved stack pointer while switched out */
#ifdef RNICSIM_USE_UCONTEXT
    ucontext_t uc;
#endif
#ifdef RNICSIM_ASAN_FIBERS
    void *fake_stack;
#endif

    struct sim_event wake_ev;
    /* wait queue membership */
    struct sim_waitq *waiting_on;
    struct sim_proc *wq_prev, *wq_next;
    bool woken_by_queue;
    const char *why;
    struct sim_waitq joiners;
    /* Called on the scheduler's stack just before the process resumes
     * (in = true) and just after it gives the CPU back (in = false). */
    sim_switch_hook_fn hook;
    void *hook_arg;
};

/* The running process.  Thread-local because several simulations may run
 * in one program only on different threads (the verbs API has no sim
 * argument). */
static _Thread_local struct sim_proc *current;

#ifdef RNICSIM_USE_UCONTEXT
static _Thread_local ucontext_t main_uc;
#else
/* ctx_switch_<arch>.S */
void rnicsim_ctx_switch(void **save_sp, void *new_sp);
void rnicsim_ctx_start(void);
#endif

static void proc_entry(struct sim_proc *p);
static void waitq_unlink(struct sim_waitq *wq, struct sim_proc *p);

/* ---------------------------------------------------------------- switching */

static void switch_in(struct sim *sim, struct sim_proc *p)
{
    current = p;
    sim->switches++;
    p->state = PROC_RUNNING;
    if (p->hook)
        p->hook(p->hook_arg, true);
#ifdef RNICSIM_ASAN_FIBERS
    void *main_fake = NULL;
    __sanitizer_start_switch_fiber(&main_fake, (char *)p->map + p->page_bytes,
                                   p->map_bytes - p->page_bytes);
#endif
#ifdef RNICSIM_USE_UCONTEXT
    (void)sim;
    swapcontext(&main_uc, &p->uc);
#else
    rnicsim_ctx_switch(&sim->main_sp, p->sp);
#endif
#ifdef RNICSIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(main_fake, NULL, NULL);
#endif
    if (p->hook)
        p->hook(p->hook_arg, false);
    current = NULL;
}

/* Give the CPU back to the event loop; returns when resumed. */
static void switch_out(struct sim_proc *p)
{
    struct sim *sim = p->sim;
#ifdef RNICSIM_ASAN_FIBERS
    __sanitizer_start_switch_fiber(p->state == PROC_FINISHED ? NULL : &p->fake_stack,
                                   sim->main_stack_bottom, sim->main_stack_size);
#endif
#ifdef RNICSIM_USE_UCONTEXT
    (void)sim;
    swapcontext(&p->uc, &main_uc);
#else
    rnicsim_ctx_switch(&p->sp, sim->main_sp);
#endif
#ifdef RNICSIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(p->fake_stack, &sim->main_stack_bottom, &sim->main_stack_size);
#endif
}

#ifdef RNICSIM_USE_UCONTEXT
static void uc_entry(unsigned hi, unsigned lo)
{
    struct sim_proc *p = (struct sim_proc *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    proc_entry(p);
}
#else
/* Called from rnicsim_ctx_start with the process pointer. */
void rnicsim_proc_entry(struct sim_proc *p);
void rnicsim_proc_entry(struct sim_proc *p)
{
    proc_entry(p);
}
#endif

static void proc_entry(struct sim_proc *p)
{
#ifdef RNICSIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(NULL, &p->sim->main_stack_bottom, &p->sim->main_stack_size);
#endif
    p->fn(p->arg);
    p->state = PROC_FINISHED;
    sim_waitq_wake_all(p->sim, &p->joiners);
    switch_out(p);
    abort(); /* a finished process is never resumed */
}

static void stack_release(struct sim_proc *p)
{
    if (p->map) {
#ifdef RNICSIM_ASAN_FIBERS
        /* A process stopped mid-run (deadlock, time limit, a run stopped
         * at a failure) leaves its frames' redzones poisoned in ASan's
         * shadow; a later stack mapped at the same address would inherit
         * them (false stack-buffer-overflows in the next run of the same
         * process: check-order, the fuzz targets). */
        __asan_unpoison_memory_region((char *)p->map + p->page_bytes, p->map_bytes - p->page_bytes);
#endif
        munmap(p->map, p->map_bytes);
        p->map = NULL;
    }
}

/* The wake event: start / resume the process, or time out its wait. */
static void proc_wake(struct sim *sim, struct sim_event *ev)
{
    struct sim_proc *p = ev->ctx;
    if (p->state == PROC_WAITING && p->waiting_on) { /* deadline passed */
        waitq_unlink(p->waiting_on, p);
        p->woken_by_queue = false;
    }
    switch_in(sim, p);
    if (p->state == PROC_FINISHED)
        stack_release(p); /* we are back on the scheduler's stack */
}

/* ---------------------------------------------------------------- lifecycle */

struct sim_proc *sim_proc_create(struct sim *sim, const char *name, sim_proc_fn fn, void *arg,
                                 size_t stack_bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (stack_bytes == 0)
        stack_bytes = SIM_PROC_DEFAULT_STACK_BYTES;
#ifdef RNICSIM_ASAN_FIBERS
    stack_bytes *= 2; /* ASan's redzones make frames larger */
#endif
    stack_bytes = (stack_bytes + page - 1) / page * page;

    if (sim->n_procs == sim->cap_procs) {
        size_t cap = sim->cap_procs ? sim->cap_procs * 2 : 16;
        struct sim_proc **v = realloc(sim->procs, cap * sizeof(*v));
        if (!v) {
            errno = ENOMEM;
            return NULL;
        }
        sim->procs = v;
        sim->cap_procs = cap;
    }
    struct sim_proc *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    p->name = strdup(name ? name : "proc");
    p->map_bytes = stack_bytes + page;
    p->page_bytes = page;
    p->map = mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (!p->name || p->map == MAP_FAILED || mprotect(p->map, page, PROT_NONE) != 0) {
        int e = p->name ? errno : ENOMEM;
        if (p->map != MAP_FAILED && p->map)
            munmap(p->map, p->map_bytes);
        free(p->name);
        free(p);
        errno = e;
        return NULL;
    }
    p->sim = sim;
    p->fn = fn;
    p->arg = arg;
    p->state = PROC_READY;
    sim_waitq_init(&p->joiners, "join");
    sim_event_init(&p->wake_ev, proc_wake, p, "proc");

    char *top = (char *)p->map + p->map_bytes;
#ifdef RNICSIM_USE_UCONTEXT
    getcontext(&p->uc);
    p->uc.uc_stack.ss_sp = (char *)p->map + page;
    p->uc.uc_stack.ss_size = stack_bytes;
    p->uc.uc_link = NULL;
    uintptr_t u = (uintptr_t)p;
    makecontext(&p->uc, (void (*)(void))uc_entry, 2, (unsigned)(u >> 32), (unsigned)u);
    (void)top;
#elif defined(__x86_64__)
    /* Initial frame popped by rnicsim_ctx_switch: r15 r14 r13 r12 rbx rbp,
     * then the return address rnicsim_ctx_start, which calls r13(r12) with
     * a 16-byte aligned stack. */
    uintptr_t sp_after_ret = ((uintptr_t)top - 16) & ~(uintptr_t)15;
    uintptr_t *frame = (uintptr_t *)(sp_after_ret - 7 * sizeof(uintptr_t));
    frame[0] = 0;                             /* r15 */
    frame[1] = 0;                             /* r14 */
    frame[2] = (uintptr_t)rnicsim_proc_entry; /* r13: function */
    frame[3] = (uintptr_t)p;                  /* r12: argument */
    frame[4] = 0;                             /* rbx */
    frame[5] = 0;                             /* rbp */
    frame[6] = (uintptr_t)rnicsim_ctx_start;  /* return address */
    p->sp = frame;
#elif defined(__aarch64__)
    /* Initial frame popped by rnicsim_ctx_switch (22 slots of 8 bytes):
     * x19..x28, x29, x30, d8..d15; x30 = rnicsim_ctx_start, which calls
     * x20(x19). */
    uintptr_t sp_top = ((uintptr_t)top - 16) & ~(uintptr_t)15;
    uintptr_t *frame = (uintptr_t *)(sp_top - 176);
    memset(frame, 0, 176);
    frame[0] = (uintptr_t)p;                  /* x19: argument */
    frame[1] = (uintptr_t)rnicsim_proc_entry; /* x20: function */
    frame[11] = (uintptr_t)rnicsim_ctx_start; /* x30 */
    p->sp = frame;
#else
#error "no assembly context switch for this architecture: configure with -DRNICSIM_UCONTEXT=ON"
#endif

    sim->procs[sim->n_procs++] = p;
    sim_schedule_at(sim, &p->wake_ev, sim->now);
    return p;
}

void sim_procs_free(struct sim *sim)
{
    for (size_t i = 0; i < sim->n_procs; i++) {
        struct sim_proc *p = sim->procs[i];
        stack_release(p);
        free(p->user_owned);
        free(p->name);
        free(p);
    }
    free(sim->procs);
    sim->procs = NULL;
    sim->n_procs = sim->cap_procs = 0;
}

bool sim_procs_live(const struct sim *sim)
{
    for (size_t i = 0; i < sim->n_procs; i++)
        if (!sim->procs[i]->daemon && sim->procs[i]->state != PROC_FINISHED)
            return true;
    return false;
}

void sim_deadlock_report(const struct sim *sim, FILE *out)
{
    for (size_t i = 0; i < sim->n_procs; i++) {
        const struct sim_proc *p = sim->procs[i];
        if (p->daemon || p->state == PROC_FINISHED)
            continue;
        const char *where = p->state == PROC_WAITING && p->why ? p->why
                            : p->state == PROC_SLEEPING        ? "busy (CPU time or sleep)"
                                                               : "ready to run";
        fprintf(out, "  %s: %s\n", p->name, where);
    }
}

void sim_proc_set_host(struct sim_proc *p, uint32_t host)
{
    p->wake_ev.owner = host + 1;
}

void sim_proc_set_switch_hook(struct sim_proc *p, sim_switch_hook_fn fn, void *arg)
{
    p->hook = fn;
    p->hook_arg = arg;
}

static void waitq_unlink(struct sim_waitq *wq, struct sim_proc *p)
{
    if (p->wq_prev)
        p->wq_prev->wq_next = p->wq_next;
    else
        wq->head = p->wq_next;
    if (p->wq_next)
        p->wq_next->wq_prev = p->wq_prev;
    else
        wq->tail = p->wq_prev;
    p->waiting_on = NULL;
    p->wq_prev = p->wq_next = NULL;
}

bool sim_proc_interrupt(struct sim_proc *p)
{
    if (p->state != PROC_WAITING || !p->waiting_on)
        return false;
    waitq_unlink(p->waiting_on, p);
    p->woken_by_queue = false;
    p->state = PROC_READY;
    sim_schedule_at(p->sim, &p->wake_ev, p->sim->now);
    return true;
}

void sim_proc_kill(struct sim_proc *p)
{
    if (p == current || p->state == PROC_FINISHED)
        return;
    sim_cancel(p->sim, &p->wake_ev);
    if (p->waiting_on)
        waitq_unlink(p->waiting_on, p);
    p->state = PROC_FINISHED;
    p->hook = NULL;
    sim_waitq_wake_all(p->sim, &p->joiners);
    stack_release(p);
}

void sim_proc_set_daemon(struct sim_proc *p, bool daemon)
{
    p->daemon = daemon;
}
struct sim_proc *sim_proc_current(void)
{
    return current;
}
struct sim *sim_proc_sim(const struct sim_proc *p)
{
    return p->sim;
}
const char *sim_proc_name(const struct sim_proc *p)
{
    return p->name;
}
bool sim_proc_finished(const struct sim_proc *p)
{
    return p->state == PROC_FINISHED;
}
void sim_proc_set_user(struct sim_proc *p, void *user)
{
    p->user = user;
}
void *sim_proc_user(const struct sim_proc *p)
{
    return p->user;
}
void sim_proc_set_user_owned(struct sim_proc *p, void *owned)
{
    p->user_owned = owned;
}

static struct sim_proc *must_be_in_process(const char *what)
{
    if (!current) {
        fprintf(stderr, "rnicsim: internal error: %s called outside a simulated process\n", what);
        abort();
    }
    return current;
}

void sim_proc_sleep(sim_time_t delay_ps)
{
    struct sim_proc *p = must_be_in_process("sim_proc_sleep");
    p->state = PROC_SLEEPING;
    sim_schedule_at(p->sim, &p->wake_ev, sim_time_add(p->sim->now, delay_ps));
    switch_out(p);
}

bool sim_proc_resched(struct sim_proc *p, sim_time_t when)
{
    if (p->state != PROC_SLEEPING)
        return false;
    sim_schedule_at(p->sim, &p->wake_ev, when < p->sim->now ? p->sim->now : when);
    return true;
}

void sim_proc_yield(void)
{
    sim_proc_sleep(0);
}

void sim_proc_join(struct sim_proc *p)
{
    while (p->state != PROC_FINISHED)
        sim_waitq_wait(&p->joiners, "waiting for a thread to finish (join)");
}

/* ---------------------------------------------------------------- wait queues */

void sim_waitq_init(struct sim_waitq *wq, const char *name)
{
    wq->head = wq->tail = NULL;
    wq->name = name;
}

static void waitq_append(struct sim_waitq *wq, struct sim_proc *p, const char *why)
{
    p->state = PROC_WAITING;
    p->waiting_on = wq;
    p->why = why;
    p->woken_by_queue = false;
    p->wq_next = NULL;
    p->wq_prev = wq->tail;
    if (wq->tail)
        wq->tail->wq_next = p;
    else
        wq->head = p;
    wq->tail = p;
}

void sim_waitq_wait(struct sim_waitq *wq, const char *why)
{
    struct sim_proc *p = must_be_in_process("sim_waitq_wait");
    waitq_append(wq, p, why);
    switch_out(p);
}

bool sim_waitq_wait_until(struct sim_waitq *wq, sim_time_t deadline, const char *why)
{
    struct sim_proc *p = must_be_in_process("sim_waitq_wait_until");
    if (deadline <= p->sim->now)
        return false;
    waitq_append(wq, p, why);
    sim_schedule_at(p->sim, &p->wake_ev, deadline);
    switch_out(p);
    return p->woken_by_queue;
}

static void wake(struct sim *sim, struct sim_waitq *wq, struct sim_proc *p)
{
    wq->head = p->wq_next;
    if (wq->head)
        wq->head->wq_prev = NULL;
    else
        wq->tail = NULL;
    p->wq_next = p->wq_prev = NULL;
    p->waiting_on = NULL;
    p->woken_by_queue = true;
    p->state = PROC_READY;
    /* Moves a pending deadline to now. */
    sim_schedule_at(sim, &p->wake_ev, sim->now);
}

void sim_waitq_wake_all(struct sim *sim, struct sim_waitq *wq)
{
    while (wq->head)
        wake(sim, wq, wq->head);
}

void sim_waitq_wake_one(struct sim *sim, struct sim_waitq *wq)
{
    if (wq->head)
        wake(sim, wq, wq->head);
}
