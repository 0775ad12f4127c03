/* The bytes of the Huang protocols: requests, values and the marker
 * framing of everything sent by RDMA WRITE (Section III).
 *
 * A request is L bytes: tag (u64, unique per QP: the u-th use of slot i
 * has tag u R + i + 1), link (u32), slot (u32), then key bytes that depend
 * on the tag.  A value is V bytes: the same 16-byte header (the tag of the
 * request it answers; a READ value, which no request writes, has tag 0),
 * then a body that depends only on the byte's position.  Values larger
 * than HG_DENSE_VALUE carry the body pattern only in their first and last
 * HG_PATTERN_EDGE bytes and zeros between (so the simulator does not hold
 * gigabytes of pattern for the 64 KiB points; docs/huang.md).
 *
 * A WRITE message of B payload bytes is framed as
 *   [0..3] B (little-endian)  [4] marker  [5 .. 5+B-1] payload  [5+B] marker
 * (B + 6 bytes).  The reader takes the message when byte 4 is the marker,
 * B is what it expects, and byte 5+B is the marker; it checks the payload
 * and zeroes the B + 6 bytes.  This relies on one WRITE's bytes becoming
 * visible front to back: the final marker must not be visible before the
 * payload (docs/huang.md, "Where the marker framing breaks"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "protocols/huang/hg.h"

const struct hg_proto_info hg_protos[HG_PROTO_COUNT] = {
    [HG_SEND_SEND] = {"send_send", HG_SEND, HG_SEND},
    [HG_SEND_WRITE] = {"send_write", HG_SEND, HG_WRITE},
    [HG_WRITE_SEND] = {"write_send", HG_WRITE, HG_SEND},
    [HG_WRITE_WRITE] = {"write_write", HG_WRITE, HG_WRITE},
    [HG_READ] = {"read", HG_RDMA_READ, HG_NONE},
};

const char *const hg_abs_names[HG_ABS_COUNT] = {[HG_M1] = "m1", [HG_1M] = "1m", [HG_MM] = "mm"};

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint8_t hg_key_byte(uint64_t tag, uint32_t j)
{
    uint64_t x = tag * 0x9e3779b97f4a7c15ull + j;
    return (uint8_t)(x ^ x >> 29 ^ x >> 47);
}

/* The pattern byte at position j (where a value carries the pattern). */
static inline uint8_t pattern_byte(uint32_t j)
{
    return (uint8_t)((j * 167u + 0x3du) ^ (j >> 8) ^ 0x5au);
}

uint8_t hg_value_byte(uint32_t j, uint32_t V)
{
    if (V > HG_DENSE_VALUE && j >= HG_PATTERN_EDGE && j < V - HG_PATTERN_EDGE)
        return 0;
    return pattern_byte(j);
}

/* The body's patterned runs: [HG_HDR_BYTES, *e0) and [*b1, V) (empty
 * when *b1 == V); the bytes between are zeros. */
static void body_runs(uint32_t V, uint32_t *e0, uint32_t *b1)
{
    if (V > HG_DENSE_VALUE) {
        *e0 = HG_PATTERN_EDGE;
        *b1 = V - HG_PATTERN_EDGE;
    } else {
        *e0 = V > HG_HDR_BYTES ? V : HG_HDR_BYTES;
        *b1 = *e0;
    }
}

void hg_put_hdr(uint8_t *p, uint64_t tag, uint32_t link, uint32_t slot)
{
    put_le(p, tag, 8);
    put_le(p + 8, link, 4);
    put_le(p + 12, slot, 4);
}

void hg_get_hdr(const uint8_t *p, uint64_t *tag, uint32_t *link, uint32_t *slot)
{
    *tag = get_le(p, 8);
    *link = (uint32_t)get_le(p + 8, 4);
    *slot = (uint32_t)get_le(p + 12, 4);
}

void hg_fill_request(uint8_t *p, uint32_t L, uint64_t tag, uint32_t link, uint32_t slot)
{
    hg_put_hdr(p, tag, link, slot);
    for (uint32_t j = HG_HDR_BYTES; j < L; j++)
        p[j] = hg_key_byte(tag, j);
}

void hg_fill_value_body(uint8_t *p, uint32_t V)
{
    uint32_t e0, b1; /* zeros between the runs: left untouched */
    body_runs(V, &e0, &b1);
    for (uint32_t j = HG_HDR_BYTES; j < e0; j++)
        p[j] = pattern_byte(j);
    for (uint32_t j = b1; j < V; j++)
        p[j] = pattern_byte(j);
}

void hg_frame_set(uint8_t *m, uint32_t B)
{
    put_le(m, B, 4);
    m[4] = HG_MARKER;
    m[5 + (size_t)B] = HG_MARKER;
}

enum hg_frame_state hg_frame_poll(const uint8_t *m, uint32_t want_len)
{
    if (m[4] != HG_MARKER)
        return HG_FRAME_EMPTY;
    uint32_t B = (uint32_t)get_le(m, 4);
    if (B != want_len)
        return HG_FRAME_BAD_LEN;
    return m[5 + (size_t)B] == HG_MARKER ? HG_FRAME_COMPLETE : HG_FRAME_PARTIAL;
}

static uint32_t check_hdr(const uint8_t *p, uint64_t tag, uint32_t link, uint32_t slot,
                          const char *what, char *why, size_t why_len)
{
    uint64_t t;
    uint32_t l, s;
    hg_get_hdr(p, &t, &l, &s);
    if (t == tag && l == link && s == slot)
        return 0;
    snprintf(why, why_len,
             "%s header is tag %" PRIu64 " link %" PRIu32 " slot %" PRIu32 ", expected tag %" PRIu64
             " link %" PRIu32 " slot %" PRIu32,
             what, t, l, s, tag, link, slot);
    return 1;
}

uint32_t hg_check_request(const uint8_t *p, uint32_t L, uint64_t tag, uint32_t link, uint32_t slot,
                          char *why, size_t why_len)
{
    uint32_t bad = check_hdr(p, tag, link, slot, "request", why, why_len);
    if (bad)
        return bad;
    for (uint32_t j = HG_HDR_BYTES; j < L; j++)
        if (p[j] != hg_key_byte(tag, j)) {
            snprintf(why, why_len, "request byte %" PRIu32 " is 0x%02x, expected 0x%02x", j, p[j],
                     hg_key_byte(tag, j));
            return j + 1;
        }
    return 0;
}

uint32_t hg_check_value(const uint8_t *p, uint32_t V, uint64_t tag, uint32_t link, uint32_t slot,
                        char *why, size_t why_len)
{
    uint32_t bad = check_hdr(p, tag, link, slot, "value", why, why_len);
    if (bad)
        return bad;
    uint32_t e0, b1, j;
    body_runs(V, &e0, &b1);
    for (j = HG_HDR_BYTES; j < e0; j++)
        if (p[j] != pattern_byte(j))
            goto wrong;
    for (j = b1; j < V; j++)
        if (p[j] != pattern_byte(j))
            goto wrong;
    return 0;
wrong:
    snprintf(why, why_len, "value byte %" PRIu32 " is 0x%02x, expected 0x%02x", j, p[j],
             pattern_byte(j));
    return j + 1;
}
