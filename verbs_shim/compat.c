/* The rest of libibverbs' exported functions (libibverbs.map of rdma-core
 * 44, IBVERBS_1.0 .. 1.14), so that a program referencing any of them
 * loads: what the model has is answered from it, the rest as rdma-core
 * answers on a device without the feature (EOPNOTSUPP, or NULL with errno
 * EOPNOTSUPP).  Not here: ibv_rereg_mr (mr.c, with the registration cost).
 *
 *   _ibv_query_gid_table                 the port's GID table (one entry)
 *   ibv_get_pkey_index                   as rdma-core: the index of `pkey`
 *                                        or the error of ibv_query_pkey
 *   ibv_get_device_index                 0 for the one device of a host
 *   ibv_get_sysfs_path                   "/sys"
 *   ibv_dofork_range, ibv_dontfork_range 0: nothing is pinned
 *   ibv_import_device/pd/mr/dm           NULL, errno EOPNOTSUPP: no kernel
 *   ibv_unimport_pd/mr/dm                object to share with another
 *                                        process
 *   ibv_query_ece / ibv_set_ece          EOPNOTSUPP (no enhanced connection
 *                                        establishment)
 *   ibv_reg_dmabuf_mr                    NULL, errno EOPNOTSUPP
 *   ibv_query_qp_data_in_order           0: in-order placement is not
 *                                        promised (the model can relax it)
 *   ibv_resolve_eth_l2_from_gid          the MAC of the GID's node, VLAN 0
 *   ibv_register_driver                  nothing (no providers to load)
 *   ibv_copy_*_from_kern / _to_kern      the uverbs ABI structures copied
 *                                        field by field, as rdma-core does
 *   ibv_query_device_ex (IBVERBS_1.0)    the extended query with the full
 *                                        current structure
 */
/* verbs.h defines ibv_query_device_ex inline; the exported symbol of the
 * same name is defined below under its real name. */
#define ibv_query_device_ex rnicsim_verbs_h_query_device_ex
#include <errno.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#undef ibv_query_device_ex

static void *null_eopnotsupp(void)
{
    host_note_call();
    errno = EOPNOTSUPP;
    return NULL;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                             size_t max_entries, uint32_t flags, size_t entry_size);
ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                             size_t max_entries, uint32_t flags, size_t entry_size)
{
    if (!context || (!entries && max_entries) || flags)
        return -EINVAL;
    if (max_entries < SHIM_GID_TBL_LEN)
        return -EINVAL; /* rdma-core: the table does not fit */
    size_t n = 0;
    for (uint32_t i = 0; i < SHIM_GID_TBL_LEN; i++) {
        int rc = _ibv_query_gid_ex(
            context, SHIM_PORT_NUM, i,
            (struct ibv_gid_entry *)(void *)((char *)entries + n * entry_size), 0, entry_size);
        if (rc)
            return -rc;
        n++;
    }
    return (ssize_t)n;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
    for (int i = 0;; i++) {
        __be16 p;
        int rc = ibv_query_pkey(context, port_num, i, &p);
        if (rc < 0)
            return rc;
        if (p == pkey)
            return i;
    }
}

int ibv_get_device_index(struct ibv_device *device)
{
    host_note_call();
    return device ? 0 : -1;
}

const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
    return "/sys";
}

int ibv_dofork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}

int ibv_dontfork_range(void *base, size_t size);
int ibv_dontfork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
    (void)cmd_fd;
    return null_eopnotsupp();
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
    (void)context;
    (void)pd_handle;
    return null_eopnotsupp();
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
    (void)pd;
    (void)mr_handle;
    return null_eopnotsupp();
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
    (void)context;
    (void)dm_handle;
    return null_eopnotsupp();
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
    (void)pd;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
    (void)mr;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
    (void)dm;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp;
    (void)ece;
    shim_charge_control();
    return EOPNOTSUPP;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp;
    (void)ece;
    shim_charge_control();
    return EOPNOTSUPP;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                 int fd, int access)
{
    (void)pd;
    (void)offset;
    (void)length;
    (void)iova;
    (void)fd;
    (void)access;
    shim_charge_control();
    errno = EOPNOTSUPP;
    return NULL;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
    (void)qp;
    (void)op;
    (void)flags;
    return 0;
}

/* The node's MAC, as the node GUID is built (device.c): 02:00:00:hh:mm:ll
 * with the node id + 1. */
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
                                uint8_t eth_mac[6], uint16_t *vid);
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
                                uint8_t eth_mac[6], uint16_t *vid)
{
    host_note_call();
    if (!context || !attr || !eth_mac || !attr->is_global)
        return EINVAL;
    int64_t node = nic_node_from_gid(&attr->grh.dgid);
    if (node < 0)
        return EINVAL;
    uint64_t id = (uint64_t)node + 1;
    const uint8_t mac[6] = {0x02, 0, 0, (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
    memcpy(eth_mac, mac, sizeof(mac));
    if (vid)
        *vid = 0;
    return 0;
}

void ibv_register_driver(const char *name, void *init_func);
void ibv_register_driver(const char *name, void *init_func)
{
    (void)name;
    (void)init_func;
}

int ibv_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                        struct ibv_device_attr_ex *attr);
int ibv_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                        struct ibv_device_attr_ex *attr)
{
    return shim_query_device_ex(context, input, attr, sizeof(*attr));
}

/* ---------------------------------------------------------------- uverbs ABI copies */

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
    memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
    dst->grh.flow_label = src->grh.flow_label;
    dst->grh.sgid_index = src->grh.sgid_index;
    dst->grh.hop_limit = src->grh.hop_limit;
    dst->grh.traffic_class = src->grh.traffic_class;
    dst->dlid = src->dlid;
    dst->sl = src->sl;
    dst->src_path_bits = src->src_path_bits;
    dst->static_rate = src->static_rate;
    dst->is_global = src->is_global;
    dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
    dst->cur_qp_state = src->cur_qp_state;
    dst->path_mtu = src->path_mtu;
    dst->path_mig_state = src->path_mig_state;
    dst->qkey = src->qkey;
    dst->rq_psn = src->rq_psn;
    dst->sq_psn = src->sq_psn;
    dst->dest_qp_num = src->dest_qp_num;
    dst->qp_access_flags = src->qp_access_flags;
    dst->cap.max_send_wr = src->max_send_wr;
    dst->cap.max_recv_wr = src->max_recv_wr;
    dst->cap.max_send_sge = src->max_send_sge;
    dst->cap.max_recv_sge = src->max_recv_sge;
    dst->cap.max_inline_data = src->max_inline_data;
    ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
    ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
    dst->pkey_index = src->pkey_index;
    dst->alt_pkey_index = src->alt_pkey_index;
    dst->en_sqd_async_notify = src->en_sqd_async_notify;
    dst->sq_draining = src->sq_draining;
    dst->max_rd_atomic = src->max_rd_atomic;
    dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
    dst->min_rnr_timer = src->min_rnr_timer;
    dst->port_num = src->port_num;
    dst->timeout = src->timeout;
    dst->retry_cnt = src->retry_cnt;
    dst->rnr_retry = src->rnr_retry;
    dst->alt_port_num = src->alt_port_num;
    dst->alt_timeout = src->alt_timeout;
}

/* The path record fields are the same names on both sides. */
/* clang-format off */
#define PATH_REC_FIELDS(X) \
    X(dlid) \
    X(slid) \
    X(raw_traffic) \
    X(flow_label) \
    X(hop_limit) \
    X(traffic_class) \
    X(reversible) \
    X(numb_path) \
    X(pkey) \
    X(sl) \
    X(mtu_selector) \
    X(mtu) \
    X(rate_selector) \
    X(rate) \
    X(packet_life_time) \
    X(preference) \
    X(packet_life_time_selector)
/* clang-format on */
#define COPY_FIELD(f) dst->f = src->f;

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
    memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
    memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
    PATH_REC_FIELDS(COPY_FIELD)
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
    memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
    memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
    PATH_REC_FIELDS(COPY_FIELD)
}
