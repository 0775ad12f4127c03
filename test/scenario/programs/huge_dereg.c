/* Deregistering an MR unpins the pages it was registered with: an 8 MiB
 * buffer from host_alloc_huge (four 2 MiB pages) costs the same to
 * deregister before and after host_free, and less than the same size on
 * 4 KiB pages (2048 of them).  Reports table huge_dereg: dereg_huge_ns,
 * dereg_huge_after_free_ns, dereg_small_pages_ns.  (test_regthrash.sh) */
#include <infiniband/verbs.h>
#include <stdio.h>

#include <rnicsim/host.h>

enum { LEN = 8 << 20 };

/* ns that ibv_dereg_mr of a LEN-byte MR on a new buffer takes; the buffer
 * is freed before the call when free_first. */
static double dereg_ns(struct ibv_pd *pd, int huge, int free_first)
{
    void *p = huge ? host_alloc_huge(LEN, HOST_SOCKET_LOCAL) : host_alloc(LEN, HOST_SOCKET_LOCAL);
    struct ibv_mr *mr = p ? ibv_reg_mr(pd, p, LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!mr)
        return -1;
    if (free_first)
        host_free(p, LEN);
    uint64_t t0 = host_now_ns();
    int rc = ibv_dereg_mr(mr);
    uint64_t t = host_now_ns() - t0;
    if (!free_first)
        host_free(p, LEN);
    return rc ? -1 : (double)t;
}

int main(void)
{
    struct ibv_device **l = ibv_get_device_list(NULL);
    struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    if (!pd) {
        fprintf(stderr, "huge_dereg: no device\n");
        return 1;
    }
    struct host_kv kv[] = {{"dereg_huge_ns", dereg_ns(pd, 1, 0)},
                           {"dereg_huge_after_free_ns", dereg_ns(pd, 1, 1)},
                           {"dereg_small_pages_ns", dereg_ns(pd, 0, 0)}};
    host_report("huge_dereg", kv, 3);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(l);
    return 0;
}
