/* Scenario files: a YAML document read with libyaml's event API into a
 * tree of cfg_node that remembers where every node and every key came
 * from, plus "--set a.b.c=value" overrides and strict typed accessors.
 *
 * What is refused, with a "file:line:col: message" error: YAML syntax
 * errors (at the position libyaml reports), anchors, aliases, tags, more
 * than one document, duplicate keys, non-scalar keys, nesting deeper than
 * CFG_MAX_DEPTH, and a top level that is not a mapping.  After the readers
 * have run, cfg_check_unused() turns every key nobody consumed into an
 * "unknown key" error with a suggestion.
 *
 * Suggestions come from three sources, all in a fixed order so messages
 * are deterministic: keys of the same mapping that a reader consumed, key
 * names a reader looked up in that mapping (present or not: this is how
 * "rat" finds "rate" when "rate" was left to its default), and an optional
 * caller-supplied list of known keys. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config.h"

/* Deeper nesting than this is refused (the loader recurses per level). */
#define CFG_MAX_DEPTH 64
/* A scenario or profile file is at most this large (the largest shipped
 * one is a few KiB; this bounds memory and time spent on garbage). */
#define CFG_MAX_FILE_BYTES (16u << 20)
/* At most this many dotted components in a --set path. */
#define CFG_SET_MAX_SEGS 32

/* Nodes created by cfg_set() report their position in this "file". */
static const char set_file[] = "--set";

/* ---------------------------------------------------------------- memory */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "rnicsim: out of memory\n");
        abort();
    }
    return q;
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

/* "parent.key", or "key" at the root. */
static char *path_key(const char *parent, const char *key)
{
    size_t lp = strlen(parent), lk = strlen(key);
    char *p = xrealloc(NULL, lp + lk + 2);
    if (lp) {
        memcpy(p, parent, lp);
        p[lp] = '.';
        memcpy(p + lp + 1, key, lk + 1);
    } else {
        memcpy(p, key, lk + 1);
    }
    return p;
}

/* "parent[i]". */
static char *path_index(const char *parent, size_t i)
{
    size_t n = strlen(parent) + 24;
    char *p = xrealloc(NULL, n);
    snprintf(p, n, "%s[%zu]", parent, i);
    return p;
}

static struct cfg_node *node_new(enum cfg_kind kind, const char *file, unsigned line, unsigned col,
                                 char *path)
{
    struct cfg_node *n = xrealloc(NULL, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->file = file;
    n->line = line;
    n->col = col;
    n->path = path;
    return n;
}

static void node_free(struct cfg_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        node_free(n->items[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    for (size_t i = 0; i < n->n_asked; i++)
        free(n->asked[i]);
    free(n->scalar);
    free(n->keys);
    free(n->key_line);
    free(n->key_col);
    free(n->key_file);
    free(n->items);
    free(n->used);
    free(n->path);
    free(n->asked);
    free(n);
}

/* Make room for one more child (doubling). */
static void node_grow(struct cfg_node *n)
{
    if (n->n < n->cap)
        return;
    n->cap = n->cap ? 2 * n->cap : 4;
    n->items = xrealloc(n->items, n->cap * sizeof *n->items);
    if (n->kind == CFG_MAP) {
        n->keys = xrealloc(n->keys, n->cap * sizeof *n->keys);
        n->key_line = xrealloc(n->key_line, n->cap * sizeof *n->key_line);
        n->key_col = xrealloc(n->key_col, n->cap * sizeof *n->key_col);
        n->key_file = xrealloc(n->key_file, n->cap * sizeof *n->key_file);
        n->used = xrealloc(n->used, n->cap * sizeof *n->used);
    }
}

static void map_append(struct cfg_node *map, char *key, const char *file, unsigned line,
                       unsigned col, struct cfg_node *value)
{
    node_grow(map);
    map->keys[map->n] = key;
    map->key_file[map->n] = file;
    map->key_line[map->n] = line;
    map->key_col[map->n] = col;
    map->used[map->n] = false;
    map->items[map->n] = value;
    map->n++;
}

static void seq_append(struct cfg_node *seq, struct cfg_node *item)
{
    node_grow(seq);
    seq->items[seq->n++] = item;
}

static long find_key(const struct cfg_node *map, const char *key)
{
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0)
            return (long)i;
    return -1;
}

/* ---------------------------------------------------------------- errors */

static int err_vat(struct cfg_error *err, const char *file, unsigned line, unsigned col,
                   const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static int err_vat(struct cfg_error *err, const char *file, unsigned line, unsigned col,
                   const char *fmt, va_list ap)
{
    if (!err)
        return -1;
    size_t off = 0;
    if (file) {
        int k = snprintf(err->msg, sizeof err->msg, "%s:%u:%u: ", file, line, col);
        off = k < 0 ? 0 : (size_t)k >= sizeof err->msg ? sizeof err->msg - 1 : (size_t)k;
    }
    vsnprintf(err->msg + off, sizeof err->msg - off, fmt, ap);
    return -1;
}

static int err_at(struct cfg_error *err, const char *file, unsigned line, unsigned col,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int err_at(struct cfg_error *err, const char *file, unsigned line, unsigned col,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vat(err, file, line, col, fmt, ap);
    va_end(ap);
    return -1;
}

int cfg_errorf(struct cfg_error *err, const struct cfg_node *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (at)
        err_vat(err, at->file, at->line, at->col, fmt, ap);
    else
        err_vat(err, NULL, 0, 0, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- loading */

struct loader {
    yaml_parser_t parser;
    const char *file; /* stored in every node */
    const char *text; /* the input, for positions of reader errors and hints */
    size_t len;
    unsigned col_shift; /* --set value: its column in the assignment, minus 1;
                           0 for files */
    struct cfg_error *err;
};

/* 1-based position of a libyaml mark.  A --set value is one line: a
 * mark past its end (libyaml reports end-of-input on the next line) is put
 * just after the last character. */
static void mark_pos(const struct loader *L, yaml_mark_t m, unsigned *line, unsigned *col)
{
    if (L->col_shift && m.line > 0) {
        *line = 1;
        *col = L->col_shift + (unsigned)L->len + 1;
        return;
    }
    *line = (unsigned)m.line + 1;
    *col = (unsigned)m.column + 1 + (m.line == 0 ? L->col_shift : 0);
}

/* The byte at 0-based (line, column in characters) of the input, or 0. */
static char char_at(const struct loader *L, size_t line, size_t column)
{
    size_t i = 0;
    for (size_t l = 0; l < line && i < L->len; i++)
        if (L->text[i] == '\n')
            l++;
    for (size_t c = 0; c < column && i < L->len; c++) {
        i++;
        while (i < L->len && ((unsigned char)L->text[i] & 0xC0) == 0x80)
            i++; /* UTF-8 continuation bytes */
    }
    return i < L->len ? L->text[i] : 0;
}

/* Turn libyaml's error state into "file:line:col: ...". */
static int syntax_error(struct loader *L)
{
    yaml_parser_t *p = &L->parser;
    const char *problem = p->problem ? p->problem : "unknown error";
    unsigned line, col;
    if (p->error == YAML_MEMORY_ERROR)
        return err_at(L->err, L->file, 1, 1, "out of memory while reading YAML");
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset, not a mark. */
        size_t off = p->problem_offset < L->len ? p->problem_offset : L->len;
        line = 1;
        size_t bol = 0;
        for (size_t i = 0; i < off; i++)
            if (L->text[i] == '\n') {
                line++;
                bol = i + 1;
            }
        col = (unsigned)(off - bol) + 1 + (line == 1 ? L->col_shift : 0);
        if (p->problem_value != -1)
            return err_at(L->err, L->file, line, col, "invalid input: %s (byte 0x%02x)", problem,
                          (unsigned)p->problem_value & 0xFF);
        return err_at(L->err, L->file, line, col, "invalid input: %s", problem);
    }
    mark_pos(L, p->problem_mark, &line, &col);
    const char *hint = "";
    if (char_at(L, p->problem_mark.line, p->problem_mark.column) == '\t')
        hint = "; tabs cannot be used for indentation, use spaces";
    if (p->context) {
        unsigned cl, cc;
        mark_pos(L, p->context_mark, &cl, &cc);
        if (cl == line && cc == col)
            return err_at(L->err, L->file, line, col, "YAML syntax error: %s (%s)%s", problem,
                          p->context, hint);
        return err_at(L->err, L->file, line, col,
                      "YAML syntax error: %s (%s at line %u, column %u)%s", problem, p->context, cl,
                      cc, hint);
    }
    return err_at(L->err, L->file, line, col, "YAML syntax error: %s%s", problem, hint);
}

static int next_event(struct loader *L, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&L->parser, ev))
        return syntax_error(L);
    return 0;
}

/* Refuse the YAML features a scenario does not use (they make positions
 * and strictness ambiguous). */
static int check_props(struct loader *L, const yaml_event_t *ev, const yaml_char_t *anchor,
                       const yaml_char_t *tag)
{
    unsigned line, col;
    mark_pos(L, ev->start_mark, &line, &col);
    if (anchor)
        return err_at(L->err, L->file, line, col,
                      "YAML anchors ('&%s') are not supported: write the value out in full",
                      (const char *)anchor);
    if (tag)
        return err_at(L->err, L->file, line, col, "YAML tags ('%s') are not supported",
                      (const char *)tag);
    return 0;
}

static int parse_node(struct loader *L, yaml_event_t *ev, unsigned depth, char *path,
                      struct cfg_node **out);

/* Children of a sequence until SEQUENCE_END. */
static int parse_seq_items(struct loader *L, struct cfg_node *seq, unsigned depth)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(L, &ev))
            return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        struct cfg_node *item;
        if (parse_node(L, &ev, depth + 1, path_index(seq->path, seq->n), &item))
            return -1;
        seq_append(seq, item);
    }
}

/* Key/value pairs of a mapping until MAPPING_END. */
static int parse_map_pairs(struct loader *L, struct cfg_node *map, unsigned depth)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(L, &ev))
            return -1;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        unsigned kl, kc;
        mark_pos(L, ev.start_mark, &kl, &kc);
        int rc = 0;
        if (ev.type == YAML_ALIAS_EVENT)
            rc = err_at(L->err, L->file, kl, kc,
                        "YAML aliases ('*%s') are not supported: write the value out in full",
                        (const char *)ev.data.alias.anchor);
        else if (ev.type != YAML_SCALAR_EVENT)
            rc = err_at(L->err, L->file, kl, kc, "a mapping key must be a plain name, got %s",
                        ev.type == YAML_MAPPING_START_EVENT ? "a mapping" : "a sequence");
        else if (check_props(L, &ev, ev.data.scalar.anchor, ev.data.scalar.tag))
            rc = -1;
        else if (ev.data.scalar.length == 0)
            rc = err_at(L->err, L->file, kl, kc, "empty key");
        else if (strlen((const char *)ev.data.scalar.value) != ev.data.scalar.length)
            rc = err_at(L->err, L->file, kl, kc, "key contains a NUL character");
        if (rc) {
            yaml_event_delete(&ev);
            return -1;
        }
        char *key = xstrdup((const char *)ev.data.scalar.value);
        yaml_event_delete(&ev);
        long dup = find_key(map, key);
        if (dup >= 0) {
            err_at(L->err, L->file, kl, kc,
                   "duplicate key '%s' (first given at line %u, column %u)", key,
                   map->key_line[dup], map->key_col[dup]);
            free(key);
            return -1;
        }
        yaml_event_t vev;
        if (next_event(L, &vev)) {
            free(key);
            return -1;
        }
        struct cfg_node *value;
        if (parse_node(L, &vev, depth + 1, path_key(map->path, key), &value)) {
            free(key);
            return -1;
        }
        map_append(map, key, L->file, kl, kc, value);
    }
}

/* Build the node that starts with event `ev` (consumed, also on error);
 * `path` (owned) becomes the node's path. */
static int parse_node(struct loader *L, yaml_event_t *ev, unsigned depth, char *path,
                      struct cfg_node **out)
{
    unsigned line, col;
    mark_pos(L, ev->start_mark, &line, &col);
    struct cfg_node *n = NULL;
    int rc = -1;
    *out = NULL;
    if (depth > CFG_MAX_DEPTH) {
        err_at(L->err, L->file, line, col, "nesting deeper than %d levels", CFG_MAX_DEPTH);
        goto done;
    }
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        err_at(L->err, L->file, line, col,
               "YAML aliases ('*%s') are not supported: write the value out in full",
               (const char *)ev->data.alias.anchor);
        goto done;
    case YAML_SCALAR_EVENT:
        if (check_props(L, ev, ev->data.scalar.anchor, ev->data.scalar.tag))
            goto done;
        if (strlen((const char *)ev->data.scalar.value) != ev->data.scalar.length) {
            err_at(L->err, L->file, line, col, "value contains a NUL character");
            goto done;
        }
        n = node_new(CFG_SCALAR, L->file, line, col, path);
        path = NULL;
        n->scalar = xstrdup((const char *)ev->data.scalar.value);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        rc = 0;
        break;
    case YAML_SEQUENCE_START_EVENT:
        if (check_props(L, ev, ev->data.sequence_start.anchor, ev->data.sequence_start.tag))
            goto done;
        n = node_new(CFG_SEQ, L->file, line, col, path);
        path = NULL;
        yaml_event_delete(ev);
        rc = parse_seq_items(L, n, depth);
        goto built;
    case YAML_MAPPING_START_EVENT:
        if (check_props(L, ev, ev->data.mapping_start.anchor, ev->data.mapping_start.tag))
            goto done;
        n = node_new(CFG_MAP, L->file, line, col, path);
        path = NULL;
        yaml_event_delete(ev);
        rc = parse_map_pairs(L, n, depth);
        goto built;
    default:
        err_at(L->err, L->file, line, col, "unexpected YAML structure");
        goto done;
    }
done:
    yaml_event_delete(ev);
built:
    free(path);
    if (rc) {
        node_free(n);
        return -1;
    }
    *out = n;
    return 0;
}

static bool is_null_scalar(const struct cfg_node *n)
{
    return n->kind == CFG_SCALAR && !n->quoted &&
           (!n->scalar[0] || !strcmp(n->scalar, "~") || !strcmp(n->scalar, "null") ||
            !strcmp(n->scalar, "Null") || !strcmp(n->scalar, "NULL"));
}

/* Parse the whole stream: exactly one document (an empty stream is an
 * empty mapping).  Returns the root or NULL with L->err filled. */
static struct cfg_node *load_stream(struct loader *L, const char *base_path)
{
    yaml_event_t ev;
    struct cfg_node *root = NULL;
    if (next_event(L, &ev))
        return NULL;
    yaml_event_delete(&ev); /* STREAM-START */
    if (next_event(L, &ev))
        return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        return node_new(CFG_MAP, L->file, 1, 1 + L->col_shift, xstrdup(base_path));
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if (next_event(L, &ev))
        return NULL;
    if (parse_node(L, &ev, 0, xstrdup(base_path), &root))
        return NULL;
    if (next_event(L, &ev))
        goto fail;
    yaml_event_delete(&ev); /* DOCUMENT-END */
    if (next_event(L, &ev))
        goto fail;
    if (ev.type == YAML_DOCUMENT_START_EVENT) {
        unsigned line, col;
        mark_pos(L, ev.start_mark, &line, &col);
        yaml_event_delete(&ev);
        err_at(L->err, L->file, line, col,
               "more than one YAML document ('---') in one file is not supported");
        goto fail;
    }
    yaml_event_delete(&ev); /* STREAM-END */
    return root;
fail:
    node_free(root);
    return NULL;
}

/* Load `len` bytes of `text`; nodes say they come from `file`. */
static struct cfg_node *load_text(const char *file, const char *text, size_t len,
                                  unsigned col_shift, const char *base_path, struct cfg_error *err)
{
    struct loader L = {.file = file, .text = text, .len = len, .col_shift = col_shift, .err = err};
    if (!yaml_parser_initialize(&L.parser)) {
        err_at(err, file, 1, 1, "out of memory while reading YAML");
        return NULL;
    }
    yaml_parser_set_input_string(&L.parser, (const unsigned char *)text, len);
    struct cfg_node *root = load_stream(&L, base_path);
    yaml_parser_delete(&L.parser);
    return root;
}

static struct cfg_doc *load_doc(const char *name, const char *text, size_t len,
                                struct cfg_error *err)
{
    struct cfg_doc *doc = xrealloc(NULL, sizeof *doc);
    doc->file = xstrdup(name);
    doc->root = load_text(doc->file, text, len, 0, "", err);
    if (!doc->root) {
        cfg_free(doc);
        return NULL;
    }
    if (is_null_scalar(doc->root)) { /* "---" alone: an empty document */
        struct cfg_node *empty =
            node_new(CFG_MAP, doc->file, doc->root->line, doc->root->col, xstrdup(""));
        node_free(doc->root);
        doc->root = empty;
    }
    if (doc->root->kind != CFG_MAP) {
        cfg_errorf(err, doc->root, "the top level must be a mapping (key: value lines), got %s",
                   cfg_kind_name(doc->root));
        cfg_free(doc);
        return NULL;
    }
    return doc;
}

struct cfg_doc *cfg_load_string(const char *name, const char *text, struct cfg_error *err)
{
    return load_doc(name, text, strlen(text), err);
}

struct cfg_doc *cfg_load_file(const char *path, struct cfg_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_at(err, NULL, 0, 0, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    /* Read at most CFG_MAX_FILE_BYTES + 1 bytes, so a huge file or an
     * endless one (/dev/zero, a pipe) is refused, not read whole. */
    size_t len = 0, cap = 4096;
    char *buf = xrealloc(NULL, cap);
    errno = 0;
    for (;;) {
        size_t want = cap - len;
        if (len + want > CFG_MAX_FILE_BYTES + 1)
            want = CFG_MAX_FILE_BYTES + 1 - len;
        size_t k = fread(buf + len, 1, want, f);
        len += k;
        if (k < want || len > CFG_MAX_FILE_BYTES)
            break;
        if (len == cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    int rd_err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (rd_err) {
        err_at(err, NULL, 0, 0, "%s: cannot read: %s", path, strerror(rd_err));
        free(buf);
        return NULL;
    }
    if (len > CFG_MAX_FILE_BYTES) {
        err_at(err, path, 1, 1, "file larger than %u MiB: not a scenario",
               CFG_MAX_FILE_BYTES >> 20);
        free(buf);
        return NULL;
    }
    struct cfg_doc *doc = load_doc(path, buf, len, err);
    free(buf);
    return doc;
}

void cfg_free(struct cfg_doc *doc)
{
    if (!doc)
        return;
    node_free(doc->root);
    free(doc->file);
    free(doc);
}

/* ---------------------------------------------------------------- --set */

struct set_seg {
    char *key;
    unsigned col; /* 1-based column in the assignment */
};

static int set_err(struct cfg_error *err, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int set_err(struct cfg_error *err, unsigned col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vat(err, set_file, 1, col, fmt, ap);
    va_end(ap);
    return -1;
}

/* A sequence index segment ("0", "12"): -1 if not one. */
static long seg_index(const char *s)
{
    long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 100000000)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* Walk the existing part of the path (no changes).  Fails on a scalar in
 * the way or a bad sequence index; fills the full path of the target. */
static int set_check_path(struct cfg_doc *doc, struct set_seg *segs, size_t nseg, char **full,
                          struct cfg_error *err)
{
    struct cfg_node *cur = doc->root;
    char *path = xstrdup("");
    for (size_t i = 0; i < nseg; i++) {
        char *next;
        if (!cur || cur->kind == CFG_MAP) {
            next = path_key(path, segs[i].key);
            long idx = cur ? find_key(cur, segs[i].key) : -1;
            cur = idx >= 0 ? cur->items[idx] : NULL;
        } else if (cur->kind == CFG_SEQ) {
            long idx = seg_index(segs[i].key);
            if (idx < 0 || (size_t)idx >= cur->n) {
                set_err(err, segs[i].col,
                        "'%s' is a sequence of %zu items (%s:%u:%u); '%s' is not an index 0..%zu",
                        cur->path, cur->n, cur->file, cur->line, cur->col, segs[i].key,
                        cur->n ? cur->n - 1 : 0);
                free(path);
                return -1;
            }
            next = path_index(path, (size_t)idx);
            cur = cur->items[idx];
        } else {
            set_err(err, segs[i].col, "cannot set '%s': '%s' is a scalar (%s:%u:%u), not a mapping",
                    segs[i].key, cur->path, cur->file, cur->line, cur->col);
            free(path);
            return -1;
        }
        free(path);
        path = next;
    }
    *full = path;
    return 0;
}

/* Second walk: create missing maps and put `value` in place (cannot fail
 * after set_check_path succeeded). */
static void set_graft(struct cfg_doc *doc, struct set_seg *segs, size_t nseg,
                      struct cfg_node *value)
{
    struct cfg_node *cur = doc->root;
    for (size_t i = 0; i < nseg; i++) {
        bool last = i + 1 == nseg;
        if (cur->kind == CFG_SEQ) {
            long idx = seg_index(segs[i].key);
            if (last) {
                node_free(cur->items[idx]);
                cur->items[idx] = value;
                return;
            }
            cur = cur->items[idx];
            continue;
        }
        long idx = find_key(cur, segs[i].key);
        if (last) {
            if (idx >= 0) {
                node_free(cur->items[idx]);
                cur->items[idx] = value;
            } else {
                map_append(cur, xstrdup(segs[i].key), set_file, 1, segs[i].col, value);
            }
            return;
        }
        if (idx < 0) {
            struct cfg_node *m =
                node_new(CFG_MAP, set_file, 1, segs[i].col, path_key(cur->path, segs[i].key));
            map_append(cur, xstrdup(segs[i].key), set_file, 1, segs[i].col, m);
            cur = m;
        } else {
            cur = cur->items[idx];
        }
    }
}

int cfg_set(struct cfg_doc *doc, const char *a, struct cfg_error *err)
{
    const char *eq = strchr(a, '=');
    if (!eq)
        return set_err(err, 1, "expected KEY=VALUE (e.g. topology.link.rate=100Gbps), got '%s'", a);
    if (eq == a)
        return set_err(err, 1, "missing key before '='");
    unsigned val_col = (unsigned)(eq - a) + 2;
    if (!eq[1])
        return set_err(err, val_col, "missing value after '='");

    struct set_seg segs[CFG_SET_MAX_SEGS];
    size_t nseg = 0;
    int rc = -1;
    struct cfg_node *value = NULL;
    char *full = NULL;
    for (const char *s = a; s <= eq;) {
        const char *e = s;
        while (e < eq && *e != '.')
            e++;
        unsigned col = (unsigned)(s - a) + 1;
        if (e == s) {
            set_err(err, col, "empty key in '%.*s'", (int)(eq - a), a);
            goto out;
        }
        if (nseg == CFG_SET_MAX_SEGS) {
            set_err(err, col, "key path longer than %d components", CFG_SET_MAX_SEGS);
            goto out;
        }
        segs[nseg].key = xstrndup(s, (size_t)(e - s));
        segs[nseg].col = col;
        nseg++;
        s = e + 1;
    }
    if (set_check_path(doc, segs, nseg, &full, err))
        goto out;
    const char *val = eq + 1;
    value = load_text(set_file, val, strlen(val), val_col - 1, full, err);
    if (!value)
        goto out;
    const char *first = val;
    while (*first == ' ')
        first++;
    if (value->kind == CFG_MAP || (value->kind == CFG_SEQ && *first != '[')) {
        set_err(err, val_col, "the value must be a scalar or a flow sequence like [1, 2], not %s",
                cfg_kind_name(value));
        goto out;
    }
    set_graft(doc, segs, nseg, value);
    value = NULL;
    rc = 0;
out:
    node_free(value);
    free(full);
    for (size_t i = 0; i < nseg; i++)
        free(segs[i].key);
    return rc;
}

/* ---------------------------------------------------------------- accessors */

const char *cfg_kind_name(const struct cfg_node *n)
{
    if (!n)
        return "nothing";
    switch (n->kind) {
    case CFG_MAP:
        return "a mapping";
    case CFG_SEQ:
        return "a sequence";
    case CFG_SCALAR:
        break;
    }
    return is_null_scalar(n) ? "an empty value" : "a scalar";
}

static const char *kind_noun(enum cfg_kind k)
{
    return k == CFG_MAP ? "a mapping" : k == CFG_SEQ ? "a sequence" : "a scalar";
}

/* Remember that a reader looked for `key` in `map` (for suggestions). */
static void note_asked(struct cfg_node *map, const char *key)
{
    for (size_t i = 0; i < map->n_asked; i++)
        if (strcmp(map->asked[i], key) == 0)
            return;
    map->asked = xrealloc(map->asked, (map->n_asked + 1) * sizeof *map->asked);
    map->asked[map->n_asked++] = xstrdup(key);
}

/* The value of `key`, marked used; NULL if absent. */
static struct cfg_node *lookup(struct cfg_node *map, const char *key)
{
    note_asked(map, key);
    long i = find_key(map, key);
    if (i < 0)
        return NULL;
    map->used[i] = true;
    return map->items[i];
}

static int need_map(struct cfg_node *map, struct cfg_error *err)
{
    if (map->kind == CFG_MAP)
        return 0;
    if (map->path[0])
        return cfg_errorf(err, map, "'%s': expected a mapping, got %s", map->path,
                          cfg_kind_name(map));
    return cfg_errorf(err, map, "expected a mapping, got %s", cfg_kind_name(map));
}

struct cfg_node *cfg_child(struct cfg_node *map, const char *key)
{
    if (!map || map->kind != CFG_MAP)
        return NULL;
    return lookup(map, key);
}

int cfg_req_node(struct cfg_node *map, const char *key, enum cfg_kind kind, struct cfg_node **out,
                 struct cfg_error *err)
{
    *out = NULL;
    if (!map)
        return cfg_errorf(err, NULL, "missing required key '%s'", key);
    if (need_map(map, err))
        return -1;
    struct cfg_node *n = lookup(map, key);
    if (!n) {
        if (map->path[0])
            return cfg_errorf(err, map, "missing required key '%s' in '%s'", key, map->path);
        return cfg_errorf(err, map, "missing required key '%s' at the top level", key);
    }
    if (n->kind != kind || (kind == CFG_SCALAR && is_null_scalar(n)))
        return cfg_errorf(err, n, "'%s': expected %s, got %s", n->path, kind_noun(kind),
                          cfg_kind_name(n));
    *out = n;
    return 0;
}

/* Check that `n` is a non-empty scalar; `what` names the expected value. */
static int need_scalar(struct cfg_node *n, const char *what, struct cfg_error *err)
{
    if (n->kind != CFG_SCALAR)
        return cfg_errorf(err, n, "'%s': expected %s, got %s", n->path, what, cfg_kind_name(n));
    if (is_null_scalar(n))
        return cfg_errorf(err, n, "'%s' has no value (expected %s)", n->path, what);
    return 0;
}

/* Find `key` for a get_* accessor: 1 and *n when present, 0 when absent
 * (or map is NULL), -1 on error. */
static int get_value(struct cfg_node *map, const char *key, struct cfg_node **n,
                     struct cfg_error *err)
{
    if (!map)
        return 0;
    if (need_map(map, err))
        return -1;
    *n = lookup(map, key);
    return *n ? 1 : 0;
}

int cfg_node_str(struct cfg_node *n, const char **out, struct cfg_error *err)
{
    if (n->kind == CFG_SCALAR && n->quoted) { /* "" is a valid string */
        *out = n->scalar;
        return 0;
    }
    if (need_scalar(n, "a string", err))
        return -1;
    *out = n->scalar;
    return 0;
}

/* The four unit-typed readers differ only in the parser and the words of
 * the message ("an integer" / "integer"). */
typedef int (*cfg_unit_parser)(const char *s, uint64_t *out, char *why, size_t why_len);

static int node_parsed(struct cfg_node *n, uint64_t *out, cfg_unit_parser parse,
                       const char *article_kind, const char *kind, struct cfg_error *err)
{
    char why[160];
    if (need_scalar(n, article_kind, err))
        return -1;
    if (parse(n->scalar, out, why, sizeof why))
        return cfg_errorf(err, n, "bad %s '%s': %s", kind, n->scalar, why);
    return 0;
}

int cfg_node_u64(struct cfg_node *n, uint64_t *out, struct cfg_error *err)
{
    return node_parsed(n, out, cfg_parse_u64, "an integer", "integer", err);
}

int cfg_node_size(struct cfg_node *n, uint64_t *out, struct cfg_error *err)
{
    return node_parsed(n, out, cfg_parse_size, "a size", "size", err);
}

int cfg_node_time(struct cfg_node *n, sim_time_t *out, struct cfg_error *err)
{
    return node_parsed(n, out, cfg_parse_time, "a time", "time", err);
}

int cfg_node_rate(struct cfg_node *n, uint64_t *out, struct cfg_error *err)
{
    return node_parsed(n, out, cfg_parse_rate, "a rate", "rate", err);
}

/* Strict decimal: [-+]digits[.digits][(e|E)[-+]digits]; no inf/nan/hex. */
static bool is_decimal_number(const char *s)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+')
            p++;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

int cfg_get_str(struct cfg_node *map, const char *key, const char *def, const char **out,
                struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    return r <= 0 ? r : cfg_node_str(n, out, err);
}

int cfg_get_u64(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out,
                struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    return r <= 0 ? r : cfg_node_u64(n, out, err);
}

int cfg_get_double(struct cfg_node *map, const char *key, double def, double *out,
                   struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    if (r <= 0)
        return r;
    if (need_scalar(n, "a number", err))
        return -1;
    if (!is_decimal_number(n->scalar))
        return cfg_errorf(err, n, "bad number '%s': expected a decimal number like 0.25 or 1e-6",
                          n->scalar);
    errno = 0;
    double v = strtod(n->scalar, NULL);
    if (errno == ERANGE && (v > 1.0 || v < -1.0))
        return cfg_errorf(err, n, "bad number '%s': out of range", n->scalar);
    *out = v;
    return 0;
}

int cfg_get_bool(struct cfg_node *map, const char *key, bool def, bool *out, struct cfg_error *err)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    if (r <= 0)
        return r;
    if (need_scalar(n, "true or false", err))
        return -1;
    if (n->quoted)
        return cfg_errorf(err, n,
                          "bad boolean '%s': a quoted string is not a boolean (write true or "
                          "false without quotes)",
                          n->scalar);
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(n->scalar, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcmp(n->scalar, no[i])) {
            *out = false;
            return 0;
        }
    }
    return cfg_errorf(err, n, "bad boolean '%s': expected true or false", n->scalar);
}

int cfg_get_time(struct cfg_node *map, const char *key, sim_time_t def, sim_time_t *out,
                 struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    return r <= 0 ? r : cfg_node_time(n, out, err);
}

int cfg_get_rate(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out_bps,
                 struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out_bps = def;
    int r = get_value(map, key, &n, err);
    return r <= 0 ? r : cfg_node_rate(n, out_bps, err);
}

int cfg_get_size(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out_bytes,
                 struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out_bytes = def;
    int r = get_value(map, key, &n, err);
    return r <= 0 ? r : cfg_node_size(n, out_bytes, err);
}

/* ---------------------------------------------------------------- suggestions */

#define SUGGEST_MAX_LEN 64

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Optimal-string-alignment distance (edits: insert, delete, substitute,
 * swap two neighbours), ignoring case; large for over-long strings. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
        return SIZE_MAX;
    unsigned char d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1]; /* values <= 64 */
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
            size_t best = (size_t)d[i - 1][j] + 1;
            if ((size_t)d[i][j - 1] + 1 < best)
                best = (size_t)d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) && (size_t)d[i - 2][j - 2] + 1 < best)
                best = (size_t)d[i - 2][j - 2] + 1;
            d[i][j] = (unsigned char)best;
        }
    }
    return d[la][lb];
}

struct suggestion {
    const char *word;
    const char *best;
    size_t best_d;
};

/* Consider `cand` for `s`: close enough means at most one edit per three
 * characters (at least one); the first of equally close candidates wins. */
static void suggest_consider(struct suggestion *s, const char *cand)
{
    if (!cand || strcmp(cand, s->word) == 0)
        return;
    size_t d = edit_distance(s->word, cand);
    size_t la = strlen(s->word), lb = strlen(cand);
    size_t limit = (la > lb ? la : lb) / 3;
    if (limit < 1)
        limit = 1;
    if (d <= limit && d < s->best_d) {
        s->best = cand;
        s->best_d = d;
    }
}

static int report_unknown(struct cfg_node *map, size_t i, const char *where,
                          const char *const *known, struct cfg_error *err)
{
    struct suggestion s = {.word = map->keys[i], .best = NULL, .best_d = SIZE_MAX};
    for (size_t j = 0; j < map->n; j++)
        if (map->used[j])
            suggest_consider(&s, map->keys[j]);
    for (size_t j = 0; j < map->n_asked; j++)
        suggest_consider(&s, map->asked[j]);
    for (size_t j = 0; known && known[j]; j++)
        suggest_consider(&s, known[j]);
    char hint[SUGGEST_MAX_LEN + 32] = "";
    if (s.best)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", s.best);
    if (where && where[0])
        return err_at(err, map->key_file[i], map->key_line[i], map->key_col[i],
                      "unknown key '%s' in '%s'%s", map->keys[i], where, hint);
    return err_at(err, map->key_file[i], map->key_line[i], map->key_col[i],
                  "unknown key '%s' at the top level%s", map->keys[i], hint);
}

/* Depth-first in document order, so the first unknown key in the file is
 * the one reported. */
static int check_unused(struct cfg_node *n, const char *where, const char *const *known,
                        struct cfg_error *err)
{
    if (n->kind == CFG_SEQ) {
        for (size_t i = 0; i < n->n; i++) {
            char *w = path_index(where, i);
            int rc = check_unused(n->items[i], w, NULL, err);
            free(w);
            if (rc)
                return -1;
        }
    } else if (n->kind == CFG_MAP) {
        for (size_t i = 0; i < n->n; i++) {
            if (!n->used[i])
                return report_unknown(n, i, where, known, err);
            char *w = path_key(where, n->keys[i]);
            int rc = check_unused(n->items[i], w, NULL, err);
            free(w);
            if (rc)
                return -1;
        }
    }
    return 0;
}

int cfg_check_unused_known(struct cfg_node *map, const char *where, const char *const *known,
                           struct cfg_error *err)
{
    if (!map)
        return 0;
    return check_unused(map, where ? where : "", known, err);
}

int cfg_check_unused(struct cfg_node *map, const char *where, struct cfg_error *err)
{
    return cfg_check_unused_known(map, where, NULL, err);
}

int cfg_get_enum(struct cfg_node *map, const char *key, const char *const *choices, int def,
                 int *out, struct cfg_error *err)
{
    struct cfg_node *n = NULL;
    *out = def;
    int r = get_value(map, key, &n, err);
    if (r <= 0)
        return r;
    if (need_scalar(n, "a name", err))
        return -1;
    for (int i = 0; choices[i]; i++) {
        if (strcmp(n->scalar, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char list[384] = "";
    size_t off = 0;
    struct suggestion s = {.word = n->scalar, .best = NULL, .best_d = SIZE_MAX};
    for (int i = 0; choices[i]; i++) {
        int k = snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", choices[i]);
        if (k > 0 && (size_t)k < sizeof list - off)
            off += (size_t)k;
        suggest_consider(&s, choices[i]);
    }
    char hint[SUGGEST_MAX_LEN + 32] = "";
    if (s.best)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", s.best);
    return cfg_errorf(err, n, "bad value '%s' for '%s': expected one of %s%s", n->scalar, n->path,
                      list, hint);
}
