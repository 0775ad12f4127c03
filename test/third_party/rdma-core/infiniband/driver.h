/* Stand-in for rdma-core's <infiniband/driver.h> (the provider interface,
 * not installed by libibverbs-dev): the two functions devinfo.c takes from
 * it, with rdma-core v44's declarations.  Both are exported by libibverbs
 * (ibv_read_sysfs_file in IBVERBS_1.0, ibv_query_gid_type in
 * IBVERBS_PRIVATE_34) and by rnicsim's verbs shim. */
#ifndef RNICSIM_STANDIN_INFINIBAND_DRIVER_H
#define RNICSIM_STANDIN_INFINIBAND_DRIVER_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

enum ibv_gid_type_sysfs {
    IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
    IBV_GID_TYPE_SYSFS_ROCE_V2,
};

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum ibv_gid_type_sysfs *type);

#endif
