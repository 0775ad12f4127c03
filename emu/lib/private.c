/* IBVERBS_PRIVATE_34: the interface between libibverbs and its providers
 * (rdma-core's driver.h), and the kernel-ABI copy helpers librdmacm uses.
 *
 * Nothing in emulation mode loads a provider: the device is the daemon.
 * But Debian's perftest links libmlx5.so.1 and libefa.so.1 directly, and
 * both are linked BIND_NOW against these symbols, so without them such a
 * program does not even start ("version `IBVERBS_PRIVATE_34' not found").
 * Their constructors call verbs_register_driver_34, which registers
 * nothing here.  The other entry points are only reached through a
 * provider's context, which never exists in this library: they answer
 * EOPNOTSUPP (pointers: NULL with errno), never touch their arguments. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* The prototypes are declared here (driver.h is not installed): what a
 * caller passes does not matter to functions that look at nothing. */
#define PRIVATE_INT(name)                                                                          \
    int name(void);                                                                                \
    int name(void)                                                                                 \
    {                                                                                              \
        return EOPNOTSUPP;                                                                         \
    }
#define PRIVATE_PTR(name)                                                                          \
    void *name(void);                                                                              \
    void *name(void)                                                                               \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return NULL;                                                                               \
    }
#define PRIVATE_VOID(name)                                                                         \
    void name(void);                                                                               \
    void name(void) {}

/* providers register themselves from their constructors: nothing to do */
PRIVATE_VOID(verbs_register_driver_34)
bool verbs_allow_disassociate_destroy;

PRIVATE_PTR(_verbs_init_and_alloc_context)
PRIVATE_PTR(verbs_open_device)
PRIVATE_VOID(verbs_set_ops)
PRIVATE_VOID(verbs_uninit_context)
PRIVATE_VOID(verbs_init_cq)
PRIVATE_VOID(__verbs_log)
PRIVATE_INT(__ioctl_final_num_attrs)
PRIVATE_INT(execute_ioctl)
PRIVATE_INT(ibv_read_ibdev_sysfs_file)
PRIVATE_INT(ibv_cmd_advise_mr)
PRIVATE_INT(ibv_cmd_alloc_dm)
PRIVATE_INT(ibv_cmd_alloc_mw)
PRIVATE_INT(ibv_cmd_alloc_pd)
PRIVATE_INT(ibv_cmd_attach_mcast)
PRIVATE_INT(ibv_cmd_close_xrcd)
PRIVATE_INT(ibv_cmd_create_ah)
PRIVATE_INT(ibv_cmd_create_counters)
PRIVATE_INT(ibv_cmd_create_cq)
PRIVATE_INT(ibv_cmd_create_cq_ex)
PRIVATE_INT(ibv_cmd_create_flow)
PRIVATE_INT(ibv_cmd_create_flow_action_esp)
PRIVATE_INT(ibv_cmd_create_qp)
PRIVATE_INT(ibv_cmd_create_qp_ex)
PRIVATE_INT(ibv_cmd_create_qp_ex2)
PRIVATE_INT(ibv_cmd_create_rwq_ind_table)
PRIVATE_INT(ibv_cmd_create_srq)
PRIVATE_INT(ibv_cmd_create_srq_ex)
PRIVATE_INT(ibv_cmd_create_wq)
PRIVATE_INT(ibv_cmd_dealloc_mw)
PRIVATE_INT(ibv_cmd_dealloc_pd)
PRIVATE_INT(ibv_cmd_dereg_mr)
PRIVATE_INT(ibv_cmd_destroy_ah)
PRIVATE_INT(ibv_cmd_destroy_counters)
PRIVATE_INT(ibv_cmd_destroy_cq)
PRIVATE_INT(ibv_cmd_destroy_flow)
PRIVATE_INT(ibv_cmd_destroy_flow_action)
PRIVATE_INT(ibv_cmd_destroy_qp)
PRIVATE_INT(ibv_cmd_destroy_rwq_ind_table)
PRIVATE_INT(ibv_cmd_destroy_srq)
PRIVATE_INT(ibv_cmd_destroy_wq)
PRIVATE_INT(ibv_cmd_detach_mcast)
PRIVATE_INT(ibv_cmd_free_dm)
PRIVATE_INT(ibv_cmd_get_context)
PRIVATE_INT(ibv_cmd_modify_cq)
PRIVATE_INT(ibv_cmd_modify_flow_action_esp)
PRIVATE_INT(ibv_cmd_modify_qp)
PRIVATE_INT(ibv_cmd_modify_qp_ex)
PRIVATE_INT(ibv_cmd_modify_srq)
PRIVATE_INT(ibv_cmd_modify_wq)
PRIVATE_INT(ibv_cmd_open_qp)
PRIVATE_INT(ibv_cmd_open_xrcd)
PRIVATE_INT(ibv_cmd_poll_cq)
PRIVATE_INT(ibv_cmd_post_recv)
PRIVATE_INT(ibv_cmd_post_send)
PRIVATE_INT(ibv_cmd_post_srq_recv)
PRIVATE_INT(ibv_cmd_query_context)
PRIVATE_INT(ibv_cmd_query_device_any)
PRIVATE_INT(ibv_cmd_query_mr)
PRIVATE_INT(ibv_cmd_query_port)
PRIVATE_INT(ibv_cmd_query_qp)
PRIVATE_INT(ibv_cmd_query_srq)
PRIVATE_INT(ibv_cmd_read_counters)
PRIVATE_INT(ibv_cmd_reg_dm_mr)
PRIVATE_INT(ibv_cmd_reg_dmabuf_mr)
PRIVATE_INT(ibv_cmd_reg_mr)
PRIVATE_INT(ibv_cmd_req_notify_cq)
PRIVATE_INT(ibv_cmd_rereg_mr)
PRIVATE_INT(ibv_cmd_resize_cq)

/* IBVERBS_1.0 / 1.1: copies between the kernel's uverbs structs and the
 * verbs ones, used by librdmacm on answers of the rdma_cm kernel module,
 * which emulation mode does not have (librdmacm fails before it gets one). */
PRIVATE_VOID(ibv_copy_qp_attr_from_kern)
PRIVATE_VOID(ibv_copy_ah_attr_from_kern)
PRIVATE_VOID(ibv_copy_path_rec_from_kern)
PRIVATE_VOID(ibv_copy_path_rec_to_kern)
