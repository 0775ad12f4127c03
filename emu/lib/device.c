/* The device as the program sees it: list, open, close, queries.
 *
 * The device list has one device, rnicsim0, when RNICSIM_HOST names a
 * host of the scenario rnicsimd is running; otherwise it is empty and one
 * line on stderr says why (ibv_devices then prints its usual header and
 * nothing, as with no RDMA hardware).  Opening it connects a context to
 * the daemon; the answers to queries are those of the verbs shim on that
 * host (verbs_shim/device.c), so they are what a simulated program sees. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/lib/client.h"

#undef ibv_query_port
#undef ibv_get_device_list

struct ibv_device **ibv_get_device_list(int *num_devices)
{
    struct ibv_device **list = calloc(2, sizeof(*list));
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    if (num_devices)
        *num_devices = 0;
    const char *host = getenv(EMU_ENV_HOST);
    if (!host || !*host) {
        cl_warn_once("%s is not set: no device (set it to a host of the running scenario, "
                     "e.g. %s=h0)",
                     EMU_ENV_HOST, EMU_ENV_HOST);
        return list;
    }
    char why[600];
    int fd = cl_connect(why, sizeof(why));
    if (fd < 0) {
        cl_warn_once("%s", why);
        return list;
    }
    struct emu_req q = {.op = EMU_OP_HELLO};
    struct emu_rep r;
    q.u.hello.version = EMU_PROTO_VERSION;
    snprintf(q.u.hello.host, sizeof(q.u.hello.host), "%s", host);
    int rc = cl_call_fd(fd, &q, &r, NULL, 0, NULL);
    close(fd);
    if (rc == ENODEV) {
        cl_warn_once("%s=%s: the scenario has hosts h0..h%u", EMU_ENV_HOST, host,
                     r.u.hello.n_nodes ? r.u.hello.n_nodes - 1 : 0);
        return list;
    }
    if (rc) {
        cl_warn_once("rnicsimd refused to attach to %s: %s", host, strerror(rc));
        return list;
    }
    struct cl_device *d = calloc(1, sizeof(*d));
    if (!d) {
        free(list);
        errno = ENOMEM;
        return NULL;
    }
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->dev.name, sizeof(d->dev.name), "%s", EMU_DEVICE_NAME);
    snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs0");
    snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/sys/class/infiniband_verbs/uverbs0");
    snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s",
             EMU_DEVICE_NAME);
    snprintf(d->host, sizeof(d->host), "%s", host);
    d->guid = r.u.hello.node_guid;
    list[0] = &d->dev;
    if (num_devices)
        *num_devices = 1;
    return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    if (!list)
        return;
    for (struct ibv_device **d = list; *d; d++)
        free(cl_container_of(*d, struct cl_device, dev));
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    return device ? device->name : NULL;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
    return device ? cl_container_of(device, struct cl_device, dev)->guid : 0;
}

int ibv_get_device_index(struct ibv_device *device)
{
    return device ? 0 : -1;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    if (!device) {
        errno = EINVAL;
        return NULL;
    }
    struct cl_device *d = cl_container_of(device, struct cl_device, dev);
    char why[600];
    int fd = cl_connect(why, sizeof(why));
    if (fd < 0) {
        cl_warn_once("%s", why);
        errno = ENODEV;
        return NULL;
    }
    struct emu_req q = {.op = EMU_OP_HELLO};
    struct emu_rep r;
    q.u.hello.version = EMU_PROTO_VERSION;
    q.u.hello.open = 1;
    snprintf(q.u.hello.host, sizeof(q.u.hello.host), "%s", d->host);
    int fds[2], nfds = 0;
    int rc = cl_call_fd(fd, &q, &r, fds, 2, &nfds);
    if (rc || nfds != 2) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        close(fd);
        errno = rc ? rc : EPROTO;
        return NULL;
    }
    struct cl_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        close(fds[0]);
        close(fds[1]);
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    ctx->fd = fd;
    ctx->db_fd = fds[0];
    pthread_mutex_init(&ctx->call_lock, NULL);
    ctx->nic.p = r.u.hello.params;
    ctx->nic.ctx = ctx;
    ctx->node_id = r.u.hello.node_id;
    ctx->n_nodes = r.u.hello.n_nodes;
    ctx->port = r.u.hello.port;
    struct ibv_context *c = &ctx->vctx.context;
    c->device = device;
    c->cmd_fd = fd;
    c->async_fd = fds[1];
    c->num_comp_vectors = SHIM_NUM_COMP_VECTORS;
    pthread_mutex_init(&c->mutex, NULL);
    c->abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->vctx.sz = sizeof(struct verbs_context);
    cl_context_set_ops(ctx);
    return c;
}

/* Closing the connection is what tears the context down in the daemon
 * (whatever the program left is destroyed there, as the kernel does). */
int ibv_close_device(struct ibv_context *context)
{
    if (!context)
        return EINVAL;
    struct cl_context *ctx = cl_ctx(context);
    close(ctx->db_fd);
    close(context->async_fd);
    close(ctx->fd);
    pthread_mutex_destroy(&ctx->call_lock);
    pthread_mutex_destroy(&context->mutex);
    free(ctx);
    return 0;
}

/* ---------------------------------------------------------------- queries */

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
    if (!context || !device_attr)
        return EINVAL;
    struct emu_req q = {.op = EMU_OP_QUERY_DEVICE};
    struct emu_rep r;
    int rc = cl_call(cl_ctx(context), &q, &r, NULL, 0, NULL);
    if (!rc)
        *device_attr = r.u.device.orig_attr;
    return rc;
}

int cl_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                       struct ibv_device_attr_ex *attr, size_t attr_size)
{
    if (!context || !attr || (input && input->comp_mask))
        return EINVAL;
    struct emu_req q = {.op = EMU_OP_QUERY_DEVICE};
    q.u.query.index = (uint32_t)(attr_size ? attr_size : 1);
    struct emu_rep r;
    int rc = cl_call(cl_ctx(context), &q, &r, NULL, 0, NULL);
    if (rc)
        return rc;
    size_t n = attr_size < sizeof(r.u.device) ? attr_size : sizeof(r.u.device);
    memcpy(attr, &r.u.device, n);
    if (attr_size > n)
        memset((char *)attr + n, 0, attr_size - n);
    return 0;
}

int cl_query_port_ex(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr,
                     size_t len)
{
    if (!context || !attr)
        return EINVAL;
    struct emu_req q = {.op = EMU_OP_QUERY_PORT};
    q.u.query.index = port_num;
    struct emu_rep r;
    int rc = cl_call(cl_ctx(context), &q, &r, NULL, 0, NULL);
    if (rc)
        return rc;
    size_t n = len < sizeof(r.u.port) ? len : sizeof(r.u.port);
    memcpy(attr, &r.u.port, n);
    if (len > n)
        memset((char *)attr + n, 0, len - n);
    return 0;
}

/* The exported fallback (IBVERBS_1.1): the compat layout, which ends
 * before port_cap_flags2. */
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr)
{
    return cl_query_port_ex(context, port_num, (struct ibv_port_attr *)(void *)port_attr,
                            offsetof(struct ibv_port_attr, port_cap_flags2));
}

static int query_gid(struct ibv_context *context, uint32_t port, uint32_t index, uint32_t flags,
                     struct emu_rep *r)
{
    if (!context)
        return EINVAL;
    struct emu_req q = {.op = EMU_OP_QUERY_GID, .handle = port};
    q.u.query.index = index;
    q.u.query.flags = flags;
    return cl_call(cl_ctx(context), &q, r, NULL, 0, NULL);
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
    struct emu_rep r;
    int rc = gid && index >= 0 ? query_gid(context, port_num, (uint32_t)index, 0, &r) : EINVAL;
    if (rc) {
        errno = rc;
        return -1;
    }
    *gid = r.u.gid.gid;
    return 0;
}

/* IBVERBS_PRIVATE_34, but ibv_devinfo calls it: the type of a GID as
 * sysfs spells it (*type is rdma-core's enum ibv_gid_type_sysfs). */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum emu_gid_type_sysfs *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum emu_gid_type_sysfs *type)
{
    struct emu_rep r;
    int rc = type ? query_gid(context, port_num, index, 0, &r) : EINVAL;
    if (rc) {
        errno = rc;
        return -1;
    }
    *type = (enum emu_gid_type_sysfs)r.u.gid.type;
    return 0;
}

static void gid_entry(const struct emu_rep *r, uint32_t port, uint32_t index,
                      struct ibv_gid_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->gid = r->u.gid.gid;
    e->gid_index = index;
    e->port_num = port;
    e->gid_type =
        r->u.gid.type == EMU_GID_TYPE_SYSFS_ROCE_V2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
    e->ndev_ifindex = 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    struct emu_rep r;
    if (!entry)
        return EINVAL;
    int rc = query_gid(context, port_num, gid_index, flags, &r);
    if (rc)
        return rc;
    struct ibv_gid_entry e;
    gid_entry(&r, port_num, gid_index, &e);
    size_t n = entry_size < sizeof(e) ? entry_size : sizeof(e);
    memcpy(entry, &e, n);
    if (entry_size > n)
        memset((char *)entry + n, 0, entry_size - n);
    return 0;
}

/* Every GID of every port (one port here): the number of entries, or
 * -errno (ENOMEM: more than max_entries). */
ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                             size_t max_entries, uint32_t flags, size_t entry_size)
{
    if (!context || !entries || flags || entry_size < sizeof(struct ibv_gid_entry))
        return -EINVAL;
    struct cl_context *ctx = cl_ctx(context);
    size_t n = 0;
    for (int i = 0; i < ctx->port.gid_tbl_len; i++) {
        struct emu_rep r;
        int rc = query_gid(context, SHIM_PORT_NUM, (uint32_t)i, 0, &r);
        if (rc)
            return -rc;
        if (n == max_entries)
            return -ENOMEM;
        struct ibv_gid_entry e;
        gid_entry(&r, SHIM_PORT_NUM, (uint32_t)i, &e);
        memcpy((char *)entries + n * entry_size, &e, sizeof(e));
        n++;
    }
    return (ssize_t)n;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
    if (!context || !pkey || index < 0) {
        errno = EINVAL;
        return -1;
    }
    struct emu_req q = {.op = EMU_OP_QUERY_PKEY, .handle = port_num};
    q.u.query.index = (uint32_t)index;
    struct emu_rep r;
    int rc = cl_call(cl_ctx(context), &q, &r, NULL, 0, NULL);
    if (rc) {
        errno = rc;
        return -1;
    }
    *pkey = r.u.pkey;
    return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
    if (!context)
        return -1;
    for (int i = 0; i < cl_ctx(context)->port.pkey_tbl_len; i++) {
        __be16 p;
        if (ibv_query_pkey(context, port_num, i, &p))
            return -1;
        if (p == pkey)
            return i;
    }
    return -1;
}

/* ---------------------------------------------------------------- fork, sysfs */

/* Nothing is pinned in this process (the daemon reaches registered memory
 * with process_vm_readv/writev), so fork needs no preparation. */
int ibv_fork_init(void)
{
    return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
    return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size);
int ibv_dontfork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}

int ibv_dofork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}

const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
    const char *env = getenv("SYSFS_PATH");
    return env && *env ? env : "/sys";
}

/* Read `dir/file` into buf (trailing newline removed): its length, or -1.
 * The emulated device has no sysfs directory, so for it this finds
 * nothing, as the tools expect of a device without the file. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    char path[4096];
    if (!dir || !file || !buf || !size)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size);
    close(fd);
    if (n <= 0)
        return -1;
    if ((size_t)n == size)
        n--;
    buf[n] = '\0';
    if (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return (int)n;
}
