/* The simulated RDMA device as libibverbs shows it: device list, open and
 * close, device/port/GID/P_Key queries, fork support.
 *
 * In simulation every host has one RNIC (host->nic), and a program running
 * on that host sees exactly one device, "rnicsim0".  Outside a simulated
 * process there is no host, so the device list is empty (not an error).
 *
 * Port: one RoCEv2 port (link layer Ethernet, LID 0, GRH required), state
 * ACTIVE, GID index 0 = the NIC's IPv4-mapped GID (nic_gid_of_node); or,
 * with nic.link_layer ib, an InfiniBand port with LID node + 1 (the same
 * GID, of type IB; a GRH optional). */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shim.h"
#include "sim/trace.h"

/* ibv_query_port is a macro in verbs.h (the inline extended-op path); the
 * exported function is the fallback it calls. */
#undef ibv_query_port
#undef ibv_get_device_list

void shim_charge_control_named(const char *call)
{
    host_note_call();
    struct host *h = host_of_current();
    if (!h)
        return;
    if (sim_trace_on(h->sim, TRACE_G_HOST)) {
        sim_time_t now = sim_now(h->sim);
        host_trace_call(host_thread_current(), now, now + h->cpu.control_verb_ps, call,
                        &(struct trace_rec){0});
    }
    host_charge(h->cpu.control_verb_ps);
}

/* ---------------------------------------------------------------- devices */

static struct shim_device *shim_device_new(struct nic *nic)
{
    struct shim_device *sdev = calloc(1, sizeof(*sdev));
    if (!sdev)
        return NULL;
    sdev->nic = nic;
    sdev->refs = 1;
    sdev->dev.node_type = IBV_NODE_CA;
    sdev->dev.transport_type = IBV_TRANSPORT_IB; /* RoCE reports IB transport */
    snprintf(sdev->dev.name, sizeof(sdev->dev.name), "rnicsim0");
    snprintf(sdev->dev.dev_name, sizeof(sdev->dev.dev_name), "uverbs0");
    snprintf(sdev->dev.dev_path, sizeof(sdev->dev.dev_path), "/sys/class/infiniband_verbs/uverbs0");
    snprintf(sdev->dev.ibdev_path, sizeof(sdev->dev.ibdev_path), "/sys/class/infiniband/rnicsim0");
    return sdev;
}

struct shim_device *shim_device_get(struct shim_device *sdev)
{
    sdev->refs++;
    return sdev;
}

void shim_device_put(struct shim_device *sdev)
{
    if (--sdev->refs == 0)
        free(sdev);
}

/* Returns a NULL-terminated array: this host's NIC, or nothing outside a
 * simulated process (*num_devices = 0, list non-NULL). */
struct ibv_device **ibv_get_device_list(int *num_devices)
{
    shim_charge_control();
    struct host *h = host_of_current();
    struct ibv_device **list = calloc(2, sizeof(*list));
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    int n = 0;
    if (h && h->nic) {
        struct shim_device *sdev = shim_device_new(h->nic);
        if (!sdev) {
            free(list);
            errno = ENOMEM;
            return NULL;
        }
        list[n++] = &sdev->dev;
    }
    if (num_devices)
        *num_devices = n;
    return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    host_note_call();
    if (!list)
        return;
    for (struct ibv_device **d = list; *d; d++)
        shim_device_put(shim_container_of(*d, struct shim_device, dev));
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    host_note_call();
    if (!device) {
        errno = EINVAL;
        return NULL;
    }
    return device->name;
}

/* Node GUID: an EUI-64 built from a locally administered MAC
 * 02:00:00:00:hh:ll (hh:ll = node id + 1), as mlx5 derives it from its MAC. */
__be64 shim_node_guid(const struct nic *nic)
{
    uint64_t id = (uint64_t)nic_node_id(nic) + 1;
    uint64_t guid = 0x020000fffe000000ull | (id & 0xffffffull);
    return htobe64(guid);
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
    host_note_call();
    if (!device)
        return 0;
    return shim_node_guid(shim_container_of(device, struct shim_device, dev)->nic);
}

/* ---------------------------------------------------------------- open / close */

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    shim_charge_control();
    if (!device) {
        errno = EINVAL;
        return NULL;
    }
    struct shim_device *sdev = shim_container_of(device, struct shim_device, dev);
    struct shim_context *sctx = calloc(1, sizeof(*sctx));
    if (!sctx) {
        errno = ENOMEM;
        return NULL;
    }
    int afd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (afd < 0) {
        int e = errno;
        free(sctx);
        errno = e;
        return NULL;
    }
    sctx->sdev = shim_device_get(sdev);
    sctx->nic = sdev->nic;
    sctx->host = nic_host(sdev->nic);
    sim_waitq_init(&sctx->async_wq, "ibv_get_async_event");

    struct ibv_context *ctx = &sctx->vctx.context;
    ctx->device = device;
    ctx->cmd_fd = -1; /* no kernel command channel: verbs are function calls */
    ctx->async_fd = afd;
    ctx->num_comp_vectors = SHIM_NUM_COMP_VECTORS;
    pthread_mutex_init(&ctx->mutex, NULL);
    ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
    sctx->vctx.sz = sizeof(struct verbs_context);
    shim_context_set_ops(sctx);
    return ctx;
}

/* Like rdma-core, closing does not check for live objects (the kernel would
 * clean them up); objects still alive must not be used afterwards. */
int ibv_close_device(struct ibv_context *context)
{
    shim_charge_control();
    if (!context)
        return EINVAL;
    struct shim_context *sctx = shim_ctx(context);
    shim_async_teardown(sctx);
    pthread_mutex_destroy(&context->mutex);
    shim_device_put(sctx->sdev);
    free(sctx);
    return 0;
}

/* ---------------------------------------------------------------- queries */

int shim_query_device_attr(struct ibv_context *context, struct ibv_device_attr *attr)
{
    struct shim_context *sctx = shim_ctx(context);
    const struct nic_params *p = nic_get_params(sctx->nic);
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->fw_ver, sizeof(attr->fw_ver), "rnicsim");
    attr->node_guid = shim_node_guid(sctx->nic);
    attr->sys_image_guid = attr->node_guid;
    attr->max_mr_size = UINT64_MAX; /* as mlx5: any size the MTT can map */
    attr->page_size_cap = 4096;
    attr->vendor_id = p->vendor_id; /* the profile's (nic.vendor_id) */
    attr->vendor_part_id = p->vendor_part_id;
    attr->hw_ver = 0;
    attr->max_qp = (int)p->max_qp;
    attr->max_qp_wr = (int)p->max_qp_wr;
    attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID;
    attr->max_sge = (int)p->max_sge;
    attr->max_sge_rd = (int)p->max_sge;
    attr->max_cq = (int)p->max_cq;
    attr->max_cqe = (int)p->max_cqe;
    attr->max_mr = (int)p->max_mr;
    attr->max_pd = (int)p->max_mr; /* estimate: no separate PD table limit in the model */
    attr->max_qp_rd_atom = (int)p->max_qp_rd_atom;
    attr->max_qp_init_rd_atom = (int)p->max_qp_rd_atom;
    attr->max_res_rd_atom = (int)p->max_qp_rd_atom * (int)p->max_qp;
    attr->atomic_cap = IBV_ATOMIC_HCA;
    attr->max_ah = (int)p->max_qp; /* estimate: AHs are software objects here */
    uint32_t max_srq, max_srq_wr, max_srq_sge;
    nic_srq_caps(sctx->nic, &max_srq, &max_srq_wr, &max_srq_sge);
    attr->max_srq = (int)max_srq;
    attr->max_srq_wr = (int)max_srq_wr;
    attr->max_srq_sge = (int)max_srq_sge;
    attr->max_pkeys = SHIM_PKEY_TBL_LEN;
    attr->local_ca_ack_delay = 16; /* what ConnectX-5 reports */
    attr->phys_port_cnt = 1;
    return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
    shim_charge_control();
    if (!context || !device_attr)
        return EINVAL;
    return shim_query_device_attr(context, device_attr);
}

/* verbs_context op behind the inline ibv_query_device_ex: the classic
 * attributes plus what the model has of the extended ones (device memory
 * size); everything else reads as 0, i.e. not supported. */
int shim_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                         struct ibv_device_attr_ex *attr, size_t attr_size)
{
    shim_charge_control();
    if (!context || !attr || (input && input->comp_mask) ||
        attr_size < offsetof(struct ibv_device_attr_ex, max_dm_size) + sizeof(attr->max_dm_size))
        return EINVAL;
    memset(attr, 0, attr_size);
    int rc = shim_query_device_attr(context, &attr->orig_attr);
    if (rc)
        return rc;
    attr->max_dm_size = nic_get_params(shim_ctx(context)->nic)->dm_bytes;
    /* completion timestamps (ibv_create_cq_ex, cq.c): a 64-bit counter of
     * the model's 1 GHz HCA clock */
    attr->completion_timestamp_mask = UINT64_MAX;
    attr->hca_core_clock = 1000000; /* kHz */
    return 0;
}

/* Width/speed a RoCE port reports for its Ethernet rate: the kernel's
 * ib_get_eth_speed() table (drivers/infiniband/core/verbs.c), extended
 * with HDR/NDR for 200/400 Gb/s as mlx5 reports them. */
static const struct {
    uint64_t up_to_bps;
    uint8_t width, speed;
} port_speed_table[] = {
    {1000000000ull, 1 /* 1X */, 1 /* SDR */},    {10000000000ull, 1 /* 1X */, 8 /* FDR10 */},
    {20000000000ull, 2 /* 4X */, 2 /* DDR */},   {25000000000ull, 1 /* 1X */, 32 /* EDR */},
    {40000000000ull, 2 /* 4X */, 8 /* FDR10 */}, {100000000000ull, 2 /* 4X */, 32 /* EDR */},
    {200000000000ull, 2 /* 4X */, 64 /* HDR */}, {UINT64_MAX, 2 /* 4X */, 128 /* NDR */},
};

void shim_port_attr(const struct shim_context *ctx, struct ibv_port_attr *attr)
{
    const struct nic_params *p = nic_get_params(ctx->nic);
    memset(attr, 0, sizeof(*attr));
    attr->state = IBV_PORT_ACTIVE;
    attr->max_mtu = p->max_mtu;
    attr->active_mtu = p->max_mtu;
    attr->gid_tbl_len = SHIM_GID_TBL_LEN;
    attr->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    attr->max_msg_sz = SHIM_MAX_MSG_BYTES;
    attr->pkey_tbl_len = SHIM_PKEY_TBL_LEN;
    attr->lid = 0; /* RoCE: no LIDs */
    attr->sm_lid = 0;
    attr->max_vl_num = 1;
    attr->phys_state = 5; /* LinkUp */
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
    attr->flags = IBV_QPF_GRH_REQUIRED;
    if (p->link_layer == NIC_LINK_IB) {
        /* an InfiniBand port: the LID the NIC answers to (nic.h), the
         * subnet manager at LID 1, a GRH optional */
        attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
        attr->flags = 0;
        attr->port_cap_flags = IBV_PORT_CM_SUP;
        attr->lid = (uint16_t)(nic_node_id(ctx->nic) + 1);
        attr->sm_lid = 1;
    }
    for (size_t i = 0; i < sizeof(port_speed_table) / sizeof(port_speed_table[0]); i++) {
        if (p->port_rate_bps <= port_speed_table[i].up_to_bps) {
            attr->active_width = port_speed_table[i].width;
            attr->active_speed = port_speed_table[i].speed;
            break;
        }
    }
    /* an InfiniBand port between QDR and EDR is 4X FDR (14.0625 Gb/s a lane,
     * 54.55 Gb/s of data), which the Ethernet table has no row for */
    if (p->link_layer == NIC_LINK_IB && p->port_rate_bps > 40000000000ull &&
        p->port_rate_bps <= 56250000000ull) {
        attr->active_width = 2;  /* 4X */
        attr->active_speed = 16; /* FDR */
    }
}

int shim_query_port_ex(struct ibv_context *context, uint8_t port_num,
                       struct ibv_port_attr *port_attr, size_t port_attr_len)
{
    shim_charge_control();
    if (!context || !port_attr)
        return EINVAL;
    if (port_num != SHIM_PORT_NUM)
        return EINVAL;
    struct ibv_port_attr ours;
    shim_port_attr(shim_ctx(context), &ours);
    size_t n = port_attr_len < sizeof(ours) ? port_attr_len : sizeof(ours);
    memcpy(port_attr, &ours, n);
    if (port_attr_len > n)
        memset((char *)port_attr + n, 0, port_attr_len - n);
    return 0;
}

/* The exported fallback (IBVERBS_1.1): callers built against the old
 * struct pass the compat layout, which ends before port_cap_flags2. */
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr)
{
    return shim_query_port_ex(context, port_num, (struct ibv_port_attr *)(void *)port_attr,
                              offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* Returns 0, or -1 with errno set (EINVAL: bad port or index), as
 * rdma-core's ibv_query_gid does. */
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
    shim_charge_control();
    if (!context || !gid || port_num != SHIM_PORT_NUM || index < 0 || index >= SHIM_GID_TBL_LEN) {
        errno = EINVAL;
        return -1;
    }
    nic_gid_of_node(nic_node_id(shim_ctx(context)->nic), gid);
    return 0;
}

/* Returns 0 or an errno value; copies min(entry_size, ours) and zeroes the
 * rest of the caller's entry. */
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    shim_charge_control();
    if (!context || !entry || flags != 0 || port_num != SHIM_PORT_NUM)
        return EINVAL;
    if (gid_index >= SHIM_GID_TBL_LEN)
        return EINVAL;
    struct ibv_gid_entry ours;
    memset(&ours, 0, sizeof(ours));
    nic_gid_of_node(nic_node_id(shim_ctx(context)->nic), &ours.gid);
    ours.gid_index = gid_index;
    ours.port_num = port_num;
    ours.gid_type = nic_get_params(shim_ctx(context)->nic)->link_layer == NIC_LINK_IB
                        ? IBV_GID_TYPE_IB
                        : IBV_GID_TYPE_ROCE_V2;
    ours.ndev_ifindex = 0; /* no Linux netdev behind the simulated port */
    size_t n = entry_size < sizeof(ours) ? entry_size : sizeof(ours);
    memcpy(entry, &ours, n);
    if (entry_size > n)
        memset((char *)entry + n, 0, entry_size - n);
    return 0;
}

/* Returns 0, or -1 with errno EINVAL as rdma-core does for a bad index. */
int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
    shim_charge_control();
    if (!context || !pkey || port_num != SHIM_PORT_NUM || index < 0 || index >= SHIM_PKEY_TBL_LEN) {
        errno = EINVAL;
        return -1;
    }
    *pkey = htobe16(SHIM_DEFAULT_PKEY);
    return 0;
}

/* IBVERBS_PRIVATE_34 (what ibv_devinfo imports): the GID's type as the
 * kernel's sysfs names it.  0 or -1 with errno EINVAL. */
enum shim_gid_type_sysfs { SHIM_GID_TYPE_SYSFS_IB_ROCE_V1, SHIM_GID_TYPE_SYSFS_ROCE_V2 };
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum shim_gid_type_sysfs *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum shim_gid_type_sysfs *type)
{
    shim_charge_control();
    if (!context || !type || port_num != SHIM_PORT_NUM || index >= SHIM_GID_TBL_LEN) {
        errno = EINVAL;
        return -1;
    }
    /* on an InfiniBand port (nic.link_layer ib) the kernel's "IB/RoCE v1" */
    *type = nic_get_params(shim_ctx(context)->nic)->link_layer == NIC_LINK_IB
                ? SHIM_GID_TYPE_SYSFS_IB_ROCE_V1
                : SHIM_GID_TYPE_SYSFS_ROCE_V2;
    return 0;
}

/* ibv_read_sysfs_file (IBVERBS_1.0): rdma-core reads "<dir>/<file>",
 * strips the trailing newline and returns its length.  The simulated
 * device has no sysfs; its directory answers the files tools read about
 * a device (board_id) from the model, anything else as a missing file.
 * Other paths are read for real, as libibverbs does. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    host_note_call();
    if (!dir || !file || !buf || !size) {
        errno = EINVAL;
        return -1;
    }
    if (strncmp(dir, "/sys/class/infiniband/rnicsim", 29) == 0) {
        if (strcmp(file, "board_id") != 0) {
            errno = ENOENT;
            return -1;
        }
        int n = snprintf(buf, size, "RNICSIM_SIMULATED");
        return n < (int)size ? n : (int)size - 1;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return (int)n;
}

/* ---------------------------------------------------------------- fork */

/* The model pins nothing and copies nothing behind the program's back, so
 * fork needs no preparation. */
int ibv_fork_init(void)
{
    host_note_call();
    return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
    host_note_call();
    return IBV_FORK_UNNEEDED;
}
