/* librdmacm's entry points, answered "not supported".
 *
 * Programs such as perftest reference the RDMA connection manager
 * (rdma_cm_*, used with -R) even when they exchange connection data over
 * TCP, so a plug-in built from them has unresolved rdma_* symbols.  The
 * rnicsim executable exports these: loading succeeds, and a program that
 * does call the connection manager gets -1 / NULL with errno ENOSYS and
 * one message naming it and the call.  The signatures are librdmacm's
 * (<rdma/rdma_cma.h>) reduced to what the answer needs: C symbols carry
 * no types, and the pointer arguments are never touched. */
#include <errno.h>
#include <stddef.h>

#include "posix/posix_priv.h"

static void cm_refused(const char *fn)
{
    struct posix_thread *t = posix_enter();
    if (t)
        posix_refuse(t, ENOSYS,
                     "%s: the RDMA connection manager (librdmacm) is not simulated; exchange "
                     "connection data over TCP (perftest: run without -R / --rdma_cm)",
                     fn);
    else
        errno = ENOSYS;
}

#define CM_INT(name)                                                                               \
    int name(void);                                                                                \
    int name(void)                                                                                 \
    {                                                                                              \
        cm_refused(#name);                                                                         \
        return -1;                                                                                 \
    }
#define CM_PTR(name)                                                                               \
    void *name(void);                                                                              \
    void *name(void)                                                                               \
    {                                                                                              \
        cm_refused(#name);                                                                         \
        return NULL;                                                                               \
    }
#define CM_VOID(name)                                                                              \
    void name(void);                                                                               \
    void name(void)                                                                                \
    {                                                                                              \
        cm_refused(#name);                                                                         \
    }

CM_PTR(rdma_create_event_channel)
CM_VOID(rdma_destroy_event_channel)
CM_INT(rdma_create_id)
CM_INT(rdma_create_ep)
CM_VOID(rdma_destroy_ep)
CM_INT(rdma_destroy_id)
CM_INT(rdma_bind_addr)
CM_INT(rdma_resolve_addr)
CM_INT(rdma_resolve_route)
CM_INT(rdma_create_qp)
CM_INT(rdma_create_qp_ex)
CM_VOID(rdma_destroy_qp)
CM_INT(rdma_create_srq)
CM_INT(rdma_create_srq_ex)
CM_VOID(rdma_destroy_srq)
CM_INT(rdma_connect)
CM_INT(rdma_establish)
CM_INT(rdma_listen)
CM_INT(rdma_get_request)
CM_INT(rdma_accept)
CM_INT(rdma_reject)
CM_INT(rdma_reject_ece)
CM_INT(rdma_notify)
CM_INT(rdma_disconnect)
CM_INT(rdma_join_multicast)
CM_INT(rdma_join_multicast_ex)
CM_INT(rdma_leave_multicast)
CM_INT(rdma_get_cm_event)
CM_INT(rdma_ack_cm_event)
CM_PTR(rdma_get_devices)
CM_VOID(rdma_free_devices)
CM_INT(rdma_set_option)
CM_INT(rdma_migrate_id)
CM_INT(rdma_getaddrinfo)
CM_VOID(rdma_freeaddrinfo)
CM_INT(rdma_init_qp_attr)
CM_INT(rdma_set_local_ece)
CM_INT(rdma_get_remote_ece)
CM_INT(rdma_get_src_port)
CM_INT(rdma_get_dst_port)

/* A pure function in librdmacm: the event names. */
const char *rdma_event_str(int event);
const char *rdma_event_str(int event)
{
    static const char *const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
        "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
        "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
        "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
        "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
        "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT",
    };
    if (event < 0 || (size_t)event >= sizeof(names) / sizeof(names[0]))
        return "UNKNOWN EVENT";
    return names[event];
}
