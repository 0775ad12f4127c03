/* TCP sockets between simulated hosts, over a modelled management network.
 *
 * Every host has one IPv4 address, the one of its RoCE GID (10.0.0.<i+1>
 * for host h<i>, nic_gid_of_node), and a management port of rate
 * host.mgmt.rate.  A segment a program writes leaves when the sender's
 * port is free (serialisation at that rate, 66 bytes of Ethernet/IP/TCP
 * header per 1448-byte segment) and arrives host.mgmt.latency later, in
 * order per connection; each write arrives whole (a read may return less
 * than was written only if its buffer is smaller, or more if several
 * writes arrived).  Connections to the same host (127.0.0.1 or its own
 * address) have no network latency.
 *
 * The handshake is modelled: connect() returns after one round trip (SYN,
 * SYN-ACK), the server's accept() sees the connection when the ACK
 * arrives half a round trip later; a SYN for a port nobody listens on, or
 * beyond the listen backlog, is answered by a reset (ECONNREFUSED), as on
 * Linux.  Flow control: a writer blocks while the receiver holds a window
 * (256 KiB) of unread and in-flight bytes.  close() sends a FIN behind the
 * data (the peer reads 0 after the last byte).  Not modelled: loss,
 * retransmission, Nagle, urgent data, SIGPIPE (writing to a closed
 * connection answers EPIPE), SO_RCVTIMEO.
 *
 * getaddrinfo() resolves the scenario's host names (h0, h1, ...),
 * "localhost" and numeric addresses; any other name is refused with a
 * message (there is no DNS in a simulation), and connecting to an address
 * that is not a host of the scenario is refused (ENETUNREACH) instead of
 * reaching the real network. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "posix/posix_priv.h"
#include "sim/nic/nic.h"

enum {
    TCP_MSS_BYTES = 1448,
    TCP_HDR_BYTES = 66, /* Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 */
    TCP_WINDOW_BYTES = 256 * 1024,
    TCP_EPHEMERAL_FIRST = 32768, /* net.ipv4.ip_local_port_range */
    TCP_EPHEMERAL_LAST = 60999,
};

enum tcp_state { TS_NEW, TS_LISTEN, TS_CONNECTING, TS_CONNECTED, TS_CLOSED };

struct tcp_seg {
    struct tcp_seg *next; /* in rx_head.., or in flight towards the socket */
    size_t len, off;
    bool fin;
    char data[];
};

struct tcp_sock {
    struct posix_world *w;
    struct tcp_sock *all_prev, *all_next; /* every socket of the world */
    int refs; /* the owner (descriptor or accept queue) + pending events */
    int family;
    size_t host;
    enum tcp_state state;
    bool bound, reuse, owner_closed;
    uint32_t laddr, raddr; /* network order */
    uint16_t lport, rport; /* host order */
    /* listener */
    int backlog, syn_pending, aq_len;
    struct tcp_sock *aq_head, *aq_tail, *lnext;
    /* a connection accepted by the stack, not yet by the program */
    struct tcp_sock *listener, *qnext;
    /* connected */
    struct tcp_sock *peer;
    struct tcp_seg *rx_head, *rx_tail;
    struct tcp_seg *fly_head, *fly_tail; /* sent towards here, not arrived (in order) */
    size_t rx_bytes, incoming;           /* unread here; in flight towards here */
    sim_time_t last_arrival;             /* arrivals of this side's writes, in order */
    bool rx_eof, wr_shut, rd_shut;
    bool reset;   /* the peer answered data with a reset (it had closed) */
    size_t rhost; /* the peer's host */
    int err;
    struct sim_waitq wq;
};

/* ---------------------------------------------------------------- addresses */

uint32_t tcp_addr_of_host(size_t index)
{
    union ibv_gid gid;
    nic_gid_of_node((uint32_t)index, &gid);
    uint32_t a;
    memcpy(&a, &gid.raw[12], 4);
    return a;
}

static bool is_loopback(uint32_t a)
{
    return (ntohl(a) >> 24) == 127;
}

int tcp_host_of_addr(const struct posix_world *w, uint32_t a, const struct host *self)
{
    if (is_loopback(a) || a == htonl(INADDR_ANY))
        return self ? (int)(self - w->hosts) : -1;
    for (size_t i = 0; i < w->nhosts; i++)
        if (tcp_addr_of_host(i) == a)
            return (int)i;
    return -1;
}

static size_t host_index(const struct posix_thread *t)
{
    return (size_t)(t->prog->host - t->prog->w->hosts);
}

/* sockaddr -> address (network order) and port; EAFNOSUPPORT / EINVAL */
static int sa_parse(const struct sockaddr *sa, socklen_t len, uint32_t *addr, uint16_t *port)
{
    if (!sa)
        return EFAULT;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)sa;
        *addr = in->sin_addr.s_addr;
        *port = ntohs(in->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        const uint8_t *b = in6->sin6_addr.s6_addr;
        static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        *port = ntohs(in6->sin6_port);
        if (memcmp(b, v4map, 12) == 0) {
            memcpy(addr, b + 12, 4);
            return 0;
        }
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) {
            *addr = htonl(INADDR_LOOPBACK);
            return 0;
        }
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
            *addr = htonl(INADDR_ANY);
            return 0;
        }
        return EADDRNOTAVAIL; /* IPv6 addresses other than these do not exist here */
    }
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
        return EAFNOSUPPORT;
    return EINVAL;
}

static void sa_fill(int family, uint32_t addr, uint16_t port, struct sockaddr *sa, socklen_t *len)
{
    if (!sa || !len)
        return;
    union {
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } u;
    memset(&u, 0, sizeof(u));
    socklen_t n;
    if (family == AF_INET6) {
        u.in6.sin6_family = AF_INET6;
        u.in6.sin6_port = htons(port);
        if (addr == htonl(INADDR_LOOPBACK)) {
            u.in6.sin6_addr = in6addr_loopback;
        } else if (addr != htonl(INADDR_ANY)) {
            u.in6.sin6_addr.s6_addr[10] = 0xff;
            u.in6.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&u.in6.sin6_addr.s6_addr[12], &addr, 4);
        }
        n = sizeof(u.in6);
    } else {
        u.in.sin_family = AF_INET;
        u.in.sin_port = htons(port);
        u.in.sin_addr.s_addr = addr;
        n = sizeof(u.in);
    }
    memcpy(sa, &u, *len < n ? *len : n);
    *len = n;
}

static const char *addr_str(uint32_t a, uint16_t port, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, port);
    return buf;
}

/* ---------------------------------------------------------------- sockets */

static struct tcp_sock *sock_new(struct posix_world *w, size_t host, int family)
{
    struct tcp_sock *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->w = w;
    s->refs = 1;
    s->host = host;
    s->family = family;
    sim_waitq_init(&s->wq, "socket");
    s->all_next = w->socks;
    if (w->socks)
        w->socks->all_prev = s;
    w->socks = s;
    return s;
}

static void free_segs(struct tcp_seg *g)
{
    while (g) {
        struct tcp_seg *n = g->next;
        free(g);
        g = n;
    }
}

static void sock_free(struct tcp_sock *s)
{
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        s->w->socks = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    free_segs(s->rx_head);
    free_segs(s->fly_head);
    free(s);
}

static void sock_put(struct tcp_sock *s)
{
    if (--s->refs > 0)
        return;
    if (s->peer && s->peer->peer == s)
        s->peer->peer = NULL;
    sock_free(s);
}

static void sock_changed(struct tcp_sock *s)
{
    if (!sim_waitq_empty(&s->wq))
        sim_waitq_wake_all(s->w->sim, &s->wq);
    host_fd_activity(&s->w->hosts[s->host]);
}

/* When a transfer of `bytes` from host `src` to `dst` leaving now arrives,
 * after the previous one of the same direction (*last). */
static sim_time_t mgmt_arrival(struct posix_world *w, size_t src, size_t dst, size_t bytes,
                               sim_time_t *last)
{
    sim_time_t now = sim_now(w->sim), arrival = now;
    if (src != dst) {
        const struct host_cpu_params *c = &w->hosts[src].cpu;
        size_t segs = bytes ? (bytes + TCP_MSS_BYTES - 1) / TCP_MSS_BYTES : 1;
        sim_time_t start = now > w->mgmt_free_ps[src] ? now : w->mgmt_free_ps[src];
        sim_time_t end = start + (c->mgmt_rate_bps ? sim_bytes_to_ps(bytes + segs * TCP_HDR_BYTES,
                                                                     c->mgmt_rate_bps)
                                                   : 0);
        w->mgmt_free_ps[src] = end;
        arrival = end + c->mgmt_latency_ps;
    }
    if (arrival < *last)
        arrival = *last;
    *last = arrival;
    return arrival;
}

static sim_time_t one_way(struct posix_world *w, size_t src, size_t dst)
{
    return src == dst ? 0 : w->hosts[src].cpu.mgmt_latency_ps;
}

/* ---------------------------------------------------------------- segments */

/* Data reached a socket its program had closed: it answers with a reset,
 * after which the writer's next write fails with EPIPE (Linux). */
static void reset_arrive(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct tcp_sock *s = a;
    s->reset = true;
    sock_changed(s);
    sock_put(s);
}

static void send_reset(struct posix_world *w, size_t from, struct tcp_sock *to, sim_time_t extra)
{
    to->refs++;
    sim_call_in(w->sim, extra + one_way(w, from, to->host), reset_arrive, to, NULL);
}

static void seg_arrive(struct sim *sim, void *a, void *b)
{
    (void)sim;
    struct tcp_sock *s = a;
    struct tcp_seg *g = b;
    s->fly_head = g->next; /* arrivals keep the order of sending */
    if (!s->fly_head)
        s->fly_tail = NULL;
    g->next = NULL;
    s->incoming -= g->len;
    if (s->owner_closed || s->state == TS_CLOSED) {
        if (g->len && s->peer && !g->fin)
            send_reset(s->w, s->host, s->peer, 0);
        free(g);
    } else if (g->fin) {
        s->rx_eof = true;
        free(g);
        sock_changed(s);
    } else {
        g->next = NULL;
        if (s->rx_tail)
            s->rx_tail->next = g;
        else
            s->rx_head = g;
        s->rx_tail = g;
        s->rx_bytes += g->len;
        sock_changed(s);
    }
    sock_put(s);
}

/* Send `len` bytes (or a FIN) from `s` to its peer. */
static int seg_send(struct tcp_sock *s, const void *buf, size_t len, bool fin)
{
    struct tcp_sock *p = s->peer;
    if (!p) {
        /* the peer's socket is gone: the bytes are lost and a reset comes
         * back a round trip later; a write after that reset is EPIPE */
        if (s->reset)
            return EPIPE;
        if (len && !fin)
            send_reset(s->w, s->rhost, s, one_way(s->w, s->host, s->rhost));
        return 0;
    }
    struct tcp_seg *g = malloc(sizeof(*g) + len);
    if (!g)
        return ENOMEM;
    g->len = len;
    g->off = 0;
    g->fin = fin;
    if (len)
        memcpy(g->data, buf, len);
    g->next = NULL;
    if (p->fly_tail)
        p->fly_tail->next = g;
    else
        p->fly_head = g;
    p->fly_tail = g;
    p->incoming += len;
    p->refs++;
    sim_time_t at = mgmt_arrival(s->w, s->host, p->host, len, &s->last_arrival);
    sim_call_in(s->w->sim, at - sim_now(s->w->sim), seg_arrive, p, g);
    return 0;
}

/* ---------------------------------------------------------------- the handshake */

static struct tcp_sock *find_listener(struct posix_world *w, size_t host, uint32_t addr,
                                      uint16_t port)
{
    for (struct tcp_sock *l = w->listeners; l; l = l->lnext)
        if (l->host == host && l->lport == port &&
            (l->laddr == htonl(INADDR_ANY) || l->laddr == addr ||
             (is_loopback(addr) && is_loopback(l->laddr))))
            return l;
    return NULL;
}

static void rst_arrive(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct tcp_sock *c = a;
    if (c->state == TS_CONNECTING) {
        c->state = TS_CLOSED;
        c->err = ECONNREFUSED;
        sock_changed(c);
    }
    sock_put(c);
}

static void ack_arrive(struct sim *sim, void *a, void *b)
{
    (void)sim;
    (void)b;
    struct tcp_sock *srv = a; /* its reference is the accept queue's now */
    struct tcp_sock *l = srv->listener;
    l->syn_pending--;
    if (l->owner_closed || l->state != TS_LISTEN) {
        srv->listener = NULL;
        if (srv->peer)
            seg_send(srv, NULL, 0, true); /* the client sees the connection end */
        srv->owner_closed = true;
        sock_put(srv);
    } else {
        srv->qnext = NULL;
        if (l->aq_tail)
            l->aq_tail->qnext = srv;
        else
            l->aq_head = srv;
        l->aq_tail = srv;
        l->aq_len++;
        sock_changed(l);
    }
    sock_put(l);
}

static void synack_arrive(struct sim *sim, void *a, void *b)
{
    struct tcp_sock *c = a, *srv = b;
    if (c->owner_closed || c->state != TS_CONNECTING) {
        /* the client gave up: the server side sees an empty connection */
        srv->peer = NULL;
        srv->rx_eof = true;
    } else {
        c->peer = srv;
        c->state = TS_CONNECTED;
        sock_changed(c);
    }
    sim_call_in(sim, one_way(c->w, c->host, srv->host), ack_arrive, srv, NULL);
    sock_put(c);
}

static void syn_arrive(struct sim *sim, void *a, void *b)
{
    (void)b;
    struct tcp_sock *c = a;
    struct posix_world *w = c->w;
    size_t dst = (size_t)tcp_host_of_addr(w, c->raddr, &w->hosts[c->host]);
    struct tcp_sock *l = find_listener(w, dst, c->raddr, c->rport);
    sim_time_t back = one_way(w, dst, c->host);
    int max_q = l && l->backlog > 0 ? l->backlog : 1;
    if (!l || l->aq_len + l->syn_pending >= max_q) {
        sim_call_in(sim, back, rst_arrive, c, NULL); /* keeps c's reference */
        return;
    }
    struct tcp_sock *srv = sock_new(w, dst, l->family);
    if (!srv) {
        sim_call_in(sim, back, rst_arrive, c, NULL);
        return;
    }
    srv->state = TS_CONNECTED;
    srv->bound = true;
    srv->laddr = is_loopback(c->raddr) ? c->raddr : tcp_addr_of_host(dst);
    srv->lport = l->lport;
    srv->raddr = c->laddr;
    srv->rport = c->lport;
    srv->rhost = c->host;
    srv->peer = c;
    srv->listener = l;
    l->refs++;
    l->syn_pending++;
    sim_call_in(sim, back, synack_arrive, c, srv); /* c's reference travels on */
}

/* ---------------------------------------------------------------- socket calls */

/* Is `fd` one of the simulation's sockets?  1 (with *fp), 0 (a real
 * descriptor, or no program: the caller uses the real call), or -1 with
 * errno ENOTSOCK (a simulated descriptor that is not a socket). */
static int sim_sock(struct posix_thread *t, int fd, struct pfile **fp)
{
    struct pfile *f = t ? posix_file(t->prog->w, fd) : NULL;
    *fp = f;
    if (!f)
        return 0;
    if (f->kind != PFILE_TCP) {
        errno = ENOTSOCK;
        return -1;
    }
    return 1;
}

static void syscall_cost(struct posix_thread *t)
{
    host_note_call();
    host_charge(t->prog->host->cpu.syscall_ps);
}

int __wrap_socket(int domain, int type, int protocol);
int __wrap_socket(int domain, int type, int protocol)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return socket(domain, type, protocol);
    syscall_cost(t);
    int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if ((domain != AF_INET && domain != AF_INET6) || base != SOCK_STREAM ||
        (protocol != 0 && protocol != IPPROTO_TCP)) {
        posix_refuse(t, domain == AF_INET || domain == AF_INET6 ? EPROTONOSUPPORT : EAFNOSUPPORT,
                     "socket(domain %d, type %d, protocol %d) refused: only TCP sockets between "
                     "the simulated hosts exist in simulated mode",
                     domain, base, protocol);
        return -1;
    }
    struct tcp_sock *s = sock_new(t->prog->w, host_index(t), domain);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    struct pfile *f = posix_file_new(t->prog->w, t->prog, PFILE_TCP, s);
    if (!f) {
        free(s);
        return -1;
    }
    if (type & SOCK_NONBLOCK)
        f->status_flags |= O_NONBLOCK;
    return f->fd;
}

int __wrap_socketpair(int domain, int type, int protocol, int sv[2]);
int __wrap_socketpair(int domain, int type, int protocol, int sv[2])
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return socketpair(domain, type, protocol, sv);
    posix_refuse(t, EOPNOTSUPP, "socketpair() refused: not simulated");
    return -1;
}

static bool port_in_use(struct posix_world *w, size_t host, uint16_t port)
{
    for (size_t fd = 0; fd < w->files_cap; fd++) {
        struct pfile *f = w->files[fd];
        if (!f || f->kind != PFILE_TCP)
            continue;
        struct tcp_sock *o = f->obj;
        if (o->host == host && o->bound && o->lport == port && (o->state == TS_LISTEN || !o->reuse))
            return true;
    }
    return false;
}

static uint16_t ephemeral_port(struct posix_world *w, size_t host)
{
    for (int tries = 0; tries <= TCP_EPHEMERAL_LAST - TCP_EPHEMERAL_FIRST; tries++) {
        uint16_t p = w->next_port[host];
        w->next_port[host] = p >= TCP_EPHEMERAL_LAST ? TCP_EPHEMERAL_FIRST : (uint16_t)(p + 1);
        if (!port_in_use(w, host, p))
            return p;
    }
    return 0;
}

int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : bind(fd, sa, len);
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    uint32_t addr;
    uint16_t port;
    int e = sa_parse(sa, len, &addr, &port);
    if (e) {
        errno = e;
        return -1;
    }
    if (s->bound || s->state != TS_NEW) {
        errno = EINVAL;
        return -1;
    }
    size_t h = host_index(t);
    if (!is_loopback(addr) && addr != htonl(INADDR_ANY) && addr != tcp_addr_of_host(h)) {
        char b[40];
        posix_refuse(t, EADDRNOTAVAIL, "bind(%s): not an address of %s",
                     addr_str(addr, port, b, sizeof(b)), t->prog->host->name);
        return -1;
    }
    if (port == 0)
        port = ephemeral_port(t->prog->w, h);
    else if (port_in_use(t->prog->w, h, port)) {
        errno = EADDRINUSE;
        return -1;
    }
    if (!port) {
        errno = EADDRINUSE;
        return -1;
    }
    s->laddr = addr;
    s->lport = port;
    s->bound = true;
    return 0;
}

int __wrap_listen(int fd, int backlog);
int __wrap_listen(int fd, int backlog)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : listen(fd, backlog);
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    if (s->state == TS_LISTEN) {
        s->backlog = backlog;
        return 0;
    }
    if (s->state != TS_NEW) {
        errno = EINVAL;
        return -1;
    }
    struct posix_world *w = t->prog->w;
    if (!s->bound) {
        s->laddr = htonl(INADDR_ANY);
        s->lport = ephemeral_port(w, s->host);
        s->bound = true;
    }
    /* SOMAXCONN = 4096 on Linux 5.4+; a backlog <= 0 still accepts one */
    s->backlog = backlog > 4096 ? 4096 : backlog;
    s->state = TS_LISTEN;
    s->lnext = w->listeners;
    w->listeners = s;
    return 0;
}

int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : connect(fd, sa, len);
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    struct posix_world *w = t->prog->w;
    if (s->state == TS_CONNECTING) {
        errno = EALREADY;
        return -1;
    }
    if (s->state == TS_CONNECTED) {
        errno = EISCONN;
        return -1;
    }
    if (s->state != TS_NEW) {
        errno = s->state == TS_LISTEN ? EINVAL : EISCONN;
        return -1;
    }
    uint32_t addr;
    uint16_t port;
    int e = sa_parse(sa, len, &addr, &port);
    if (e) {
        errno = e;
        return -1;
    }
    char b[40];
    int dst = tcp_host_of_addr(w, addr, t->prog->host);
    if (dst < 0) {
        posix_refuse(t, ENETUNREACH,
                     "connect(%s) refused: not an address of a simulated host (a real network "
                     "connection would leave simulated time)",
                     addr_str(addr, port, b, sizeof(b)));
        return -1;
    }
    if (port == 0) {
        errno = ECONNREFUSED;
        return -1;
    }
    if (!s->bound) {
        s->laddr = is_loopback(addr) ? htonl(INADDR_LOOPBACK) : tcp_addr_of_host(s->host);
        s->lport = ephemeral_port(w, s->host);
        s->bound = true;
    } else if (s->laddr == htonl(INADDR_ANY)) {
        s->laddr = is_loopback(addr) ? htonl(INADDR_LOOPBACK) : tcp_addr_of_host(s->host);
    }
    s->raddr = addr == htonl(INADDR_ANY) ? htonl(INADDR_LOOPBACK) : addr;
    s->rport = port;
    s->rhost = (size_t)dst;
    s->state = TS_CONNECTING;
    s->err = 0;
    s->refs++; /* the handshake's events */
    sim_call_in(w->sim, one_way(w, s->host, (size_t)dst), syn_arrive, s, NULL);
    if (f->status_flags & O_NONBLOCK) {
        errno = EINPROGRESS;
        return -1;
    }
    char why[80];
    snprintf(why, sizeof(why), "connect(%s)", addr_str(addr, port, b, sizeof(b)));
    while (s->state == TS_CONNECTING) {
        if (posix_wait(t, &s->wq, SIM_TIME_NEVER, why) == EINTR)
            posix_deliver_signals(t); /* SA_RESTART: keep waiting */
    }
    if (s->state != TS_CONNECTED) {
        errno = s->err ? s->err : ECONNREFUSED;
        return -1;
    }
    return 0;
}

static int accept_common(struct posix_thread *t, int fd, struct sockaddr *sa, socklen_t *len,
                         int flags)
{
    struct pfile *f = posix_file(t->prog->w, fd);
    struct tcp_sock *l = f->obj;
    syscall_cost(t);
    if (l->state != TS_LISTEN) {
        errno = EINVAL;
        return -1;
    }
    char why[64];
    snprintf(why, sizeof(why), "accept(port %u)", l->lport);
    while (!l->aq_head) {
        if (f->status_flags & O_NONBLOCK) {
            errno = EAGAIN;
            return -1;
        }
        if (posix_wait(t, &l->wq, SIM_TIME_NEVER, why) == EINTR)
            posix_deliver_signals(t);
    }
    struct tcp_sock *s = l->aq_head;
    struct pfile *nf = posix_file_new(t->prog->w, t->prog, PFILE_TCP, s);
    if (!nf)
        return -1;
    l->aq_head = s->qnext;
    if (!l->aq_head)
        l->aq_tail = NULL;
    l->aq_len--;
    s->qnext = NULL;
    s->listener = NULL;
    s->family = l->family;
    if (flags & SOCK_NONBLOCK)
        nf->status_flags |= O_NONBLOCK;
    sa_fill(s->family, s->raddr, s->rport, sa, len);
    return nf->fd;
}

int __wrap_accept(int fd, struct sockaddr *sa, socklen_t *len);
int __wrap_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : accept(fd, sa, len);
    return accept_common(t, fd, sa, len, 0);
}

int __wrap_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags);
int __wrap_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : accept4(fd, sa, len, flags);
    return accept_common(t, fd, sa, len, flags);
}

int __wrap_getsockname(int fd, struct sockaddr *sa, socklen_t *len);
int __wrap_getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : getsockname(fd, sa, len);
    struct tcp_sock *s = f->obj;
    sa_fill(s->family, s->bound ? s->laddr : htonl(INADDR_ANY), s->lport, sa, len);
    return 0;
}

int __wrap_getpeername(int fd, struct sockaddr *sa, socklen_t *len);
int __wrap_getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : getpeername(fd, sa, len);
    struct tcp_sock *s = f->obj;
    if (s->state != TS_CONNECTED) {
        errno = ENOTCONN;
        return -1;
    }
    sa_fill(s->family, s->raddr, s->rport, sa, len);
    return 0;
}

int __wrap_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int __wrap_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : setsockopt(fd, level, name, val, len);
    struct tcp_sock *s = f->obj;
    if (!val || len < (socklen_t)sizeof(int)) {
        errno = EINVAL;
        return -1;
    }
    if (level == SOL_SOCKET) {
        switch (name) {
        case SO_REUSEADDR:
        case SO_REUSEPORT:
            s->reuse = *(const int *)val != 0;
            return 0;
        case SO_KEEPALIVE:
        case SO_RCVBUF:
        case SO_SNDBUF:
        case SO_LINGER:
        case SO_RCVTIMEO:
        case SO_SNDTIMEO:
        case SO_PRIORITY:
            return 0; /* accepted, not modelled */
        default:
            break;
        }
    } else if (level == IPPROTO_TCP) {
        return 0; /* TCP_NODELAY, TCP_QUICKACK, ...: no Nagle here anyway */
    } else if (level == IPPROTO_IP || level == IPPROTO_IPV6) {
        return 0;
    }
    errno = ENOPROTOOPT;
    return -1;
}

int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : getsockopt(fd, level, name, val, len);
    struct tcp_sock *s = f->obj;
    if (!val || !len || *len < (socklen_t)sizeof(int)) {
        errno = EINVAL;
        return -1;
    }
    int v = 0;
    if (level == SOL_SOCKET && name == SO_ERROR) {
        v = s->err;
        s->err = 0;
    } else if (level == SOL_SOCKET && name == SO_TYPE) {
        v = SOCK_STREAM;
    } else if (level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF)) {
        v = TCP_WINDOW_BYTES;
    } else if (level == SOL_SOCKET && (name == SO_REUSEADDR || name == SO_REUSEPORT)) {
        v = s->reuse;
    } else if (level != SOL_SOCKET && level != IPPROTO_TCP) {
        errno = ENOPROTOOPT;
        return -1;
    }
    *(int *)val = v;
    *len = sizeof(int);
    return 0;
}

int __wrap_shutdown(int fd, int how);
int __wrap_shutdown(int fd, int how)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : shutdown(fd, how);
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    if (s->state != TS_CONNECTED) {
        errno = ENOTCONN;
        return -1;
    }
    if ((how == SHUT_WR || how == SHUT_RDWR) && !s->wr_shut) {
        s->wr_shut = true;
        seg_send(s, NULL, 0, true);
    }
    if (how == SHUT_RD || how == SHUT_RDWR)
        s->rd_shut = true;
    sock_changed(s);
    return 0;
}

/* ---------------------------------------------------------------- data */

short tcp_poll_events(struct tcp_sock *s, short events)
{
    short r = 0;
    switch (s->state) {
    case TS_LISTEN:
        if (s->aq_head)
            r |= POLLIN;
        break;
    case TS_CONNECTING:
        break;
    case TS_CONNECTED:
        if (s->rx_bytes || s->rx_eof || s->rd_shut)
            r |= POLLIN;
        if (s->rx_eof)
            r |= POLLRDHUP;
        if (s->peer && !s->wr_shut && s->peer->rx_bytes + s->peer->incoming < TCP_WINDOW_BYTES)
            r |= POLLOUT;
        if (!s->peer || (s->rx_eof && s->wr_shut))
            r |= POLLHUP;
        break;
    case TS_NEW:
        r |= POLLOUT | POLLHUP;
        break;
    case TS_CLOSED:
        r |= POLLHUP | (s->err ? POLLERR : 0);
        break;
    }
    if (s->err || s->reset)
        r |= POLLERR;
    return (short)(r & (events | POLLERR | POLLHUP | POLLNVAL));
}

int tcp_fionread(struct tcp_sock *s)
{
    return s->rx_bytes > INT32_MAX ? INT32_MAX : (int)s->rx_bytes;
}

ssize_t tcp_read(struct posix_thread *t, struct pfile *f, void *buf, size_t len, int flags)
{
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    if (s->state == TS_LISTEN || s->state == TS_NEW || s->state == TS_CONNECTING) {
        errno = ENOTCONN;
        return -1;
    }
    size_t got = 0;
    char why[64];
    snprintf(why, sizeof(why), "read(socket fd %d)", f->fd);
    for (;;) {
        while (s->rx_head && got < len) {
            struct tcp_seg *g = s->rx_head;
            size_t n = g->len - g->off;
            if (n > len - got)
                n = len - got;
            memcpy((char *)buf + got, g->data + g->off, n);
            got += n;
            if (flags & MSG_PEEK)
                break;
            g->off += n;
            s->rx_bytes -= n;
            if (g->off == g->len) {
                s->rx_head = g->next;
                if (!s->rx_head)
                    s->rx_tail = NULL;
                free(g);
            }
        }
        if (got && s->peer && !(flags & MSG_PEEK))
            sock_changed(s->peer); /* window space for the writer */
        if (got == len || (got && !(flags & MSG_WAITALL)) || (flags & MSG_PEEK && got))
            break;
        if (s->rx_eof || s->rd_shut)
            break;
        if (s->err || s->reset) {
            if (got)
                break;
            errno = s->err ? s->err : ECONNRESET;
            return -1;
        }
        if ((f->status_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT)) {
            if (got)
                break;
            errno = EAGAIN;
            return -1;
        }
        if (posix_wait(t, &s->wq, SIM_TIME_NEVER, why) == EINTR)
            posix_deliver_signals(t);
    }
    const struct host *h = t->prog->host;
    if (got && h->cpu.memcpy_bytes_per_s)
        host_charge(sim_bytes_to_ps(got, h->cpu.memcpy_bytes_per_s * 8));
    return (ssize_t)got;
}

ssize_t tcp_write(struct posix_thread *t, struct pfile *f, const void *buf, size_t len, int flags)
{
    struct tcp_sock *s = f->obj;
    syscall_cost(t);
    if (s->state != TS_CONNECTED) {
        errno = s->state == TS_CLOSED && s->err ? s->err : ENOTCONN;
        return -1;
    }
    const struct host *h = t->prog->host;
    if (len && h->cpu.memcpy_bytes_per_s)
        host_charge(sim_bytes_to_ps(len, h->cpu.memcpy_bytes_per_s * 8));
    size_t done = 0;
    char why[64];
    snprintf(why, sizeof(why), "write(socket fd %d): receiver's window full", f->fd);
    while (done < len || len == 0) {
        if (s->wr_shut || s->reset || s->err) {
            if (done)
                break;
            errno = s->err ? s->err : EPIPE;
            return -1;
        }
        if (len == 0)
            return 0;
        struct tcp_sock *p = s->peer;
        size_t held = p ? p->rx_bytes + p->incoming : 0;
        size_t room = held < TCP_WINDOW_BYTES ? TCP_WINDOW_BYTES - held : 0;
        if (!room) {
            if ((f->status_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT)) {
                if (done)
                    break;
                errno = EAGAIN;
                return -1;
            }
            if (posix_wait(t, &s->wq, SIM_TIME_NEVER, why) == EINTR)
                posix_deliver_signals(t);
            continue;
        }
        size_t n = len - done < room ? len - done : room;
        int e = seg_send(s, (const char *)buf + done, n, false);
        if (e) {
            if (done)
                break;
            errno = e;
            return -1;
        }
        done += n;
    }
    return (ssize_t)done;
}

int tcp_close(struct posix_world *w, struct tcp_sock *s)
{
    s->owner_closed = true;
    if (s->state == TS_LISTEN) {
        for (struct tcp_sock **pp = &w->listeners; *pp; pp = &(*pp)->lnext)
            if (*pp == s) {
                *pp = s->lnext;
                break;
            }
        while (s->aq_head) { /* connections never accepted: the clients see the end */
            struct tcp_sock *c = s->aq_head;
            s->aq_head = c->qnext;
            c->listener = NULL;
            if (c->peer)
                seg_send(c, NULL, 0, true);
            c->owner_closed = true;
            sock_put(c);
        }
        s->aq_tail = NULL;
        s->aq_len = 0;
    } else if (s->state == TS_CONNECTED && !s->wr_shut) {
        s->wr_shut = true;
        seg_send(s, NULL, 0, true);
    }
    s->state = s->state == TS_CONNECTING ? TS_CONNECTING : TS_CLOSED;
    sock_changed(s);
    sock_put(s);
    return 0;
}

/* The end of a run: whatever is still open or in flight goes (the events
 * that would deliver it are dropped with the simulator). */
void tcp_world_free(struct posix_world *w)
{
    while (w->socks)
        sock_free(w->socks);
    w->listeners = NULL;
}

/* ---------------------------------------------------------------- send / recv family */

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : send(fd, buf, len, flags);
    return tcp_write(t, f, buf, len, flags);
}

ssize_t __wrap_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *sa,
                      socklen_t salen);
ssize_t __wrap_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *sa,
                      socklen_t salen)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : sendto(fd, buf, len, flags, sa, salen);
    return tcp_write(t, f, buf, len, flags); /* the address of a connected socket is ignored */
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : sendmsg(fd, m, flags);
    ssize_t total = 0;
    for (size_t i = 0; i < m->msg_iovlen; i++) {
        ssize_t r = tcp_write(t, f, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len, flags);
        if (r < 0)
            return total ? total : r;
        total += r;
    }
    return total;
}

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : recv(fd, buf, len, flags);
    return tcp_read(t, f, buf, len, flags);
}

ssize_t __wrap_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa,
                        socklen_t *salen);
ssize_t __wrap_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa,
                        socklen_t *salen)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : recvfrom(fd, buf, len, flags, sa, salen);
    struct tcp_sock *s = f->obj;
    ssize_t r = tcp_read(t, f, buf, len, flags);
    if (r >= 0 && sa && salen)
        sa_fill(s->family, s->raddr, s->rport, sa, salen);
    return r;
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags)
{
    struct posix_thread *t = posix_enter();
    struct pfile *f;
    int k = sim_sock(t, fd, &f);
    if (k <= 0)
        return k < 0 ? -1 : recvmsg(fd, m, flags);
    ssize_t total = 0;
    for (size_t i = 0; i < m->msg_iovlen; i++) {
        ssize_t r = tcp_read(t, f, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len,
                             total ? flags | MSG_DONTWAIT : flags);
        if (r < 0)
            return total ? total : r;
        total += r;
        if ((size_t)r < m->msg_iov[i].iov_len)
            break;
    }
    m->msg_controllen = 0;
    m->msg_flags = 0;
    return total;
}

/* ---------------------------------------------------------------- name resolution */

struct sim_addrinfo {
    struct addrinfo ai;
    union {
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } sa;
    char name[64];
};

/* Resolve `node` for program `t`: 0 and the address (network order), or
 * an EAI_ error. */
static int resolve(struct posix_thread *t, const char *node, int flags, uint32_t *addr)
{
    struct posix_world *w = t->prog->w;
    if (!node) {
        *addr = (flags & AI_PASSIVE) ? htonl(INADDR_ANY) : htonl(INADDR_LOOPBACK);
        return 0;
    }
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, node, &a4) == 1) {
        *addr = a4.s_addr;
        return 0;
    }
    if (inet_pton(AF_INET6, node, &a6) == 1) {
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = a6};
        uint16_t port;
        if (sa_parse((struct sockaddr *)&s6, sizeof(s6), addr, &port) == 0)
            return 0;
        return EAI_NONAME;
    }
    if (flags & AI_NUMERICHOST)
        return EAI_NONAME;
    if (!strcmp(node, "localhost") || !strcmp(node, "localhost.localdomain") ||
        !strcmp(node, "ip6-localhost")) {
        *addr = htonl(INADDR_LOOPBACK);
        return 0;
    }
    for (size_t i = 0; i < w->nhosts; i++)
        if (!strcmp(node, w->hosts[i].name)) {
            *addr = tcp_addr_of_host(i);
            return 0;
        }
    char last[INET_ADDRSTRLEN];
    uint32_t la = tcp_addr_of_host(w->nhosts ? w->nhosts - 1 : 0);
    inet_ntop(AF_INET, &la, last, sizeof(last));
    posix_refuse(t, 0,
                 "getaddrinfo(\"%s\"): not a host of this scenario (simulated mode resolves "
                 "h0..%s, their addresses 10.0.0.1..%s and localhost; there is no DNS)",
                 node, w->nhosts ? w->hosts[w->nhosts - 1].name : "h0", last);
    return EAI_NONAME;
}

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getaddrinfo(node, service, hints, res);
    syscall_cost(t);
    int family = hints ? hints->ai_family : AF_UNSPEC;
    int socktype = hints ? hints->ai_socktype : 0;
    int flags = hints ? hints->ai_flags : 0;
    if (!node && !service)
        return EAI_NONAME;
    if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6)
        return EAI_FAMILY;
    if (socktype && socktype != SOCK_STREAM && socktype != SOCK_DGRAM && socktype != SOCK_RAW)
        return EAI_SOCKTYPE;
    uint16_t port = 0;
    if (service) {
        char *end;
        unsigned long p = strtoul(service, &end, 10);
        if (*service && !*end && p <= 65535) {
            port = (uint16_t)p;
        } else if (flags & AI_NUMERICSERV) {
            return EAI_NONAME;
        } else {
            struct servent *se = getservbyname(service, "tcp");
            if (!se)
                return EAI_SERVICE;
            port = ntohs((uint16_t)se->s_port);
        }
    }
    uint32_t addr;
    int rc = resolve(t, node, flags, &addr);
    if (rc)
        return rc;
    struct sim_addrinfo *r = calloc(1, sizeof(*r));
    if (!r)
        return EAI_MEMORY;
    r->ai.ai_flags = flags;
    r->ai.ai_family = family == AF_INET6 ? AF_INET6 : AF_INET;
    r->ai.ai_socktype = socktype ? socktype : SOCK_STREAM;
    r->ai.ai_protocol = r->ai.ai_socktype == SOCK_STREAM  ? IPPROTO_TCP
                        : r->ai.ai_socktype == SOCK_DGRAM ? IPPROTO_UDP
                                                          : 0;
    socklen_t len = sizeof(r->sa);
    sa_fill(r->ai.ai_family, addr, port, (struct sockaddr *)&r->sa, &len);
    r->ai.ai_addr = (struct sockaddr *)&r->sa;
    r->ai.ai_addrlen = len;
    if (flags & AI_CANONNAME) {
        snprintf(r->name, sizeof(r->name), "%s", node ? node : "localhost");
        r->ai.ai_canonname = r->name;
    }
    *res = &r->ai;
    return 0;
}

void __wrap_freeaddrinfo(struct addrinfo *res);
void __wrap_freeaddrinfo(struct addrinfo *res)
{
    struct posix_thread *t = posix_enter();
    if (!t) {
        freeaddrinfo(res);
        return;
    }
    while (res) { /* ours: one block per entry */
        struct addrinfo *next = res->ai_next;
        free(res);
        res = next;
    }
}

int __wrap_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                       char *serv, socklen_t servlen, int flags);
int __wrap_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                       char *serv, socklen_t servlen, int flags)
{
    struct posix_thread *t = posix_enter();
    if (!t)
        return getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
    uint32_t addr;
    uint16_t port;
    if (sa_parse(sa, salen, &addr, &port))
        return EAI_FAMILY;
    if (host && hostlen) {
        int h = tcp_host_of_addr(t->prog->w, addr, NULL);
        if (h >= 0 && !(flags & NI_NUMERICHOST)) {
            snprintf(host, hostlen, "%s", t->prog->w->hosts[h].name);
        } else if (!inet_ntop(AF_INET, &addr, host, hostlen)) {
            return EAI_OVERFLOW;
        }
    }
    if (serv && servlen)
        snprintf(serv, servlen, "%u", port);
    return 0;
}

struct hostent *__wrap_gethostbyname(const char *name);
struct hostent *__wrap_gethostbyname(const char *name)
{
    static struct hostent he;
    static uint32_t addr;
    static char *list[2];
    static char namebuf[64];
    struct posix_thread *t = posix_enter();
    if (!t)
        return gethostbyname(name);
    if (resolve(t, name, 0, &addr)) {
        h_errno = HOST_NOT_FOUND;
        return NULL;
    }
    snprintf(namebuf, sizeof(namebuf), "%s", name);
    list[0] = (char *)&addr;
    list[1] = NULL;
    he.h_name = namebuf;
    he.h_aliases = list + 1;
    he.h_addrtype = AF_INET;
    he.h_length = 4;
    he.h_addr_list = list;
    return &he;
}
