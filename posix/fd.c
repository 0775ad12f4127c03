/* File descriptors of simulated programs.
 *
 * A descriptor is either simulated (a TCP socket of tcp.c, an epoll
 * instance) or real (a file the program opened, the completion channel
 * and async event fds of the verbs shim, which are real eventfds).  A
 * simulated one owns a real placeholder descriptor (an eventfd) so that
 * numbers never collide; the table maps the number to its object.
 *
 * Real descriptors are used for real, with one rule: a call that would
 * block the whole simulator process (reading a terminal, a pipe or a real
 * socket that has nothing to read, opening a FIFO) is refused with a
 * message naming the program instead of hanging.  write(1, ...) and
 * write(2, ...) go to the program's own labelled stdout / stderr.
 *
 * poll / ppoll / select / pselect / epoll_wait look at every descriptor;
 * if none is ready they park the thread until one of this host's
 * descriptors may have changed (host->fd_wq: a segment arrived, a
 * completion event was queued), the timeout passes, or a simulated signal
 * arrives (EINTR).  A real descriptor the simulation cannot change (a
 * pipe, a terminal) counts as never ready, with a warning. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "posix/posix_priv.h"

/* ---------------------------------------------------------------- the table */

struct pfile *posix_file(struct posix_world *w, int fd)
{
    if (fd < 0 || (size_t)fd >= w->files_cap)
        return NULL;
    return w->files[fd];
}

struct pfile *posix_file_new(struct posix_world *w, struct posix_prog *owner, enum pfile_kind kind,
                             void *obj)
{
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    if ((size_t)fd >= w->files_cap) {
        size_t cap = w->files_cap ? w->files_cap : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        struct pfile **n = realloc(w->files, cap * sizeof(*n));
        if (!n) {
            close(fd);
            errno = ENOMEM;
            return NULL;
        }
        memset(n + w->files_cap, 0, (cap - w->files_cap) * sizeof(*n));
        w->files = n;
        w->files_cap = cap;
    }
    struct pfile *f = calloc(1, sizeof(*f));
    if (!f) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    f->kind = kind;
    f->fd = fd;
    f->owner = owner;
    f->obj = obj;
    w->files[fd] = f;
    return f;
}

void posix_file_free(struct posix_world *w, struct pfile *f)
{
    w->files[f->fd] = NULL;
    close(f->fd);
    free(f);
}

/* ---------------------------------------------------------------- epoll instances */

struct pepoll_item {
    int fd;
    struct epoll_event ev;
    bool disabled; /* EPOLLONESHOT reported */
};

struct pepoll {
    struct pepoll_item *items;
    size_t n, cap;
};

static void pepoll_free(struct pepoll *e)
{
    free(e->items);
    free(e);
}

static void file_close(struct posix_world *w, struct pfile *f)
{
    if (f->kind == PFILE_TCP)
        tcp_close(w, f->obj);
    else
        pepoll_free(f->obj);
    posix_file_free(w, f);
}

void posix_files_free(struct posix_world *w)
{
    /* the end of the run: sockets are freed by tcp_world_free, nothing is
     * sent any more */
    for (size_t i = 0; i < w->files_cap; i++) {
        struct pfile *f = w->files[i];
        if (!f)
            continue;
        if (f->kind == PFILE_EPOLL)
            pepoll_free(f->obj);
        posix_file_free(w, f);
    }
    free(w->files);
    w->files = NULL;
    w->files_cap = 0;
}

/* ---------------------------------------------------------------- real descriptors */

static const char *fd_kind(int fd, char *buf, size_t len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return "a closed descriptor";
    if (isatty(fd))
        return "a terminal";
    if (S_ISFIFO(st.st_mode))
        return "a pipe";
    if (S_ISSOCK(st.st_mode))
        return "a real socket";
    if (S_ISCHR(st.st_mode))
        return "a character device";
    snprintf(buf, len, "a file of mode 0%o", (unsigned)st.st_mode);
    return buf;
}

/* Would an operation on real descriptor `fd` block now? */
/* poll(2) with a zero timeout on one real descriptor.  The guard's
 * preemption tick (guard.c) may arrive during it, which then fails with
 * EINTR even with a zero timeout: ask again, or a ready descriptor reads as
 * idle (and a blocking read would be let through and hang the simulator). */
static int poll_now(struct pollfd *p)
{
    int saved = errno, r;
    while ((r = poll(p, 1, 0)) < 0 && errno == EINTR)
        ;
    errno = saved;
    return r;
}

static bool real_would_block(int fd, short events)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)))
        return false;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK))
        return false; /* the call itself answers EAGAIN */
    struct pollfd p = {.fd = fd, .events = events};
    return poll_now(&p) == 0;
}

static bool refuse_blocking(struct posix_thread *t, int fd, short events, const char *call)
{
    if (!real_would_block(fd, events))
        return false;
    char buf[48];
    posix_refuse(t, EAGAIN,
                 "%s on fd %d (%s) would block the whole simulator, which runs every program in "
                 "one process: refused (EAGAIN)",
                 call, fd, fd_kind(fd, buf, sizeof(buf)));
    return true;
}

/* ---------------------------------------------------------------- read / write */

ssize_t __wrap_read(int fd, void *buf, size_t len);
ssize_t __wrap_read(int fd, void *buf, size_t len)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return read(fd, buf, len);
    struct pfile *f = posix_file(t->prog->w, fd);
    if (f) {
        if (f->kind != PFILE_TCP) {
            errno = EINVAL;
            return -1;
        }
        return tcp_read(t, f, buf, len, 0);
    }
    if (refuse_blocking(t, fd, POLLIN, "read()"))
        return -1;
    return read(fd, buf, len);
}

ssize_t __wrap_write(int fd, const void *buf, size_t len);
ssize_t __wrap_write(int fd, const void *buf, size_t len)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return write(fd, buf, len);
    struct pfile *f = posix_file(t->prog->w, fd);
    if (f) {
        if (f->kind != PFILE_TCP) {
            errno = EINVAL;
            return -1;
        }
        return tcp_write(t, f, buf, len, 0);
    }
    if (fd == STDOUT_FILENO || fd == STDERR_FILENO) {
        posix_out_write(t->prog, fd, buf, len);
        return (ssize_t)len;
    }
    if (refuse_blocking(t, fd, POLLOUT, "write()"))
        return -1;
    return write(fd, buf, len);
}

/* readv / writev on a simulated socket: one call per buffer, stopping at a
 * short transfer. */
ssize_t __wrap_readv(int fd, const struct iovec *iov, int n);
ssize_t __wrap_readv(int fd, const struct iovec *iov, int n)
{
    struct posix_thread *t = posix_enter();
    if (!t || !posix_file(t->prog->w, fd)) {
        if (t && refuse_blocking(t, fd, POLLIN, "readv()"))
            return -1;
        return readv(fd, iov, n);
    }
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        ssize_t r = __wrap_read(fd, iov[i].iov_base, iov[i].iov_len);
        if (r < 0)
            return total ? total : r;
        total += r;
        if ((size_t)r < iov[i].iov_len)
            break;
    }
    return total;
}

ssize_t __wrap_writev(int fd, const struct iovec *iov, int n);
ssize_t __wrap_writev(int fd, const struct iovec *iov, int n)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return writev(fd, iov, n);
    if (!posix_file(t->prog->w, fd) && fd != STDOUT_FILENO && fd != STDERR_FILENO) {
        if (refuse_blocking(t, fd, POLLOUT, "writev()"))
            return -1;
        return writev(fd, iov, n);
    }
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        ssize_t r = __wrap_write(fd, iov[i].iov_base, iov[i].iov_len);
        if (r < 0)
            return total ? total : r;
        total += r;
        if ((size_t)r < iov[i].iov_len)
            break;
    }
    return total;
}

int __wrap_close(int fd);
int __wrap_close(int fd)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return close(fd);
    struct pfile *f = posix_file(t->prog->w, fd);
    if (!f)
        return close(fd);
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
    file_close(t->prog->w, f);
    return 0;
}

int __wrap_fcntl(int fd, int cmd, ...);
int __wrap_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long); /* unused by the commands without one */
    va_end(ap);
    struct posix_thread *t = posix_enter();
    struct pfile *f = t ? posix_file(t->prog->w, fd) : NULL;
    if (!f)
        return fcntl(fd, cmd, arg);
    switch (cmd) {
    case F_GETFL:
        return O_RDWR | f->status_flags;
    case F_SETFL:
        f->status_flags = (int)(arg & O_NONBLOCK);
        return 0;
    case F_GETFD:
    case F_SETFD:
        return fcntl(fd, cmd, arg); /* FD_CLOEXEC of the placeholder */
    default:
        posix_refuse(t, EINVAL, "fcntl(fd %d, %d) on a simulated socket: not supported", fd, cmd);
        return -1;
    }
}

int __wrap_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    struct posix_thread *t = posix_enter();
    struct pfile *f = t ? posix_file(t->prog->w, fd) : NULL;
    if (!f)
        return ioctl(fd, req, arg);
    if (req == FIONBIO && arg) {
        f->status_flags = *(int *)arg ? O_NONBLOCK : 0;
        return 0;
    }
    if (req == FIONREAD && arg && f->kind == PFILE_TCP) {
        *(int *)arg = tcp_fionread(f->obj);
        return 0;
    }
    posix_refuse(t, ENOTTY, "ioctl(fd %d, 0x%lx) on a simulated socket: not supported", fd, req);
    return -1;
}

static int refuse_dup(struct posix_thread *t, int fd)
{
    posix_refuse(t, EOPNOTSUPP, "dup of simulated socket fd %d: not supported", fd);
    return -1;
}

int __wrap_dup(int fd);
int __wrap_dup(int fd)
{
    struct posix_thread *t = posix_enter();
    if (t && posix_file(t->prog->w, fd))
        return refuse_dup(t, fd);
    return dup(fd);
}

int __wrap_dup2(int fd, int fd2);
int __wrap_dup2(int fd, int fd2)
{
    struct posix_thread *t = posix_enter();
    if (t && (posix_file(t->prog->w, fd) || posix_file(t->prog->w, fd2)))
        return refuse_dup(t, fd);
    return dup2(fd, fd2);
}

/* ---------------------------------------------------------------- open / fopen */

/* Opening a FIFO (or a socket path) would block until a peer opens it. */
static bool refuse_open(struct posix_thread *t, const char *path, const char *call)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode)))
        return false;
    posix_refuse(t, ENXIO,
                 "%s(\"%s\"): a %s would block the whole simulator until a real process opens "
                 "its other end: refused (ENXIO)",
                 call, path, S_ISFIFO(st.st_mode) ? "FIFO" : "socket");
    return true;
}

int __wrap_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    struct posix_thread *t = posix_enter();
    if (t && refuse_open(t, path, "open"))
        return -1;
    return open(path, flags, mode);
}

int __wrap_open64(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    struct posix_thread *t = posix_enter();
    if (t && refuse_open(t, path, "open64"))
        return -1;
    return open(path, flags, mode);
}

int __wrap_openat(int dirfd, const char *path, int flags, ...);
int __wrap_openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    struct posix_thread *t = posix_enter();
    if (t && path && (path[0] == '/' || dirfd == AT_FDCWD) && refuse_open(t, path, "openat"))
        return -1;
    return openat(dirfd, path, flags, mode);
}

FILE *__wrap_fopen(const char *path, const char *mode);
FILE *__wrap_fopen(const char *path, const char *mode)
{
    struct posix_thread *t = posix_enter();
    if (t && refuse_open(t, path, "fopen"))
        return NULL;
    return fopen(path, mode);
}

FILE *__wrap_fopen64(const char *path, const char *mode);
FILE *__wrap_fopen64(const char *path, const char *mode)
{
    return __wrap_fopen(path, mode);
}

/* ---------------------------------------------------------------- poll */

static short file_poll(struct pfile *f, short events)
{
    if (f->kind == PFILE_TCP)
        return tcp_poll_events(f->obj, events);
    return 0; /* polling an epoll fd for readiness is not modelled */
}

/* One pass over the descriptors: the number ready. */
static int poll_once(struct posix_thread *t, struct pollfd *fds, nfds_t n, bool *blind)
{
    struct posix_world *w = t->prog->w;
    int ready = 0;
    for (nfds_t i = 0; i < n; i++) {
        fds[i].revents = 0;
        if (fds[i].fd < 0)
            continue;
        struct pfile *f = posix_file(w, fds[i].fd);
        if (f) {
            fds[i].revents = file_poll(f, fds[i].events);
        } else {
            struct pollfd one = {.fd = fds[i].fd, .events = fds[i].events};
            if (poll_now(&one) > 0)
                fds[i].revents = one.revents;
            else if (blind) {
                /* eventfds are the verbs shim's channels, which the
                 * simulation signals; anything else it cannot wake */
                char link[64], target[64];
                snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[i].fd);
                ssize_t k = readlink(link, target, sizeof(target) - 1);
                target[k > 0 ? k : 0] = '\0';
                if (!strstr(target, "eventfd"))
                    *blind = true;
            }
        }
        if (fds[i].revents)
            ready++;
    }
    return ready;
}

int posix_poll(struct posix_thread *t, struct pollfd *fds, nfds_t n, sim_time_t deadline,
               const char *why)
{
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
    bool blind = false, warned = false;
    for (;;) {
        int ready = poll_once(t, fds, n, &blind);
        if (blind && !warned) {
            warned = true;
            posix_refuse(t, 0,
                         "%s waits on a real pipe, terminal or socket: the simulation cannot "
                         "make it ready, it counts as never ready",
                         why);
        }
        if (ready || sim_now(t->prog->w->sim) >= deadline)
            return ready;
        int rc = posix_wait(t, &t->prog->host->fd_wq, deadline, why);
        if (rc == EINTR) {
            posix_deliver_signals(t);
            errno = EINTR;
            return -1;
        }
    }
}

static sim_time_t timeout_ms_deadline(int timeout_ms)
{
    if (timeout_ms < 0)
        return SIM_TIME_NEVER;
    return posix_now_ps() + (sim_time_t)timeout_ms * SIM_MS;
}

int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return poll(fds, n, timeout_ms);
    return posix_poll(t, fds, n, timeout_ms_deadline(timeout_ms), "poll()");
}

int __wrap_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask);
int __wrap_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return ppoll(fds, n, ts, mask);
    sim_time_t d =
        ts ? posix_now_ps() + (sim_time_t)ts->tv_sec * SIM_S + (sim_time_t)ts->tv_nsec * SIM_NS
           : SIM_TIME_NEVER;
    return posix_poll(t, fds, n, d, "ppoll()");
}

static int select_common(struct posix_thread *t, int nfds, fd_set *r, fd_set *wr, fd_set *ex,
                         sim_time_t deadline, const char *why)
{
    if (nfds < 0 || nfds > FD_SETSIZE) {
        errno = EINVAL;
        return -1;
    }
    struct pollfd *p = calloc((size_t)nfds + 1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = 0;
        if (r && FD_ISSET(fd, r))
            ev |= POLLIN;
        if (wr && FD_ISSET(fd, wr))
            ev |= POLLOUT;
        if (ex && FD_ISSET(fd, ex))
            ev |= POLLPRI;
        if (ev)
            p[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    int rc = posix_poll(t, p, n, deadline, why);
    if (rc < 0) {
        free(p);
        return -1;
    }
    if (r)
        FD_ZERO(r);
    if (wr)
        FD_ZERO(wr);
    if (ex)
        FD_ZERO(ex);
    int count = 0;
    for (nfds_t i = 0; i < n; i++) {
        short re = p[i].revents;
        if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
            FD_SET(p[i].fd, r);
            count++;
        }
        if (wr && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
            FD_SET(p[i].fd, wr);
            count++;
        }
        if (ex && (p[i].events & POLLPRI) && (re & POLLPRI)) {
            FD_SET(p[i].fd, ex);
            count++;
        }
    }
    free(p);
    return count;
}

int __wrap_select(int nfds, fd_set *r, fd_set *wr, fd_set *ex, struct timeval *tv);
int __wrap_select(int nfds, fd_set *r, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return select(nfds, r, wr, ex, tv);
    sim_time_t start = posix_now_ps();
    sim_time_t d = tv ? start + (sim_time_t)tv->tv_sec * SIM_S + (sim_time_t)tv->tv_usec * SIM_US
                      : SIM_TIME_NEVER;
    int rc = select_common(t, nfds, r, wr, ex, d, "select()");
    if (tv) { /* Linux writes back the time not slept */
        sim_time_t now = posix_now_ps();
        sim_time_t left = d > now ? d - now : 0;
        tv->tv_sec = (time_t)(left / SIM_S);
        tv->tv_usec = (suseconds_t)(left % SIM_S / SIM_US);
    }
    return rc;
}

int __wrap_pselect(int nfds, fd_set *r, fd_set *wr, fd_set *ex, const struct timespec *ts,
                   const sigset_t *mask);
int __wrap_pselect(int nfds, fd_set *r, fd_set *wr, fd_set *ex, const struct timespec *ts,
                   const sigset_t *mask)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return pselect(nfds, r, wr, ex, ts, mask);
    sim_time_t d =
        ts ? posix_now_ps() + (sim_time_t)ts->tv_sec * SIM_S + (sim_time_t)ts->tv_nsec * SIM_NS
           : SIM_TIME_NEVER;
    return select_common(t, nfds, r, wr, ex, d, "pselect()");
}

/* ---------------------------------------------------------------- epoll */

int __wrap_epoll_create1(int flags);
int __wrap_epoll_create1(int flags)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return epoll_create1(flags);
    if (flags & ~EPOLL_CLOEXEC) {
        errno = EINVAL;
        return -1;
    }
    struct pepoll *e = calloc(1, sizeof(*e));
    if (!e) {
        errno = ENOMEM;
        return -1;
    }
    struct pfile *f = posix_file_new(t->prog->w, t->prog, PFILE_EPOLL, e);
    if (!f) {
        free(e);
        return -1;
    }
    return f->fd;
}

int __wrap_epoll_create(int size);
int __wrap_epoll_create(int size)
{
    if (size <= 0) {
        errno = EINVAL;
        return -1;
    }
    return __wrap_epoll_create1(0);
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return epoll_ctl(epfd, op, fd, ev);
    struct pfile *f = posix_file(t->prog->w, epfd);
    if (!f || f->kind != PFILE_EPOLL) {
        if (!f)
            return epoll_ctl(epfd, op, fd, ev);
        errno = EINVAL;
        return -1;
    }
    if (fd == epfd) {
        errno = EINVAL;
        return -1;
    }
    struct pepoll *e = f->obj;
    size_t i = 0;
    while (i < e->n && e->items[i].fd != fd)
        i++;
    switch (op) {
    case EPOLL_CTL_ADD:
        if (i < e->n) {
            errno = EEXIST;
            return -1;
        }
        if (!ev) {
            errno = EFAULT;
            return -1;
        }
        if (e->n == e->cap) {
            size_t cap = e->cap ? 2 * e->cap : 8;
            struct pepoll_item *n = realloc(e->items, cap * sizeof(*n));
            if (!n) {
                errno = ENOMEM;
                return -1;
            }
            e->items = n;
            e->cap = cap;
        }
        e->items[e->n++] = (struct pepoll_item){.fd = fd, .ev = *ev};
        return 0;
    case EPOLL_CTL_MOD:
        if (i == e->n) {
            errno = ENOENT;
            return -1;
        }
        if (!ev) {
            errno = EFAULT;
            return -1;
        }
        e->items[i].ev = *ev;
        e->items[i].disabled = false;
        return 0;
    case EPOLL_CTL_DEL:
        if (i == e->n) {
            errno = ENOENT;
            return -1;
        }
        e->items[i] = e->items[--e->n];
        return 0;
    default:
        errno = EINVAL;
        return -1;
    }
}

static int epoll_wait_common(struct posix_thread *t, int epfd, struct epoll_event *out, int max,
                             int timeout_ms)
{
    struct pfile *f = posix_file(t->prog->w, epfd);
    if (!f || f->kind != PFILE_EPOLL || max <= 0) {
        errno = (!f || f->kind != PFILE_EPOLL) ? EBADF : EINVAL;
        return -1;
    }
    struct pepoll *e = f->obj;
    struct pollfd *p = calloc(e->n + 1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < e->n; i++) {
        /* level-triggered (EPOLLET is treated as level-triggered) */
        short want = (short)(e->items[i].ev.events & (EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP));
        p[i] = (struct pollfd){.fd = e->items[i].disabled ? -1 : e->items[i].fd, .events = want};
    }
    int rc = posix_poll(t, p, e->n, timeout_ms_deadline(timeout_ms), "epoll_wait()");
    int k = 0;
    for (size_t i = 0; rc > 0 && i < e->n && k < max; i++) {
        if (!p[i].revents)
            continue;
        out[k].events = (uint32_t)p[i].revents;
        out[k].data = e->items[i].ev.data;
        k++;
        if (e->items[i].ev.events & EPOLLONESHOT)
            e->items[i].disabled = true;
    }
    free(p);
    return rc < 0 ? -1 : k;
}

int __wrap_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms);
int __wrap_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms)
{
    struct posix_thread *t = posix_enter();
    if (!t || !posix_file(t->prog->w, epfd))
        return epoll_wait(epfd, ev, max, timeout_ms);
    return epoll_wait_common(t, epfd, ev, max, timeout_ms);
}

int __wrap_epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
                       const sigset_t *mask);
int __wrap_epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
                       const sigset_t *mask)
{
    struct posix_thread *t = posix_enter();
    if (!t || !posix_file(t->prog->w, epfd))
        return epoll_pwait(epfd, ev, max, timeout_ms, mask);
    return epoll_wait_common(t, epfd, ev, max, timeout_ms);
}
