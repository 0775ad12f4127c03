/* Unit parsers of the scenario layer: every unit, exactness (a value that
 * is not a whole number of the base unit is an error, never rounded),
 * overflow, and the message of every error path. */
#include "sim/config/config.h"
#include "test.h"

static char why[160];

static uint64_t time_ok(const char *s)
{
    sim_time_t v = 12345;
    why[0] = '\0';
    int rc = cfg_parse_time(s, &v, why, sizeof why);
    if (rc)
        fprintf(stderr, "cfg_parse_time('%s') failed: %s\n", s, why);
    CHECK(rc == 0);
    return v;
}

/* Parse must fail; returns `why` for message checks. */
static const char *time_bad(const char *s)
{
    sim_time_t v = 777;
    why[0] = '\0';
    CHECK(cfg_parse_time(s, &v, why, sizeof why) == -1);
    CHECK_EQ_U64(v, 777); /* untouched on error */
    return why;
}

static uint64_t rate_ok(const char *s)
{
    uint64_t v = 12345;
    int rc = cfg_parse_rate(s, &v, why, sizeof why);
    if (rc)
        fprintf(stderr, "cfg_parse_rate('%s') failed: %s\n", s, why);
    CHECK(rc == 0);
    return v;
}

static const char *rate_bad(const char *s)
{
    uint64_t v = 777;
    why[0] = '\0';
    CHECK(cfg_parse_rate(s, &v, why, sizeof why) == -1);
    CHECK_EQ_U64(v, 777);
    return why;
}

static uint64_t size_ok(const char *s)
{
    uint64_t v = 12345;
    int rc = cfg_parse_size(s, &v, why, sizeof why);
    if (rc)
        fprintf(stderr, "cfg_parse_size('%s') failed: %s\n", s, why);
    CHECK(rc == 0);
    return v;
}

static const char *size_bad(const char *s)
{
    uint64_t v = 777;
    why[0] = '\0';
    CHECK(cfg_parse_size(s, &v, why, sizeof why) == -1);
    CHECK_EQ_U64(v, 777);
    return why;
}

static uint64_t u64_ok(const char *s)
{
    uint64_t v = 12345;
    int rc = cfg_parse_u64(s, &v, why, sizeof why);
    if (rc)
        fprintf(stderr, "cfg_parse_u64('%s') failed: %s\n", s, why);
    CHECK(rc == 0);
    return v;
}

static const char *u64_bad(const char *s)
{
    uint64_t v = 777;
    why[0] = '\0';
    CHECK(cfg_parse_u64(s, &v, why, sizeof why) == -1);
    CHECK_EQ_U64(v, 777);
    return why;
}

static void test_time(void)
{
    CHECK_EQ_U64(time_ok("1ps"), 1);
    CHECK_EQ_U64(time_ok("300ns"), 300000);
    CHECK_EQ_U64(time_ok("1.5us"), 1500000);
    CHECK_EQ_U64(time_ok("2ms"), 2000000000ull);
    CHECK_EQ_U64(time_ok("3s"), 3000000000000ull);
    CHECK_EQ_U64(time_ok("0.001ns"), 1);
    CHECK_EQ_U64(time_ok("1.250us"), 1250000); /* trailing zeros fine */
    CHECK_EQ_U64(time_ok("100 ns"), 100000);   /* space before the unit */
    CHECK_EQ_U64(time_ok("0"), 0);             /* bare 0 is allowed */
    CHECK_EQ_U64(time_ok("0.0"), 0);
    CHECK_EQ_U64(time_ok("007ns"), 7000);
    /* Largest representable: 18446744073709551615 ps. */
    CHECK_EQ_U64(time_ok("18446744073709551615ps"), UINT64_MAX);
    CHECK_EQ_U64(time_ok("18446744.073709551615s"), UINT64_MAX);

    CHECK_STR_CONTAINS(time_bad("0.5ps"), "not a whole number of picoseconds");
    CHECK_STR_CONTAINS(time_bad("1.0005ns"), "not a whole number of picoseconds");
    CHECK_STR_CONTAINS(time_bad("100"), "missing unit (expected ps, ns, us, ms, s)");
    CHECK_STR_CONTAINS(time_bad("1.5"), "missing unit");
    CHECK(strcmp(time_bad("10sec"), "unknown unit 'sec' (expected ps, ns, us, ms, s)") == 0);
    CHECK_STR_CONTAINS(time_bad("10NS"), "unknown unit 'NS'");
    CHECK_STR_CONTAINS(time_bad("-1ns"), "negative");
    CHECK_STR_CONTAINS(time_bad(""), "empty");
    CHECK_STR_CONTAINS(time_bad(NULL), "empty");
    CHECK_STR_CONTAINS(time_bad("ns"), "expected a number");
    CHECK_STR_CONTAINS(time_bad(".5us"), "expected a number");
    CHECK_STR_CONTAINS(time_bad("+5us"), "expected a number");
    CHECK_STR_CONTAINS(time_bad("5.us"), "digits after the decimal point");
    CHECK_STR_CONTAINS(time_bad("1us x"), "unknown unit 'us x'");
    CHECK_STR_CONTAINS(time_bad("1e3ns"), "unknown unit 'e3ns'");
    CHECK_STR_CONTAINS(time_bad("18446744073709551616ps"), "too large");
    CHECK_STR_CONTAINS(time_bad("18446745s"), "too large");
    CHECK_STR_CONTAINS(time_bad("18446744.073709551616s"), "too large");
    CHECK_STR_CONTAINS(time_bad("99999999999999999999999s"), "too large");
    CHECK_STR_CONTAINS(time_bad("1.0000000000000000001s"), "decimal places");

    /* A NULL `why` is allowed. */
    sim_time_t v;
    CHECK(cfg_parse_time("bad", &v, NULL, 0) == -1);
}

static void test_rate(void)
{
    CHECK_EQ_U64(rate_ok("1bps"), 1);
    CHECK_EQ_U64(rate_ok("9600bps"), 9600);
    CHECK_EQ_U64(rate_ok("56Kbps"), 56000);
    CHECK_EQ_U64(rate_ok("56kbps"), 56000);
    CHECK_EQ_U64(rate_ok("10Mbps"), 10000000);
    CHECK_EQ_U64(rate_ok("100Gbps"), 100000000000ull);
    CHECK_EQ_U64(rate_ok("1.6Tbps"), 1600000000000ull);
    CHECK_EQ_U64(rate_ok("25.78125Gbps"), 25781250000ull);
    CHECK_EQ_U64(rate_ok("100Gb/s"), 100000000000ull);
    CHECK_EQ_U64(rate_ok("1b/s"), 1);
    CHECK_EQ_U64(rate_ok("2Kb/s"), 2000);
    CHECK_EQ_U64(rate_ok("3Mb/s"), 3000000);
    CHECK_EQ_U64(rate_ok("4Tb/s"), 4000000000000ull);
    CHECK_EQ_U64(rate_ok("100 Gbps"), 100000000000ull);
    CHECK_EQ_U64(rate_ok("0"), 0);

    CHECK(strcmp(rate_bad("100Gbs"), "unknown unit 'Gbs' (expected bps, Kbps, Mbps, Gbps, Tbps)") ==
          0);
    CHECK_STR_CONTAINS(rate_bad("100"), "missing unit (expected bps, Kbps, Mbps, Gbps, Tbps)");
    CHECK_STR_CONTAINS(rate_bad("12.5GB/s"), "'GB/s' is bytes per second");
    CHECK_STR_CONTAINS(rate_bad("1MBps"), "bytes per second");
    CHECK_STR_CONTAINS(rate_bad("0.5bps"), "not a whole number of bits per second");
    CHECK_STR_CONTAINS(rate_bad("-100Gbps"), "negative");
    CHECK_STR_CONTAINS(rate_bad(""), "empty");
    CHECK_STR_CONTAINS(rate_bad("fast"), "expected a number");
    CHECK_STR_CONTAINS(rate_bad("18446745Tbps"), "too large");
}

static void test_size(void)
{
    CHECK_EQ_U64(size_ok("1500"), 1500); /* bare integer = bytes */
    CHECK_EQ_U64(size_ok("64B"), 64);
    CHECK_EQ_U64(size_ok("4KB"), 4000);
    CHECK_EQ_U64(size_ok("2MB"), 2000000);
    CHECK_EQ_U64(size_ok("1GB"), 1000000000);
    CHECK_EQ_U64(size_ok("4KiB"), 4096);
    CHECK_EQ_U64(size_ok("2MiB"), 2097152);
    CHECK_EQ_U64(size_ok("1GiB"), 1073741824);
    CHECK_EQ_U64(size_ok("1.5KiB"), 1536);
    CHECK_EQ_U64(size_ok("0.5GiB"), 536870912);
    CHECK_EQ_U64(size_ok("1.5KB"), 1500);
    CHECK_EQ_U64(size_ok("0"), 0);
    CHECK_EQ_U64(size_ok("16 KiB"), 16384);
    CHECK_EQ_U64(size_ok("18446744073709551615"), UINT64_MAX);

    CHECK_STR_CONTAINS(size_bad("0.1KiB"), "not a whole number of bytes");
    CHECK_STR_CONTAINS(size_bad("1.5"), "not a whole number of bytes");
    CHECK(strcmp(size_bad("4Kb"), "unknown unit 'Kb' (expected B, KB, MB, GB, KiB, MiB, GiB)") ==
          0);
    CHECK_STR_CONTAINS(size_bad("4kib"), "unknown unit 'kib'");
    CHECK_STR_CONTAINS(size_bad("-4KiB"), "negative");
    CHECK_STR_CONTAINS(size_bad(""), "empty");
    CHECK_STR_CONTAINS(size_bad("KiB"), "expected a number");
    CHECK_STR_CONTAINS(size_bad("18446744073709551616"), "too large");
    CHECK_STR_CONTAINS(size_bad("17179869184GiB"), "too large");
}

static void test_u64(void)
{
    CHECK_EQ_U64(u64_ok("0"), 0);
    CHECK_EQ_U64(u64_ok("42"), 42);
    CHECK_EQ_U64(u64_ok("0x1f"), 31);
    CHECK_EQ_U64(u64_ok("0XFF"), 255);
    CHECK_EQ_U64(u64_ok("18446744073709551615"), UINT64_MAX);
    CHECK_EQ_U64(u64_ok("0xffffffffffffffff"), UINT64_MAX);

    CHECK_STR_CONTAINS(u64_bad(""), "empty");
    CHECK_STR_CONTAINS(u64_bad("-1"), "negative");
    CHECK_STR_CONTAINS(u64_bad("+1"), "expected a non-negative integer");
    CHECK_STR_CONTAINS(u64_bad("abc"), "expected a non-negative integer");
    CHECK_STR_CONTAINS(u64_bad("1_000"), "unexpected '_000' after the number");
    CHECK_STR_CONTAINS(u64_bad("12kB"), "unexpected 'kB'");
    CHECK_STR_CONTAINS(u64_bad("1.5"), "expected a whole number");
    CHECK_STR_CONTAINS(u64_bad("1e6"), "expected a whole number");
    CHECK_STR_CONTAINS(u64_bad("0x"), "hexadecimal digits");
    CHECK_STR_CONTAINS(u64_bad("0xg"), "hexadecimal digits");
    CHECK_STR_CONTAINS(u64_bad("18446744073709551616"), "too large");
    CHECK_STR_CONTAINS(u64_bad("0x10000000000000000"), "too large");
}

int main(void)
{
    test_time();
    test_rate();
    test_size();
    test_u64();
    return test_summary();
}
