/* sim/nic/hostmem.c: the NIC's reads and writes of an MR's bytes go
 * through the MR's accessor when it has one (emulation mode), and a range
 * not inside the MR is refused whoever holds the bytes. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sim/nic/nic.h"
#include "test.h"

struct log {
    int reads, writes;
    const uint8_t *last_host;
    size_t last_len;
    uint8_t store[64]; /* the "other process's" memory, at fake addresses */
    uintptr_t base;
};

static int fake_read(void *ctx, const struct nic_mr *mr, void *dst, const uint8_t *host, size_t len)
{
    (void)mr;
    struct log *l = ctx;
    l->reads++;
    l->last_host = host;
    l->last_len = len;
    memcpy(dst, l->store + ((uintptr_t)host - l->base), len);
    return 0;
}

static int fake_write(void *ctx, const struct nic_mr *mr, uint8_t *host, const void *src,
                      size_t len)
{
    (void)mr;
    struct log *l = ctx;
    l->writes++;
    l->last_host = host;
    l->last_len = len;
    memcpy(l->store + ((uintptr_t)host - l->base), src, len);
    return 0;
}

static const struct nic_host_mem fake = {.read = fake_read, .write = fake_write};

int main(void)
{
    /* local memory: memcpy inside, refused outside */
    uint8_t buf[96];
    memset(buf, 0x11, sizeof(buf));
    struct nic_mr mr;
    memset(&mr, 0, sizeof(mr));
    mr.host_addr = buf + 16;
    mr.length = 64;
    uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    CHECK(nic_host_write(&mr, buf + 16, v, 8) == 0);
    CHECK(memcmp(buf + 16, v, 8) == 0);
    CHECK(nic_host_write(&mr, buf + 16 + 60, v, 8) == EFAULT); /* runs past the end */
    CHECK(buf[16 + 60] == 0x11 && buf[16 + 64] == 0x11);
    CHECK(nic_host_write(&mr, buf + 8, v, 8) == EFAULT); /* before the start */
    CHECK(buf[8] == 0x11);
    CHECK(nic_host_read(&mr, out, buf + 16, 8) == 0 && memcmp(out, v, 8) == 0);
    memset(out, 0x77, sizeof(out));
    CHECK(nic_host_read(&mr, out, buf + 90, 8) == EFAULT);
    CHECK(out[0] == 0 && out[7] == 0); /* a refused read gives zeros, not what lies there */

    /* another process's memory: the accessor, inside only */
    struct log l;
    memset(&l, 0, sizeof(l));
    l.base = 0x7f0000001000u;
    struct nic_mr rmr;
    memset(&rmr, 0, sizeof(rmr));
    rmr.host_addr = (uint8_t *)l.base;
    rmr.length = sizeof(l.store);
    nic_mr_set_host_mem(&rmr, &fake, &l);
    CHECK(nic_host_write(&rmr, rmr.host_addr + 8, v, 8) == 0);
    CHECK(l.writes == 1 && l.last_len == 8 && l.last_host == rmr.host_addr + 8);
    CHECK(memcmp(l.store + 8, v, 8) == 0);
    CHECK(nic_host_read(&rmr, out, rmr.host_addr + 8, 8) == 0 && memcmp(out, v, 8) == 0);
    CHECK(l.reads == 1);
    CHECK(nic_host_write(&rmr, rmr.host_addr + 60, v, 8) == EFAULT);
    CHECK(nic_host_read(&rmr, out, rmr.host_addr - 1, 2) == EFAULT);
    CHECK(l.writes == 1 && l.reads == 1);                  /* the accessor never saw them */
    CHECK(nic_host_write(&rmr, rmr.host_addr, v, 0) == 0); /* empty, at the start */
    return test_summary();
}
