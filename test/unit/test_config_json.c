/* JSON writer: exact pretty and compact layouts, string escaping (control
 * characters, quotes, invalid UTF-8), shortest round-trip doubles, integer
 * extremes, FILE output equal to memory output, and misuse detection. */
#include <math.h>
#include <stdlib.h>

#include "sim/config/json.h"
#include "test.h"

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ && b_ && strcmp(a_, b_) == 0) {                                                     \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed:\n  got      \"%s\"\n  expected \"%s\"\n",        \
                    __FILE__, __LINE__, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
        }                                                                                          \
    } while (0)

/* Write the same document to any writer. */
static void write_sample(struct json_writer *w)
{
    json_object_begin(w);
    json_kv_str(w, "name", "x");
    json_kv_u64(w, "n", 1);
    json_kv_array_begin(w, "list");
    json_u64(w, 1);
    json_double(w, 2.5);
    json_null(w);
    json_array_end(w);
    json_kv_object_begin(w, "empty_obj");
    json_object_end(w);
    json_kv_array_begin(w, "empty_arr");
    json_array_end(w);
    json_kv_object_begin(w, "nested");
    json_kv_bool(w, "a", true);
    json_kv_bool(w, "b", false);
    json_kv_i64(w, "neg", -5);
    json_key(w, "deeper");
    json_array_begin(w);
    json_object_begin(w);
    json_kv_double(w, "pi", 3.141592653589793);
    json_object_end(w);
    json_array_end(w);
    json_object_end(w);
    json_object_end(w);
}

static const char sample_pretty[] = "{\n"
                                    "  \"name\": \"x\",\n"
                                    "  \"n\": 1,\n"
                                    "  \"list\": [\n"
                                    "    1,\n"
                                    "    2.5,\n"
                                    "    null\n"
                                    "  ],\n"
                                    "  \"empty_obj\": {},\n"
                                    "  \"empty_arr\": [],\n"
                                    "  \"nested\": {\n"
                                    "    \"a\": true,\n"
                                    "    \"b\": false,\n"
                                    "    \"neg\": -5,\n"
                                    "    \"deeper\": [\n"
                                    "      {\n"
                                    "        \"pi\": 3.141592653589793\n"
                                    "      }\n"
                                    "    ]\n"
                                    "  }\n"
                                    "}\n";

static void test_layout(void)
{
    struct json_writer *w = json_new_mem();
    write_sample(w);
    size_t len = 0;
    CHECK_STR_EQ(json_mem(w, &len), sample_pretty);
    CHECK_EQ_U64(len, strlen(sample_pretty));
    CHECK(json_finish(w) == 0);

    w = json_new_mem();
    json_set_compact(w, true);
    write_sample(w);
    CHECK_STR_EQ(json_mem(w, NULL),
                 "{\"name\":\"x\",\"n\":1,\"list\":[1,2.5,null],\"empty_obj\":{},\"empty_arr\":[],"
                 "\"nested\":{\"a\":true,\"b\":false,\"neg\":-5,\"deeper\":[{\"pi\":3."
                 "141592653589793}]}}\n");
    CHECK(json_finish(w) == 0);

    /* JSON Lines: several top-level values, one per line. */
    w = json_new_mem();
    json_set_compact(w, true);
    for (int i = 0; i < 3; i++) {
        json_object_begin(w);
        json_kv_i64(w, "t", i);
        json_object_end(w);
    }
    json_u64(w, 7);
    CHECK_STR_EQ(json_mem(w, NULL), "{\"t\":0}\n{\"t\":1}\n{\"t\":2}\n7\n");
    char *taken = json_mem_take(w, &len);
    CHECK_EQ_U64(len, 26);
    CHECK(json_finish(w) == 0);
    free(taken);

    /* FILE output is byte-identical to memory output. */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        w = json_new_file(f);
        write_sample(w);
        CHECK(json_finish(w) == 0);
        char buf[1024] = "";
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        CHECK_STR_EQ(buf, sample_pretty);
        fclose(f);
    }
}

/* The text json_str() produces for `s` (first `n` bytes). */
static char *str_json(const char *s, size_t n)
{
    struct json_writer *w = json_new_mem();
    json_set_compact(w, true);
    json_str_n(w, s, n);
    char *t = json_mem_take(w, NULL);
    json_finish(w);
    t[strlen(t) - 1] = '\0'; /* drop the newline */
    return t;
}

static void check_str(const char *in, size_t n, const char *want)
{
    char *got = str_json(in, n);
    CHECK_STR_EQ(got, want);
    free(got);
}

static void test_escaping(void)
{
    check_str("plain", 5, "\"plain\"");
    check_str("", 0, "\"\"");
    check_str("a\"b\\c/d", 7, "\"a\\\"b\\\\c/d\"");
    check_str("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    check_str("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"");
    check_str("nul\0x", 5, "\"nul\\u0000x\"");
    /* Valid UTF-8 passes through: e-acute, euro sign, an emoji. */
    check_str("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
              "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    /* Invalid UTF-8 becomes U+FFFD, byte by byte. */
    check_str("a\xff"
              "b",
              3, "\"a\\ufffdb\"");
    check_str("\xc3", 1, "\"\\ufffd\"");                                  /* truncated */
    check_str("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");                       /* overlong '/' */
    check_str("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate */
    check_str("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */

    /* Keys are escaped too; NULL string is null. */
    struct json_writer *w = json_new_mem();
    json_set_compact(w, true);
    json_object_begin(w);
    json_kv_str(w, "k\"ey", NULL);
    json_object_end(w);
    CHECK_STR_EQ(json_mem(w, NULL), "{\"k\\\"ey\":null}\n");
    CHECK(json_finish(w) == 0);
}

static void check_double(double v, const char *want)
{
    char buf[32];
    size_t n = json_format_double(v, buf, sizeof buf);
    CHECK_STR_EQ(buf, want);
    CHECK_EQ_U64(n, strlen(want));
}

static void test_doubles(void)
{
    check_double(0.0, "0");
    check_double(-0.0, "-0");
    check_double(1.0, "1");
    check_double(2.5, "2.5");
    check_double(0.1, "0.1");
    check_double(0.1 + 0.2, "0.30000000000000004");
    check_double(1.0 / 3.0, "0.3333333333333333");
    check_double(100e9, "100000000000");
    check_double(1e21, "1e+21");
    check_double(1e-7, "1e-07");
    check_double(123456.789, "123456.789");
    check_double(5e-324, "4.94065645841247e-324"); /* 15 digits suffice */
    check_double(1.7976931348623157e308, "1.7976931348623157e+308");
    check_double((double)NAN, "null");
    check_double((double)INFINITY, "null");
    check_double(-(double)INFINITY, "null");

    /* Round trip over a deterministic spread of values. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v;
        memcpy(&v, &x, sizeof v);
        if (!isfinite(v))
            continue;
        char buf[32];
        json_format_double(v, buf, sizeof buf);
        if (strtod(buf, NULL) != v)
            bad++;
        if (strlen(buf) > 24)
            bad++;
    }
    CHECK_EQ_U64(bad, 0);

    /* Integers at the extremes. */
    struct json_writer *w = json_new_mem();
    json_set_compact(w, true);
    json_array_begin(w);
    json_u64(w, UINT64_MAX);
    json_i64(w, INT64_MIN);
    json_i64(w, INT64_MAX);
    json_array_end(w);
    CHECK_STR_EQ(json_mem(w, NULL),
                 "[18446744073709551615,-9223372036854775808,9223372036854775807]\n");
    CHECK(json_finish(w) == 0);
}

static void test_misuse(void)
{
    struct json_writer *w = json_new_mem();
    json_object_begin(w);
    json_u64(w, 1); /* value without a key */
    json_object_end(w);
    CHECK(json_finish(w) == -1);

    w = json_new_mem();
    json_array_begin(w);
    json_key(w, "k"); /* key in an array */
    json_array_end(w);
    CHECK(json_finish(w) == -1);

    w = json_new_mem();
    json_object_begin(w); /* never closed */
    CHECK(json_finish(w) == -1);

    w = json_new_mem();
    json_array_begin(w);
    json_object_end(w); /* wrong kind of end */
    CHECK(json_finish(w) == -1);

    w = json_new_mem();
    json_object_begin(w);
    json_key(w, "dangling");
    json_object_end(w); /* key without value */
    CHECK(json_finish(w) == -1);

    CHECK(json_finish(NULL) == -1);

    /* Deep nesting and a long string grow the buffers. */
    w = json_new_mem();
    json_set_compact(w, true);
    for (int i = 0; i < 100; i++)
        json_array_begin(w);
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    json_str(w, big);
    for (int i = 0; i < 100; i++)
        json_array_end(w);
    size_t len = 0;
    json_mem(w, &len);
    CHECK_EQ_U64(len, 100 + 2 + 4999 + 100 + 1);
    CHECK(json_finish(w) == 0);
}

int main(void)
{
    test_layout();
    test_escaping();
    test_doubles();
    test_misuse();
    return test_summary();
}
