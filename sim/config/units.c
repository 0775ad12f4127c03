/* Quantities written the way people write them in scenario files:
 * times ("300ns", "1.5us"), rates ("100Gbps"), sizes ("4KiB", "1500"),
 * plain integers ("42", "0x1f").
 *
 * Every parser is exact: the number is read as decimal digits (never as a
 * double), multiplied by the unit in integer arithmetic, and a value that is
 * not a whole number of the base unit (picoseconds, bits per second, bytes)
 * or that does not fit in 64 bits is an error.  Errors say what was wrong
 * in `why` ("unknown unit 'Gbs' (expected bps, Kbps, Mbps, Gbps, Tbps)"). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

struct unit {
    const char *name;
    uint64_t mult; /* base units per one of this unit */
};

/* A family of units: the table, the base unit's long name for "not a whole
 * number of ..." and the list shown in "expected ..." messages. */
struct unit_family {
    const char *what; /* "time", for messages */
    const struct unit *units;
    const char *base_long; /* "picoseconds" */
    const char *expected;  /* "ps, ns, us, ms, s" */
    bool bare_number_ok;   /* a number without a unit is in base units */
};

static const struct unit time_units[] = {
    {"ps", SIM_PS}, {"ns", SIM_NS}, {"us", SIM_US}, {"ms", SIM_MS}, {"s", SIM_S}, {NULL, 0},
};

/* Rates are decimal bits per second; "Gb/s" style and a lower-case "kbps"
 * are accepted as spellings of the same units. */
static const struct unit rate_units[] = {
    {"bps", 1ull},
    {"Kbps", 1000ull},
    {"Mbps", 1000000ull},
    {"Gbps", 1000000000ull},
    {"Tbps", 1000000000000ull},
    {"b/s", 1ull},
    {"Kb/s", 1000ull},
    {"Mb/s", 1000000ull},
    {"Gb/s", 1000000000ull},
    {"Tb/s", 1000000000000ull},
    {"kbps", 1000ull},
    {"kb/s", 1000ull},
    {NULL, 0},
};

static const struct unit size_units[] = {
    {"B", 1ull},         {"KB", 1000ull},     {"MB", 1000000ull},  {"GB", 1000000000ull},
    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {NULL, 0},
};

static const struct unit_family time_family = {
    .what = "time",
    .units = time_units,
    .base_long = "picoseconds",
    .expected = "ps, ns, us, ms, s",
    .bare_number_ok = false,
};
static const struct unit_family rate_family = {
    .what = "rate",
    .units = rate_units,
    .base_long = "bits per second",
    .expected = "bps, Kbps, Mbps, Gbps, Tbps",
    .bare_number_ok = false,
};
static const struct unit_family size_family = {
    .what = "size",
    .units = size_units,
    .base_long = "bytes",
    .expected = "B, KB, MB, GB, KiB, MiB, GiB",
    .bare_number_ok = true,
};

static int why_set(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fill `why` (if given) and return -1. */
static int why_set(char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A rate written in bytes per second ("GB/s", "MBps") is a common slip:
 * true when `u` has that shape. */
static bool is_bytes_per_second(const char *u)
{
    if (*u == 'K' || *u == 'k' || *u == 'M' || *u == 'G' || *u == 'T')
        u++;
    return strcmp(u, "B/s") == 0 || strcmp(u, "Bps") == 0;
}

/* Parse "<digits>[.<digits>][ ]*<unit>" of family `fam` into base units.
 * Contract: 0 and *out set on success; -1 and `why` otherwise.  The result
 * is exact or an error (never rounded). */
static int parse_quantity(const struct unit_family *fam, const char *s, uint64_t *out, char *why,
                          size_t why_len)
{
    if (!s || !*s)
        return why_set(why, why_len, "empty value");
    const char *p = s;
    if (*p == '-')
        return why_set(why, why_len, "negative values are not allowed");
    if (!isdigit((unsigned char)*p))
        return why_set(why, why_len, "expected a number followed by a unit (%s)", fam->expected);

    /* Integer part. */
    uint64_t ipart = 0;
    bool int_overflow = false;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (ipart > (UINT64_MAX - d) / 10)
            int_overflow = true;
        else
            ipart = ipart * 10 + d;
    }
    /* Fraction: keep the significant digits (trailing zeros dropped). */
    const char *frac = NULL;
    size_t frac_len = 0;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return why_set(why, why_len, "expected digits after the decimal point");
        frac = p;
        while (isdigit((unsigned char)*p))
            p++;
        frac_len = (size_t)(p - frac);
        while (frac_len && frac[frac_len - 1] == '0')
            frac_len--;
    }
    bool is_zero = !int_overflow && ipart == 0 && frac_len == 0;

    /* Unit (optionally after spaces: "100 Gbps"). */
    while (*p == ' ')
        p++;
    const char *unit = p;
    uint64_t mult = 0;
    if (!*unit) {
        if (!fam->bare_number_ok && !is_zero)
            return why_set(why, why_len, "missing unit (expected %s)", fam->expected);
        mult = 1;
    } else {
        for (const struct unit *u = fam->units; u->name; u++)
            if (strcmp(unit, u->name) == 0)
                mult = u->mult;
        if (!mult) {
            if (fam == &rate_family && is_bytes_per_second(unit))
                return why_set(why, why_len,
                               "'%s' is bytes per second; rates are in bits per second (%s)", unit,
                               fam->expected);
            return why_set(why, why_len, "unknown unit '%s' (expected %s)", unit, fam->expected);
        }
    }

    /* value = ipart * mult + 0.frac * mult, each part exact. */
    if (int_overflow || (ipart && ipart > UINT64_MAX / mult))
        return why_set(why, why_len, "too large (the largest %s is %llu %s)", fam->what,
                       (unsigned long long)UINT64_MAX, fam->base_long);
    uint64_t value = ipart * mult;
    if (frac_len) {
        if (frac_len > 18)
            return why_set(why, why_len, "too many decimal places (not a whole number of %s)",
                           fam->base_long);
        uint64_t num = 0, den = 1;
        for (size_t i = 0; i < frac_len; i++) {
            num = num * 10 + (uint64_t)(frac[i] - '0');
            den *= 10;
        }
        uint64_t g = gcd_u64(mult, den);
        uint64_t den_r = den / g, mult_r = mult / g;
        if (num % den_r)
            return why_set(why, why_len, "not a whole number of %s", fam->base_long);
        uint64_t fvalue = num / den_r * mult_r; /* < mult: cannot overflow */
        if (value > UINT64_MAX - fvalue)
            return why_set(why, why_len, "too large (the largest %s is %llu %s)", fam->what,
                           (unsigned long long)UINT64_MAX, fam->base_long);
        value += fvalue;
    }
    *out = value;
    return 0;
}

int cfg_parse_time(const char *s, sim_time_t *out_ps, char *why, size_t why_len)
{
    uint64_t v;
    if (parse_quantity(&time_family, s, &v, why, why_len))
        return -1;
    *out_ps = v;
    return 0;
}

int cfg_parse_rate(const char *s, uint64_t *out_bps, char *why, size_t why_len)
{
    return parse_quantity(&rate_family, s, out_bps, why, why_len);
}

int cfg_parse_size(const char *s, uint64_t *out_bytes, char *why, size_t why_len)
{
    return parse_quantity(&size_family, s, out_bytes, why, why_len);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Plain decimal ("4096") or hexadecimal ("0x1000"); no sign, no
 * separators, no trailing text. */
int cfg_parse_u64(const char *s, uint64_t *out, char *why, size_t why_len)
{
    if (!s || !*s)
        return why_set(why, why_len, "empty value");
    if (*s == '-')
        return why_set(why, why_len, "negative values are not allowed");
    const char *p = s;
    uint64_t v = 0;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        if (hex_digit(*p) < 0)
            return why_set(why, why_len, "expected hexadecimal digits after '0x'");
        for (; hex_digit(*p) >= 0; p++) {
            if (v > (UINT64_MAX >> 4))
                return why_set(why, why_len, "too large (the largest integer is %llu)",
                               (unsigned long long)UINT64_MAX);
            v = (v << 4) | (uint64_t)hex_digit(*p);
        }
    } else {
        if (!isdigit((unsigned char)*p))
            return why_set(why, why_len, "expected a non-negative integer");
        for (; isdigit((unsigned char)*p); p++) {
            unsigned d = (unsigned)(*p - '0');
            if (v > (UINT64_MAX - d) / 10)
                return why_set(why, why_len, "too large (the largest integer is %llu)",
                               (unsigned long long)UINT64_MAX);
            v = v * 10 + d;
        }
    }
    if (*p) {
        if (*p == '.' || *p == 'e' || *p == 'E')
            return why_set(why, why_len, "expected a whole number");
        return why_set(why, why_len, "unexpected '%s' after the number", p);
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- formatting and ranges */

/* The largest unit of `units` (in table order, the canonical spellings
 * first) that divides v exactly, so the text reads back to v. */
static void format_in(uint64_t v, const struct unit *units, size_t n, char *buf, size_t len)
{
    if (v == 0) {
        snprintf(buf, len, "0");
        return;
    }
    size_t best = 0;
    for (size_t i = 0; i < n; i++)
        if (v % units[i].mult == 0 && units[i].mult >= units[best].mult)
            best = i;
    snprintf(buf, len, "%llu%s", (unsigned long long)(v / units[best].mult), units[best].name);
}

void cfg_format_quantity(enum cfg_quantity q, uint64_t v, char *buf, size_t len)
{
    static const struct unit size_binary[] = {
        {"B", 1ull}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
    switch (q) {
    case CFG_Q_TIME:
        format_in(v, time_units, 5, buf, len);
        return;
    case CFG_Q_RATE:
        format_in(v, rate_units, 5, buf, len);
        return;
    case CFG_Q_SIZE:
        format_in(v, size_binary, 4, buf, len);
        return;
    case CFG_Q_COUNT:
        break;
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
}

int cfg_check_range(const struct cfg_node *n, const char *what, enum cfg_quantity q, uint64_t v,
                    uint64_t lo, uint64_t hi, struct cfg_error *err)
{
    if (v >= lo && v <= hi)
        return 0;
    char a[32], b[32];
    cfg_format_quantity(q, lo, a, sizeof a);
    cfg_format_quantity(q, hi, b, sizeof b);
    return cfg_errorf(err, n, "'%s': %s is out of range (expected %s..%s)", what,
                      n && n->scalar ? n->scalar : "the value", a, b);
}
