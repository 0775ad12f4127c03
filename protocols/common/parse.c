/* Option values shared by the protocol drivers: sizes with binary
 * suffixes, bounded integers and times (declared in rc_conn.h).  Only libc, so
 * code that needs no connection (protocols/rima/workload.c, its unit test)
 * links it alone. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/common/rc_conn.h"

bool rc_conn_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},           {"b", 1},           {"k", 1024},        {"kb", 1024},
                 {"kib", 1024},     {"m", 1u << 20},    {"mb", 1u << 20},   {"mib", 1u << 20},
                 {"g", 1ull << 30}, {"gb", 1ull << 30}, {"gib", 1ull << 30}};
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return false;
            *out = v * units[i].mult;
            return true;
        }
    }
    return false;
}

bool rc_conn_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (!rc_conn_parse_size(s, &v) || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool rc_conn_parse_time(const char *s, uint64_t *ns)
{
    static const struct {
        const char *suffix;
        uint64_t ns;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].ns)
                return false;
            *ns = v * units[i].ns;
            return true;
        }
    }
    return false;
}

bool rc_conn_parse_rate(const char *s, uint64_t *bytes_per_s)
{
    static const struct {
        const char *suffix;
        double bytes; /* per unit */
    } units[] = {{"", 1},           {"Bps", 1},    {"Gbps", 1e9 / 8},
                 {"Mbps", 1e6 / 8}, {"GBps", 1e9}, {"MBps", 1e6}};
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    double v = strtod(s, &end);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(end, units[i].suffix) == 0 && v * units[i].bytes < 1.8e19) {
            *bytes_per_s = (uint64_t)(v * units[i].bytes);
            return true;
        }
    return false;
}
