/* A minimal strict JSON reader, for `rnicsim sweep` reading the results
 * files its runs wrote (sim/config/json.c only writes).
 *
 * RFC 8259 values: objects (keys kept in document order, duplicates
 * kept), arrays, strings (all escapes, \uXXXX with surrogate pairs, to
 * UTF-8), numbers (kept as their text, so a value is copied to a CSV
 * exactly as the run wrote it), true, false, null.  Anything else, trailing
 * text, or nesting deeper than JV_MAX_DEPTH is an error with a byte
 * offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/rnicsim/rnicsim.h"

#define JV_MAX_DEPTH 64

struct jv_parser {
    const char *s;
    size_t len, pos;
    char *why;
    size_t why_len;
    bool failed;
};

static void jp_fail(struct jv_parser *p, const char *what)
{
    if (!p->failed)
        snprintf(p->why, p->why_len, "JSON error at byte %zu: %s", p->pos, what);
    p->failed = true;
}

static void jp_ws(struct jv_parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool jp_lit(struct jv_parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static int hex4(const char *h, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = h[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote.  A malloc'd UTF-8 string, or NULL on error. */
static char *jp_string(struct jv_parser *p)
{
    p->pos++; /* '"' */
    /* Escapes never make the text longer than the source. */
    char *o = xcalloc_or_die(p->len - p->pos + 1, 1);
    size_t n = 0;
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            o[n] = '\0';
            return o;
        }
        if (c < 0x20) {
            jp_fail(p, "control character in a string");
            break;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            p->pos++;
            continue;
        }
        if (p->pos + 1 >= p->len) {
            jp_fail(p, "unterminated escape");
            break;
        }
        char e = p->s[p->pos + 1];
        p->pos += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            o[n++] = repl[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || p->len - p->pos < 4 || hex4(p->s + p->pos, &cp)) {
            jp_fail(p, "bad escape in a string");
            break;
        }
        p->pos += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
            if (p->len - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                hex4(p->s + p->pos + 2, &lo) || lo < 0xDC00 || lo >= 0xE000) {
                jp_fail(p, "unpaired surrogate in a string");
                break;
            }
            p->pos += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            jp_fail(p, "unpaired surrogate in a string");
            break;
        }
        n += utf8_put(o + n, cp);
    }
    if (!p->failed)
        jp_fail(p, "unterminated string");
    free(o);
    return NULL;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static char *jp_number(struct jv_parser *p)
{
    size_t start = p->pos, i = p->pos;
    const char *s = p->s;
    if (i < p->len && s[i] == '-')
        i++;
    if (i < p->len && s[i] == '0') {
        i++;
    } else if (i < p->len && is_digit(s[i])) {
        while (i < p->len && is_digit(s[i]))
            i++;
    } else {
        jp_fail(p, "expected a value");
        return NULL;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || !is_digit(s[i])) {
            p->pos = i;
            jp_fail(p, "expected a digit after '.'");
            return NULL;
        }
        while (i < p->len && is_digit(s[i]))
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->len || !is_digit(s[i])) {
            p->pos = i;
            jp_fail(p, "expected a digit in the exponent");
            return NULL;
        }
        while (i < p->len && is_digit(s[i]))
            i++;
    }
    p->pos = i;
    char *t = xcalloc_or_die(i - start + 1, 1);
    memcpy(t, s + start, i - start);
    return t;
}

static struct jv *jp_value(struct jv_parser *p, int depth);

static void jv_append(struct jv *v, char *key, struct jv *item, size_t *cap)
{
    if (v->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        v->items = xrealloc_or_die(v->items, *cap * sizeof(*v->items));
        if (v->kind == JV_OBJECT)
            v->keys = xrealloc_or_die(v->keys, *cap * sizeof(*v->keys));
    }
    if (v->kind == JV_OBJECT)
        v->keys[v->n] = key;
    v->items[v->n++] = item;
}

static struct jv *jp_container(struct jv_parser *p, int depth, bool object)
{
    struct jv *v = xcalloc_or_die(1, sizeof(*v));
    v->kind = object ? JV_OBJECT : JV_ARRAY;
    size_t cap = 0;
    char close = object ? '}' : ']';
    p->pos++;
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        if (object) {
            jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                jp_fail(p, "expected a key string");
                break;
            }
            if (!(key = jp_string(p)))
                break;
            jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                jp_fail(p, "expected ':'");
                break;
            }
            p->pos++;
        }
        struct jv *item = jp_value(p, depth + 1);
        if (!item) {
            free(key);
            break;
        }
        jv_append(v, key, item, &cap);
        jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return v;
        }
        jp_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    jv_free(v);
    return NULL;
}

static struct jv *jp_value(struct jv_parser *p, int depth)
{
    if (depth > JV_MAX_DEPTH) {
        jp_fail(p, "nested too deeply");
        return NULL;
    }
    jp_ws(p);
    if (p->pos >= p->len) {
        jp_fail(p, "unexpected end of input");
        return NULL;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[')
        return jp_container(p, depth, c == '{');
    struct jv *v = xcalloc_or_die(1, sizeof(*v));
    if (c == '"') {
        v->kind = JV_STRING;
        v->text = jp_string(p);
    } else if (jp_lit(p, "true")) {
        v->kind = JV_BOOL;
        v->b = true;
    } else if (jp_lit(p, "false")) {
        v->kind = JV_BOOL;
    } else if (jp_lit(p, "null")) {
        v->kind = JV_NULL;
    } else {
        v->kind = JV_NUMBER;
        v->text = jp_number(p);
    }
    if ((v->kind == JV_STRING || v->kind == JV_NUMBER) && !v->text) {
        free(v);
        return NULL;
    }
    return v;
}

struct jv *jv_parse(const char *text, size_t len, char *why, size_t why_len)
{
    struct jv_parser p = {.s = text, .len = len, .why = why, .why_len = why_len};
    struct jv *v = jp_value(&p, 0);
    if (v) {
        jp_ws(&p);
        if (p.pos != p.len) {
            jp_fail(&p, "text after the value");
            jv_free(v);
            v = NULL;
        }
    }
    return v;
}

void jv_free(struct jv *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        if (v->keys)
            free(v->keys[i]);
        jv_free(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->text);
    free(v);
}

const struct jv *jv_get(const struct jv *obj, const char *key)
{
    if (!obj || obj->kind != JV_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}
