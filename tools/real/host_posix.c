/* <rnicsim/host.h> on real hardware: plain POSIX.
 *
 *   time       clock_gettime(CLOCK_MONOTONIC); host_compute busy-waits
 *   spinning   host_relax = CPU pause hint + compiler barrier
 *   threads    pthreads; a handle is an index into a small table
 *   CPUs       pthread_setaffinity_np (host_pin_cpu), sched_getcpu; the
 *              topology from sysfs (/sys/devices/system/{cpu,node},
 *              /sys/class/infiniband/<dev>/device/numa_node)
 *   memory     host_alloc = mmap + mbind(MPOL_BIND) to the node, then
 *              touched by the caller (what libnuma's numa_alloc_onnode
 *              does; the system calls are made directly so a real build
 *              needs no libnuma), HOST_SOCKET_LOCAL = first touch by the
 *              caller; host_alloc_huge = the same, 2 MiB-aligned and
 *              rounded up to 2 MiB, madvise(MADV_HUGEPAGE) before the
 *              first touch (transparent huge pages); host_mem_socket =
 *              get_mempolicy(MPOL_F_NODE |
 *              MPOL_F_ADDR); host_touch = one load per cache line;
 *              host_touch_write = nothing (the program's stores were it)
 *   results    host_report prints "table: key=value ..." lines on stdout
 *   out of band a key/value board.  The `--server` process keeps it and
 *              serves it over TCP (port $RNICSIM_OOB_PORT, default 18515
 *              like perftest) from a background thread while using it
 *              directly itself; `--client` processes open one connection
 *              per request to $RNICSIM_OOB_SERVER (host[:port]) or to the
 *              last non-option argument (`prog --client HOST`).
 *
 * Line protocol (keys are printable, without spaces):
 *   "PUT <key> <len>\n" <len bytes>   ->  "OK\n"
 *   "GET <key>\n"                     ->  "VAL <len>\n" <len bytes>
 *                                          (blocks until the key exists)
 *
 * When the server process exits it lingers (up to $RNICSIM_OOB_LINGER_S,
 * default 10 s) until every key it put has been fetched by a client at
 * least once, so a final barrier value is not lost with the process. */
#include "host_posix.h"

#include <dirent.h>
#include <errno.h>
#include <linux/mempolicy.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rnicsim/host.h"

#define OOB_DEFAULT_PORT "18515" /* perftest's default TCP port */
#define OOB_LINE_MAX 512
#define OOB_KEY_MAX 256
#define OOB_VALUE_MAX (16u << 20)
#define OOB_CONNECT_TIMEOUT_S 120 /* the client may start long before the server */
#define THREADS_MAX 64

/* ------------------------------------------------------------ time and CPU */

uint64_t host_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void host_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
    __asm__ __volatile__("" ::: "memory");
}

void host_compute(uint64_t ns)
{
    uint64_t end = host_now_ns() + ns;
    while (host_now_ns() < end)
        host_relax();
}

void *host_memcpy(void *dst, const void *src, size_t n)
{
    return memcpy(dst, src, n);
}

void host_memcpy_bytewise(volatile void *dst, const void *src, size_t n, uint32_t ps_per_byte)
{
    (void)ps_per_byte; /* the loop itself is the cost */
    volatile uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* ------------------------------------------------------------ CPUs and sockets */

/* The first integer of a sysfs file (or of a list "0-3,8"), or -1. */
static long sysfs_long(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

int host_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? (int)n : -1;
}

/* NUMA nodes: node<N> directories of /sys/devices/system/node (1 when the
 * kernel has no NUMA). */
int host_sockets(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    if (!d)
        return 1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9';
    closedir(d);
    return n > 0 ? n : 1;
}

static bool cpu_valid(int cpu)
{
    if (cpu < 0 || cpu >= host_cpus() || cpu >= CPU_SETSIZE) {
        errno = EINVAL;
        return false;
    }
    return true;
}

/* The node<N> link in /sys/devices/system/cpu/cpu<cpu>/. */
int host_cpu_socket(int cpu)
{
    if (!cpu_valid(cpu))
        return -1;
    char path[96];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d", cpu);
    DIR *d = opendir(path);
    int node = 0;
    if (d) {
        for (struct dirent *e; (e = readdir(d));)
            if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9')
                node = atoi(e->d_name + 4);
        closedir(d);
    }
    return node;
}

/* The lowest CPU of the core's hyper-threads, as in the simulator. */
int host_cpu_core(int cpu)
{
    if (!cpu_valid(cpu))
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             cpu);
    long c = sysfs_long(path);
    return c >= 0 ? (int)c : cpu;
}

/* /sys/class/infiniband/<dev>/device/numa_node (-1 there: no NUMA) */
int host_nic_socket(const char *ibdev)
{
    char name[256] = "";
    if (ibdev) {
        snprintf(name, sizeof(name), "%s", ibdev);
    } else {
        DIR *d = opendir("/sys/class/infiniband");
        for (struct dirent *e; d && (e = readdir(d));)
            if (e->d_name[0] != '.') {
                snprintf(name, sizeof(name), "%s", e->d_name);
                break;
            }
        if (d)
            closedir(d);
    }
    if (!name[0] || strchr(name, '/'))
        return 0;
    char path[384];
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", name);
    long n = sysfs_long(path);
    return n > 0 ? (int)n : 0;
}

int host_pin_cpu(int cpu)
{
    if (!cpu_valid(cpu))
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

int host_current_cpu(void)
{
    return sched_getcpu();
}

int host_current_socket(void)
{
    int c = sched_getcpu();
    return c < 0 ? -1 : host_cpu_socket(c);
}

/* ------------------------------------------------------------ memory on sockets */

#define HUGE_BYTES ((size_t)2 << 20)

/* host_alloc_huge's mappings are longer than asked (whole 2 MiB pages):
 * host_free looks their length up here. */
struct huge_map {
    void *p;
    size_t bytes;
    struct huge_map *next;
};
static struct huge_map *huge_maps;
static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;

static void *alloc_on(size_t len, int socket, bool huge)
{
    int nodes = host_sockets();
    if (!len || socket < HOST_SOCKET_LOCAL || socket >= nodes ||
        (huge && len > SIZE_MAX - 2 * HUGE_BYTES)) {
        errno = EINVAL;
        return NULL;
    }
    size_t bytes = huge ? (len + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1) : len;
    size_t map = huge ? bytes + HUGE_BYTES : bytes; /* room to align */
    char *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = m;
    struct huge_map *hm = NULL;
    if (huge) {
        /* transparent huge pages back only 2 MiB-aligned 2 MiB pieces:
         * keep the aligned `bytes`, advised before any page is touched */
        char *a = (char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
        if (a > m)
            munmap(m, (size_t)(a - m));
        if (a + bytes < m + map)
            munmap(a + bytes, (size_t)(m + map - (a + bytes)));
        p = a;
        hm = malloc(sizeof(*hm));
        if (!hm) {
            munmap(p, bytes);
            errno = ENOMEM;
            return NULL;
        }
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: THP off or refused = 4 KiB pages */
    }
    if (socket >= 0 && nodes > 1) {
        unsigned long mask[4] = {0};
        int e = 0;
        if ((size_t)socket >= 8 * sizeof(mask))
            e = EINVAL;
        else {
            mask[socket / (8 * sizeof(long))] = 1ul << (socket % (8 * sizeof(long)));
            if (syscall(SYS_mbind, p, bytes, MPOL_BIND, mask, 8 * sizeof(mask) + 1, 0) != 0)
                e = errno;
        }
        if (e) {
            munmap(p, bytes);
            free(hm);
            errno = e;
            return NULL;
        }
    }
    memset(p, 0, bytes); /* the pages come from the node now (or the caller's, first touch) */
    if (hm) {
        *hm = (struct huge_map){p, bytes, NULL};
        pthread_mutex_lock(&huge_lock);
        hm->next = huge_maps;
        huge_maps = hm;
        pthread_mutex_unlock(&huge_lock);
    }
    return p;
}

void *host_alloc(size_t len, int socket)
{
    return alloc_on(len, socket, false);
}

void *host_alloc_huge(size_t len, int socket)
{
    return alloc_on(len, socket, true);
}

void host_free(void *p, size_t len)
{
    if (!p || !len)
        return;
    pthread_mutex_lock(&huge_lock);
    for (struct huge_map **h = &huge_maps; *h; h = &(*h)->next)
        if ((*h)->p == p) {
            struct huge_map *dead = *h;
            *h = dead->next;
            len = dead->bytes;
            free(dead);
            break;
        }
    pthread_mutex_unlock(&huge_lock);
    munmap(p, len);
}

int host_mem_socket(const void *addr)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return host_sockets() == 1 ? 0 : -1; /* no NUMA in the kernel: one node */
    return node;
}

void host_touch(const void *addr, size_t len)
{
    if (!addr || !len)
        return;
    const volatile unsigned char *p = addr;
    uintptr_t a = (uintptr_t)addr, end = a + len;
    for (uintptr_t line = a & ~(uintptr_t)63; line < end; line += 64)
        (void)p[(line < a ? a : line) - a];
}

void host_touch_write(void *addr, size_t len)
{
    (void)addr; /* the program's own stores were the cost */
    (void)len;
}

void host_touch_add(struct host_touches *b, const void *addr, size_t len, size_t stride,
                    size_t count, int write)
{
    (void)b;
    if (write || !addr)
        return; /* the program's own stores were the cost */
    for (size_t i = 0; i < count; i++)
        host_touch((const unsigned char *)addr + i * stride, len);
}

void host_touch_charge(struct host_touches *b)
{
    (void)b; /* the loads were the cost */
}

static char hostname_buf[256];

static void hostname_init(void)
{
    if (gethostname(hostname_buf, sizeof(hostname_buf) - 1) != 0 || !hostname_buf[0])
        snprintf(hostname_buf, sizeof(hostname_buf), "localhost");
}

const char *host_name(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, hostname_init);
    return hostname_buf;
}

/* Device memory comes from the device's own allocator on real hardware
 * (cudaMalloc, an FPGA driver's BAR mapping), not from here. */
void *host_device_alloc(const char *device, size_t bytes)
{
    (void)device;
    (void)bytes;
    errno = ENODEV;
    return NULL;
}

void host_device_free(void *p)
{
    (void)p;
}

void host_report(const char *table, const struct host_kv *kv, size_t n)
{
    printf("%s:", table);
    for (size_t i = 0; i < n; i++)
        printf(" %s=%.10g", kv[i].key, kv[i].value);
    printf("\n");
    fflush(stdout);
}

/* The simulator's event trace has no real-hardware counterpart. */
void host_trace_mark(const char *static_text, uint64_t value)
{
    (void)static_text;
    (void)value;
}

/* ------------------------------------------------------------ threads */

struct thread_slot {
    bool used;
    pthread_t tid;
    void (*fn)(void *arg);
    void *arg;
};

static struct thread_slot threads[THREADS_MAX];
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;

static void *thread_trampoline(void *p)
{
    struct thread_slot *s = p;
    s->fn(s->arg);
    return NULL;
}

int host_thread_start(void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&threads_lock);
    int h;
    for (h = 0; h < THREADS_MAX && threads[h].used; h++)
        ;
    if (h == THREADS_MAX) {
        pthread_mutex_unlock(&threads_lock);
        errno = EAGAIN;
        return -1;
    }
    threads[h].used = true;
    threads[h].fn = fn;
    threads[h].arg = arg;
    int err = pthread_create(&threads[h].tid, NULL, thread_trampoline, &threads[h]);
    if (err)
        threads[h].used = false;
    pthread_mutex_unlock(&threads_lock);
    if (err) {
        errno = err;
        return -1;
    }
    return h;
}

int host_thread_join(int handle)
{
    pthread_mutex_lock(&threads_lock);
    bool ok = handle >= 0 && handle < THREADS_MAX && threads[handle].used;
    pthread_t tid = ok ? threads[handle].tid : pthread_self();
    pthread_mutex_unlock(&threads_lock);
    if (!ok) {
        errno = EINVAL;
        return -1;
    }
    int err = pthread_join(tid, NULL);
    pthread_mutex_lock(&threads_lock);
    threads[handle].used = false;
    pthread_mutex_unlock(&threads_lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the board */

struct board_entry {
    struct board_entry *next;
    char *key;
    void *value;
    size_t len;
    bool put_here;   /* put by this process (server side) */
    bool served_out; /* fetched by a remote client at least once */
};

enum oob_role { OOB_UNSET, OOB_SERVER, OOB_CLIENT };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct board_entry *entries;
    enum oob_role role;
    bool configured, listening;
    char server_host[256];
    char port[16];
} oob = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static struct board_entry *board_find(const char *key)
{
    for (struct board_entry *e = oob.entries; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Store a copy (replacing an older value).  Caller holds oob.lock. */
static int board_put(const char *key, const void *buf, size_t len, bool put_here)
{
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    memcpy(copy, buf, len);
    struct board_entry *e = board_find(key);
    if (!e) {
        e = calloc(1, sizeof(*e));
        char *k = strdup(key);
        if (!e || !k) {
            free(e);
            free(k);
            free(copy);
            return -1;
        }
        e->key = k;
        e->next = oob.entries;
        oob.entries = e;
    }
    free(e->value);
    e->value = copy;
    e->len = len;
    e->put_here = put_here;
    e->served_out = false;
    pthread_cond_broadcast(&oob.changed);
    return 0;
}

/* Wait until `key` exists.  Caller holds oob.lock. */
static struct board_entry *board_wait(const char *key)
{
    struct board_entry *e;
    while (!(e = board_find(key)))
        pthread_cond_wait(&oob.changed, &oob.lock);
    return e;
}

static bool key_valid(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n >= OOB_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (key[i] <= ' ' || key[i] > '~')
            return false;
    return true;
}

/* ------------------------------------------------------------ socket I/O */

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ECONNRESET;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read one '\n'-terminated line (without the newline). */
static int read_line(int fd, char *line, size_t cap)
{
    size_t n = 0;
    for (;;) {
        char c;
        if (read_all(fd, &c, 1) != 0)
            return -1;
        if (c == '\n')
            break;
        if (n + 1 >= cap) {
            errno = EPROTO;
            return -1;
        }
        line[n++] = c;
    }
    line[n] = '\0';
    return 0;
}

/* ------------------------------------------------------------ server side */

/* Serve one connection until the peer closes it. */
static void *serve_conn(void *p)
{
    int fd = (int)(intptr_t)p;
    char line[OOB_LINE_MAX], key[OOB_KEY_MAX];
    while (read_line(fd, line, sizeof(line)) == 0) {
        unsigned long len = 0;
        if (sscanf(line, "PUT %255s %lu", key, &len) == 2 && key_valid(key) &&
            len <= OOB_VALUE_MAX) {
            void *buf = malloc(len ? len : 1);
            if (!buf || read_all(fd, buf, len) != 0) {
                free(buf);
                break;
            }
            pthread_mutex_lock(&oob.lock);
            int rc = board_put(key, buf, len, false);
            pthread_mutex_unlock(&oob.lock);
            free(buf);
            if (rc != 0 || write_all(fd, "OK\n", 3) != 0)
                break;
        } else if (sscanf(line, "GET %255s", key) == 1 && key_valid(key)) {
            pthread_mutex_lock(&oob.lock);
            struct board_entry *e = board_wait(key);
            size_t vlen = e->len;
            void *copy = malloc(vlen ? vlen : 1);
            if (copy)
                memcpy(copy, e->value, vlen);
            pthread_mutex_unlock(&oob.lock);
            char hdr[64];
            int hn = snprintf(hdr, sizeof(hdr), "VAL %zu\n", vlen);
            int rc = !copy || write_all(fd, hdr, (size_t)hn) != 0 || write_all(fd, copy, vlen) != 0;
            free(copy);
            if (rc)
                break;
            pthread_mutex_lock(&oob.lock);
            if ((e = board_find(key)) != NULL)
                e->served_out = true;
            pthread_cond_broadcast(&oob.changed);
            pthread_mutex_unlock(&oob.lock);
        } else {
            fprintf(stderr, "host_posix: bad out-of-band request '%s'\n", line);
            break;
        }
    }
    close(fd);
    return NULL;
}

static void *accept_loop(void *p)
{
    int lfd = (int)(intptr_t)p;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            perror("host_posix: accept");
            return NULL;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pthread_t tid;
        if (pthread_create(&tid, NULL, serve_conn, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(tid);
    }
}

/* At exit: give clients time to fetch what this process put. */
static void server_linger(void)
{
    const char *env = getenv("RNICSIM_OOB_LINGER_S");
    long linger_s = env ? strtol(env, NULL, 10) : 10;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += linger_s;
    pthread_mutex_lock(&oob.lock);
    for (;;) {
        bool pending = false;
        for (struct board_entry *e = oob.entries; e; e = e->next)
            pending |= e->put_here && !e->served_out;
        if (!pending || pthread_cond_timedwait(&oob.changed, &oob.lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&oob.lock);
}

/* Listen and start the accept thread.  Caller holds oob.lock. */
static int server_start(void)
{
    if (oob.listening)
        return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *res = NULL;
    int gai = getaddrinfo(NULL, oob.port, &hints, &res);
    if (gai != 0) {
        fprintf(stderr, "host_posix: port %s: %s\n", oob.port, gai_strerror(gai));
        errno = EINVAL;
        return -1;
    }
    int lfd = -1;
    /* Prefer IPv6 dual-stack (getaddrinfo lists it second on most systems). */
    for (int pass = 0; pass < 2 && lfd < 0; pass++) {
        for (struct addrinfo *ai = res; ai && lfd < 0; ai = ai->ai_next) {
            if ((pass == 0) != (ai->ai_family == AF_INET6))
                continue;
            int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0)
                continue;
            int one = 1, zero = 0;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (ai->ai_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
                lfd = fd;
            else
                close(fd);
        }
    }
    freeaddrinfo(res);
    if (lfd < 0) {
        fprintf(stderr, "host_posix: cannot listen on port %s: %s\n", oob.port, strerror(errno));
        return -1;
    }
    pthread_t tid;
    int err = pthread_create(&tid, NULL, accept_loop, (void *)(intptr_t)lfd);
    if (err) {
        close(lfd);
        errno = err;
        return -1;
    }
    pthread_detach(tid);
    oob.listening = true;
    atexit(server_linger);
    return 0;
}

/* ------------------------------------------------------------ configuration */

/* Apply the role rules to an argument vector.  Caller holds oob.lock. */
static void configure_locked(int argc, char *const *argv)
{
    const char *last_positional = NULL;
    bool server = false, client = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--server") == 0)
            server = true;
        else if (strcmp(argv[i], "--client") == 0)
            client = true;
        else if (argv[i][0] != '-')
            last_positional = argv[i];
    }
    const char *env_server = getenv("RNICSIM_OOB_SERVER");
    const char *env_port = getenv("RNICSIM_OOB_PORT");
    snprintf(oob.port, sizeof(oob.port), "%s", env_port && *env_port ? env_port : OOB_DEFAULT_PORT);
    if (server)
        oob.role = OOB_SERVER;
    else if (client || (env_server && *env_server))
        oob.role = OOB_CLIENT;
    else
        oob.role = OOB_SERVER;
    if (oob.role == OOB_CLIENT) {
        const char *target = env_server && *env_server ? env_server : last_positional;
        if (!target)
            target = "localhost"; /* loopback runs; documented in --help */
        snprintf(oob.server_host, sizeof(oob.server_host), "%s", target);
        /* host:port, [v6addr]:port, or a bare host / IPv6 address */
        char *h = oob.server_host;
        char *colon = strrchr(h, ':');
        if (h[0] == '[') {
            char *rb = strchr(h, ']');
            if (rb) {
                if (rb[1] == ':')
                    snprintf(oob.port, sizeof(oob.port), "%s", rb + 2);
                *rb = '\0';
                memmove(h, h + 1, strlen(h + 1) + 1);
            }
        } else if (colon && colon == strchr(h, ':')) {
            snprintf(oob.port, sizeof(oob.port), "%s", colon + 1);
            *colon = '\0';
        }
    }
    oob.configured = true;
}

void host_posix_set_args(int argc, char **argv)
{
    pthread_mutex_lock(&oob.lock);
    configure_locked(argc, argv);
    if (oob.role == OOB_SERVER)
        server_start();
    pthread_mutex_unlock(&oob.lock);
}

/* Configure from /proc/self/cmdline when the program never called
 * host_posix_set_args.  Caller holds oob.lock. */
static void configure_from_cmdline(void)
{
    char buf[8192];
    char *args[128];
    int argc = 0;
    size_t n = 0;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    for (size_t i = 0; i < n && argc < 128; i += strlen(buf + i) + 1)
        args[argc++] = buf + i;
    configure_locked(argc, args);
}

/* Make sure the role is known and, on the server, that it listens. */
static int oob_ready_locked(void)
{
    if (!oob.configured)
        configure_from_cmdline();
    return oob.role == OOB_SERVER ? server_start() : 0;
}

/* ------------------------------------------------------------ client side */

/* Connect to the board's server.  Until the first connection succeeds the
 * server may not be up yet, so refusals are retried for a while; after that
 * a refusal means the server has gone and fails at once. */
static int client_connect(void)
{
    static atomic_bool reached_once;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    uint64_t deadline = host_now_ns() + (reached_once ? 0 : OOB_CONNECT_TIMEOUT_S * 1000000000ull);
    bool told = false;
    for (;;) {
        int gai = getaddrinfo(oob.server_host, oob.port, &hints, &res);
        if (gai != 0) {
            fprintf(stderr, "host_posix: %s: %s\n", oob.server_host, gai_strerror(gai));
            errno = EHOSTUNREACH;
            return -1;
        }
        int err = ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0)
                continue;
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                freeaddrinfo(res);
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                reached_once = true;
                return fd;
            }
            err = errno;
            close(fd);
        }
        freeaddrinfo(res);
        if (host_now_ns() > deadline) {
            fprintf(stderr, "host_posix: cannot reach %s port %s: %s\n", oob.server_host, oob.port,
                    strerror(err));
            errno = err;
            return -1;
        }
        if (!told) {
            fprintf(stderr, "host_posix: waiting for the server %s port %s ...\n", oob.server_host,
                    oob.port);
            told = true;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
        nanosleep(&ts, NULL);
    }
}

static int client_put(const char *key, const void *buf, size_t len)
{
    int fd = client_connect();
    if (fd < 0)
        return -1;
    char hdr[OOB_LINE_MAX], reply[OOB_LINE_MAX];
    int hn = snprintf(hdr, sizeof(hdr), "PUT %s %zu\n", key, len);
    int rc = write_all(fd, hdr, (size_t)hn) || write_all(fd, buf, len) ||
             read_line(fd, reply, sizeof(reply)) || strcmp(reply, "OK") != 0;
    close(fd);
    if (rc) {
        errno = errno ? errno : EPROTO;
        return -1;
    }
    return 0;
}

static int client_get(const char *key, void *buf, size_t len)
{
    int fd = client_connect();
    if (fd < 0)
        return -1;
    char hdr[OOB_LINE_MAX], reply[OOB_LINE_MAX];
    size_t vlen = 0;
    int hn = snprintf(hdr, sizeof(hdr), "GET %s\n", key);
    if (write_all(fd, hdr, (size_t)hn) || read_line(fd, reply, sizeof(reply)) ||
        sscanf(reply, "VAL %zu", &vlen) != 1 || vlen > OOB_VALUE_MAX) {
        close(fd);
        errno = EPROTO;
        return -1;
    }
    void *tmp = malloc(vlen ? vlen : 1);
    int rc = !tmp || read_all(fd, tmp, vlen);
    close(fd);
    if (rc) {
        free(tmp);
        errno = EPROTO;
        return -1;
    }
    if (vlen != len) {
        free(tmp);
        errno = EMSGSIZE;
        return -1;
    }
    memcpy(buf, tmp, len);
    free(tmp);
    return 0;
}

/* ------------------------------------------------------------ host_oob_* */

int host_oob_put(const char *key, const void *buf, size_t len)
{
    if (!key || !key_valid(key) || (len && !buf) || len > OOB_VALUE_MAX) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&oob.lock);
    int rc = oob_ready_locked();
    bool local = oob.role == OOB_SERVER;
    if (rc == 0 && local)
        rc = board_put(key, buf, len, true);
    pthread_mutex_unlock(&oob.lock);
    if (rc != 0)
        return -1;
    return local ? 0 : client_put(key, buf, len);
}

int host_oob_get(const char *key, void *buf, size_t len)
{
    if (!key || !key_valid(key) || (len && !buf)) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&oob.lock);
    int rc = oob_ready_locked();
    bool local = oob.role == OOB_SERVER;
    if (rc == 0 && local) {
        struct board_entry *e = board_wait(key);
        if (e->len != len) {
            errno = EMSGSIZE;
            rc = -1;
        } else {
            memcpy(buf, e->value, len);
        }
    }
    pthread_mutex_unlock(&oob.lock);
    if (rc != 0)
        return -1;
    return local ? 0 : client_get(key, buf, len);
}
