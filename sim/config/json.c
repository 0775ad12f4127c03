/* Streaming JSON writer (see json.h): a stack of open containers, each
 * remembering how many values it holds so separators and indentation come
 * out right, writing either to a FILE or to a growing memory buffer. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct json_level {
    bool is_object;
    size_t count; /* values (objects: pairs) written so far */
};

struct json_writer {
    FILE *f;   /* NULL: memory */
    char *buf; /* memory output, NUL-terminated */
    size_t len, cap;
    bool compact;
    bool key_pending; /* a key was written, its value is next */
    bool failed;      /* misuse or out of memory */
    struct json_level *stack;
    size_t depth, stack_cap;
};

static struct json_writer *writer_new(FILE *f)
{
    struct json_writer *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->f = f;
    return w;
}

struct json_writer *json_new_file(FILE *f)
{
    return writer_new(f);
}

struct json_writer *json_new_mem(void)
{
    struct json_writer *w = writer_new(NULL);
    w->cap = 256;
    w->buf = malloc(w->cap);
    if (!w->buf)
        abort();
    w->buf[0] = '\0';
    return w;
}

void json_set_compact(struct json_writer *w, bool compact)
{
    w->compact = compact;
}

static void emit(struct json_writer *w, const char *s, size_t n)
{
    if (w->f) {
        fwrite(s, 1, n, w->f);
        return;
    }
    if (!w->buf) { /* taken: nothing more to write to */
        w->failed = true;
        return;
    }
    if (w->len + n + 1 > w->cap) {
        while (w->len + n + 1 > w->cap)
            w->cap *= 2;
        char *nb = realloc(w->buf, w->cap);
        if (!nb)
            abort();
        w->buf = nb;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void emits(struct json_writer *w, const char *s)
{
    emit(w, s, strlen(s));
}

/* A caller bug: remembered, reported by json_finish(). */
static void misuse(struct json_writer *w)
{
    w->failed = true;
}

static void newline_indent(struct json_writer *w, size_t depth)
{
    static const char spaces[] = "                                ";
    if (w->compact)
        return;
    emit(w, "\n", 1);
    for (size_t n = depth * 2; n;) {
        size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
        emit(w, spaces, k);
        n -= k;
    }
}

/* Separator / indentation before a value, and bookkeeping. */
static void before_value(struct json_writer *w)
{
    if (!w->depth)
        return;
    struct json_level *top = &w->stack[w->depth - 1];
    if (top->is_object) {
        if (!w->key_pending)
            misuse(w);
        w->key_pending = false;
        return;
    }
    if (top->count)
        emit(w, ",", 1);
    newline_indent(w, w->depth);
    top->count++;
}

/* After a complete value: a top-level value ends its line. */
static void after_value(struct json_writer *w)
{
    if (!w->depth)
        emit(w, "\n", 1);
}

static void open_level(struct json_writer *w, bool is_object)
{
    before_value(w);
    emit(w, is_object ? "{" : "[", 1);
    if (w->depth == w->stack_cap) {
        w->stack_cap = w->stack_cap ? 2 * w->stack_cap : 8;
        w->stack = realloc(w->stack, w->stack_cap * sizeof *w->stack);
        if (!w->stack)
            abort();
    }
    w->stack[w->depth++] = (struct json_level){.is_object = is_object, .count = 0};
}

static void close_level(struct json_writer *w, bool is_object)
{
    if (!w->depth || w->stack[w->depth - 1].is_object != is_object || w->key_pending) {
        misuse(w);
        return;
    }
    size_t count = w->stack[w->depth - 1].count;
    w->depth--;
    if (count)
        newline_indent(w, w->depth);
    emit(w, is_object ? "}" : "]", 1);
    after_value(w);
}

void json_object_begin(struct json_writer *w)
{
    open_level(w, true);
}
void json_object_end(struct json_writer *w)
{
    close_level(w, true);
}
void json_array_begin(struct json_writer *w)
{
    open_level(w, false);
}
void json_array_end(struct json_writer *w)
{
    close_level(w, false);
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* A quoted, escaped JSON string. */
static void emit_string(struct json_writer *w, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    emit(w, "\"", 1);
    size_t run = 0; /* start of bytes that need no escaping */
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        const char *esc = NULL;
        char ubuf[8];
        size_t ulen = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
            esc = ubuf;
        } else if (c >= 0x80) {
            ulen = utf8_len(s + i, n - i);
            if (!ulen) {
                esc = "\\ufffd";
                ulen = 1;
            }
        }
        if (esc) {
            emit(w, str + run, i - run);
            emits(w, esc);
            run = i + ulen;
        }
        i += ulen;
    }
    emit(w, str + run, n - run);
    emit(w, "\"", 1);
}

void json_key(struct json_writer *w, const char *key)
{
    if (!w->depth || !w->stack[w->depth - 1].is_object || w->key_pending) {
        misuse(w);
        return;
    }
    struct json_level *top = &w->stack[w->depth - 1];
    if (top->count)
        emit(w, ",", 1);
    newline_indent(w, w->depth);
    top->count++;
    emit_string(w, key, strlen(key));
    emits(w, w->compact ? ":" : ": ");
    w->key_pending = true;
}

/* A scalar value given as its final text. */
static void scalar(struct json_writer *w, const char *text, size_t n)
{
    before_value(w);
    emit(w, text, n);
    after_value(w);
}

void json_str_n(struct json_writer *w, const char *s, size_t len)
{
    before_value(w);
    emit_string(w, s, len);
    after_value(w);
}

void json_str(struct json_writer *w, const char *s)
{
    if (!s)
        json_null(w);
    else
        json_str_n(w, s, strlen(s));
}

void json_u64(struct json_writer *w, uint64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRIu64, v);
    scalar(w, b, (size_t)n);
}

void json_i64(struct json_writer *w, int64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRId64, v);
    scalar(w, b, (size_t)n);
}

size_t json_format_double(double v, char *buf, size_t len)
{
    if (!isfinite(v))
        return (size_t)snprintf(buf, len, "null");
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return (size_t)n;
}

void json_double(struct json_writer *w, double v)
{
    char b[32];
    size_t n = json_format_double(v, b, sizeof b);
    scalar(w, b, n);
}

void json_bool(struct json_writer *w, bool v)
{
    if (v)
        scalar(w, "true", 4);
    else
        scalar(w, "false", 5);
}

void json_null(struct json_writer *w)
{
    scalar(w, "null", 4);
}

void json_kv_str(struct json_writer *w, const char *key, const char *s)
{
    json_key(w, key);
    json_str(w, s);
}

void json_kv_u64(struct json_writer *w, const char *key, uint64_t v)
{
    json_key(w, key);
    json_u64(w, v);
}

void json_kv_i64(struct json_writer *w, const char *key, int64_t v)
{
    json_key(w, key);
    json_i64(w, v);
}

void json_kv_double(struct json_writer *w, const char *key, double v)
{
    json_key(w, key);
    json_double(w, v);
}

void json_kv_bool(struct json_writer *w, const char *key, bool v)
{
    json_key(w, key);
    json_bool(w, v);
}

void json_kv_object_begin(struct json_writer *w, const char *key)
{
    json_key(w, key);
    json_object_begin(w);
}

void json_kv_array_begin(struct json_writer *w, const char *key)
{
    json_key(w, key);
    json_array_begin(w);
}

const char *json_mem(const struct json_writer *w, size_t *len)
{
    if (len)
        *len = w->len;
    return w->buf;
}

char *json_mem_take(struct json_writer *w, size_t *len)
{
    char *b = w->buf;
    if (len)
        *len = w->len;
    w->buf = NULL;
    w->len = w->cap = 0;
    return b;
}

int json_finish(struct json_writer *w)
{
    if (!w)
        return -1;
    int rc = w->failed || w->depth || w->key_pending ? -1 : 0;
    if (w->f && ferror(w->f))
        rc = -1;
    free(w->stack);
    free(w->buf);
    free(w);
    return rc;
}
