/* The Huang protocols' value bytes (protocols/huang/frame.c): a filled
 * value passes hg_check_value, a wrong byte in either patterned run is
 * reported at its index, values past HG_DENSE_VALUE carry the pattern in
 * their first and last HG_PATTERN_EDGE bytes only, and hg_value_byte says
 * the same as the filled body. */
#include <stdlib.h>

#include "protocols/huang/hg.h"
#include "test.h"

static void check_value_size(uint32_t V)
{
    uint8_t *p = calloc(V, 1);
    char why[160];
    if (!p) {
        CHECK(p != NULL);
        return;
    }
    hg_put_hdr(p, 7, 3, 5);
    hg_fill_value_body(p, V);
    CHECK_EQ_U64(hg_check_value(p, V, 7, 3, 5, why, sizeof(why)), 0);
    uint32_t agree = 1;
    for (uint32_t j = HG_HDR_BYTES; j < V; j++)
        agree &= p[j] == hg_value_byte(j, V);
    CHECK(agree);
    /* a wrong byte at the body's start, its end, and (large values) the
     * last byte of the first run and the first of the second */
    uint32_t at[4] = {HG_HDR_BYTES, V - 1, HG_PATTERN_EDGE - 1, V - HG_PATTERN_EDGE};
    for (int k = 0; k < (V > HG_DENSE_VALUE ? 4 : 2); k++) {
        p[at[k]] ^= 0x10;
        CHECK_EQ_U64(hg_check_value(p, V, 7, 3, 5, why, sizeof(why)), at[k] + 1);
        CHECK_STR_CONTAINS(why, "value byte");
        p[at[k]] ^= 0x10;
    }
    if (V > HG_DENSE_VALUE) { /* between the runs: zeros, not checked */
        CHECK_EQ_U64(p[HG_PATTERN_EDGE], 0);
        CHECK_EQ_U64(hg_value_byte(HG_PATTERN_EDGE, V), 0);
    }
    /* the header: another tag is the request it answers being wrong */
    CHECK(hg_check_value(p, V, 8, 3, 5, why, sizeof(why)) != 0);
    free(p);
}

int main(void)
{
    check_value_size(365);
    check_value_size(HG_DENSE_VALUE);
    check_value_size(65536);
    return test_summary();
}
