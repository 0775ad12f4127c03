/* A plain POSIX program for test_posix_programs.sh: what simulated mode
 * gives a program that knows nothing of rnicsim (no <rnicsim/host.h>).
 *
 *   posix_probe --server [-p PORT]        accept one connection, echo
 *                                         every message back, then exit 0
 *   posix_probe --client [-p PORT] HOST   connect by name, time 5 echoes of
 *                                         64 bytes with clock_gettime, check
 *                                         usleep, pthreads (mutex, condition
 *                                         variable, join), an atexit handler;
 *                                         exit status 0
 *   posix_probe --exit-from-thread        exit(7) from a second thread
 *                                         while main waits on a condition
 *
 * Every result is printed (the test greps them) and also decides the exit
 * status, so a wrong answer fails the run. */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int full_read(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int server(const char *port)
{
    struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(NULL, port, &hints, &res)) {
        fprintf(stderr, "getaddrinfo failed\n");
        return 1;
    }
    int ls = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, res->ai_addr, res->ai_addrlen) || listen(ls, 1)) {
        perror("bind/listen");
        return 1;
    }
    freeaddrinfo(res);
    int c = accept(ls, NULL, NULL);
    close(ls);
    if (c < 0) {
        perror("accept");
        return 1;
    }
    char buf[64];
    int n = 0;
    while (full_read(c, buf, sizeof(buf)) == 0) {
        if (write(c, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
            return 1;
        n++;
    }
    printf("server: echoed %d messages, then the client closed\n", n);
    close(c);
    return n == 5 ? 0 : 1;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;

static void *worker(void *arg)
{
    usleep(100); /* simulated: 100 us pass */
    pthread_mutex_lock(&mu);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return (char *)arg + 1;
}

static void bye(void)
{
    printf("client: atexit handler ran\n");
}

static int client(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "getaddrinfo(%s): %s\n", host, gai_strerror(rc));
        return 1;
    }
    int s = -1;
    long long t0 = now_ns();
    for (int tries = 0; tries < 100; tries++) { /* the server may not listen yet */
        s = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
        if (!connect(s, res->ai_addr, res->ai_addrlen))
            break;
        close(s);
        s = -1;
        usleep(10);
    }
    freeaddrinfo(res);
    if (s < 0) {
        perror("connect");
        return 1;
    }
    printf("client: connected after %lld ns\n", now_ns() - t0);
    char buf[64];
    memset(buf, 'x', sizeof(buf));
    long long rtt = 0;
    for (int i = 0; i < 5; i++) {
        long long a = now_ns();
        if (write(s, buf, sizeof(buf)) != (ssize_t)sizeof(buf) || full_read(s, buf, sizeof(buf)))
            return 1;
        rtt = now_ns() - a;
    }
    printf("client: echo round trip %lld ns\n", rtt);
    close(s);

    long long a = now_ns();
    usleep(250);
    printf("client: usleep(250) took %lld ns\n", now_ns() - a);

    static char tag[] = "ab";
    pthread_t th;
    void *ret;
    pthread_create(&th, NULL, worker, tag);
    pthread_mutex_lock(&mu);
    while (!ready)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_join(th, &ret);
    printf("client: thread returned %s\n", ret == tag + 1 ? "its argument + 1" : "garbage");
    atexit(bye);
    return rtt > 0 && ret == tag + 1 ? 0 : 1;
}

static void *exiter(void *arg)
{
    (void)arg;
    usleep(10);
    printf("exiter: calling exit(7)\n");
    exit(7);
}

static int exit_from_thread(void)
{
    pthread_t th;
    pthread_create(&th, NULL, exiter, NULL);
    pthread_mutex_lock(&mu);
    while (!ready)
        pthread_cond_wait(&cv, &mu); /* never signalled: exit() ends it */
    pthread_mutex_unlock(&mu);
    printf("main: not reached\n");
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"server", no_argument, NULL, 's'},
                                         {"client", no_argument, NULL, 'c'},
                                         {"exit-from-thread", no_argument, NULL, 'x'},
                                         {"port", required_argument, NULL, 'p'},
                                         {NULL, 0, NULL, 0}};
    int role = 0;
    const char *port = "7000";
    int c;
    while ((c = getopt_long(argc, argv, "scxp:", opts, NULL)) != -1) {
        if (c == 'p')
            port = optarg;
        else if (c == '?')
            return 2;
        else
            role = c;
    }
    if (role == 's')
        return server(port);
    if (role == 'x')
        return exit_from_thread();
    if (role == 'c' && optind == argc - 1)
        return client(argv[optind], port);
    fprintf(stderr, "usage: %s --server | --client HOST | --exit-from-thread\n", argv[0]);
    return 2;
}
