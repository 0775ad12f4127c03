/* The connection to rnicsimd: connect, one call at a time, descriptors
 * passed back with SCM_RIGHTS (emu/proto.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "emu/lib/client.h"
#include "emu/sockpath.h"

void cl_warn_once(const char *fmt, ...)
{
    static char last[256];
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (strcmp(buf, last) == 0)
        return;
    snprintf(last, sizeof(last), "%s", buf);
    fprintf(stderr, "rnicsim: %s\n", buf);
}

int cl_connect(char *why, size_t why_len)
{
    char *path = emu_socket_path();
    if (!path) {
        snprintf(why, why_len, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = -1;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, why_len, "socket path too long: %s", path);
        errno = ENAMETOOLONG;
        goto out;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        snprintf(why, why_len,
                 "cannot reach rnicsimd at %s: %s (start it with 'rnicsim emulate FILE.yaml', or "
                 "set RNICSIM_SOCKET)",
                 path, strerror(e));
        if (fd >= 0)
            close(fd);
        fd = -1;
        errno = e;
        goto out;
    }
    /* Where Yama restricts ptrace to descendants, the daemon's DMA into
     * this process (process_vm_writev) needs our consent. */
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        prctl(PR_SET_PTRACER, (unsigned long)cred.pid, 0, 0, 0);
out:
    free(path);
    return fd;
}

int cl_call_fd(int fd, const struct emu_req *q, struct emu_rep *r, int *fds, int max_fds, int *nfds)
{
    if (nfds)
        *nfds = 0;
    ssize_t n;
    do
        n = send(fd, q, sizeof(*q), MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(*q))
        goto gone;
    if (q->op == EMU_OP_WR_REFUSED)
        return 0; /* no reply */
    struct iovec iov = {.iov_base = r, .iov_len = sizeof(*r)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    do
        n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(*r))
        goto gone;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int got[4];
        memcpy(got, CMSG_DATA(cm), sizeof(int) * (size_t)(k < 4 ? k : 4));
        for (int i = 0; i < k && i < 4; i++) {
            if (nfds && fds && *nfds < max_fds)
                fds[(*nfds)++] = got[i];
            else
                close(got[i]);
        }
    }
    return r->rc;
gone:
    cl_warn_once("lost the connection to rnicsimd (it stopped?): verbs calls fail with EIO");
    return EIO;
}

int cl_call(struct cl_context *ctx, struct emu_req *q, struct emu_rep *r, int *fds, int max_fds,
            int *nfds)
{
    pthread_mutex_lock(&ctx->call_lock);
    int rc = cl_call_fd(ctx->fd, q, r, fds, max_fds, nfds);
    pthread_mutex_unlock(&ctx->call_lock);
    return rc;
}

void *cl_map(int fd, size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        errno = e;
        return NULL;
    }
    return p;
}
