/* Scenario configuration: a YAML document (libyaml) loaded into a tree of
 * nodes that remember file:line:col, with strict typed accessors.
 *
 * Errors are reported as "FILE:LINE:COL: message" (1-based line and
 * column, as editors count them) and the first error stops the load.
 * Strictness: every mapping is checked against the keys a reader consumed
 * (cfg_check_unused), so an unknown or misspelt key is an error that names
 * the key and, when there is one, the closest known key.
 *
 * Units (cfg_parse_*): time  ps ns us ms s;  rate bps Kbps Mbps Gbps Tbps
 * (decimal, bits per second); size B KB MB GB (decimal) KiB MiB GiB
 * (binary).  A bare number is an error for a quantity with a unit, except 0. */
#ifndef RNICSIM_CONFIG_H
#define RNICSIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim.h"

enum cfg_kind { CFG_SCALAR, CFG_MAP, CFG_SEQ };

struct cfg_node {
    enum cfg_kind kind;
    const char *file; /* shared, owned by the document */
    unsigned line, col;
    char *scalar; /* CFG_SCALAR: the text */
    bool quoted;  /* scalar was quoted (so "yes" is a string) */
    size_t n;     /* children (MAP: pairs; SEQ: items) */
    char **keys;  /* MAP: key texts */
    unsigned *key_line, *key_col;
    struct cfg_node **items; /* MAP: values; SEQ: items */
    bool *used;              /* MAP: consumed by a reader */
    /* Added by the config block (readers need not touch these): */
    const char **key_file; /* MAP: file of each key (a --set key says "--set") */
    size_t cap;            /* MAP/SEQ: allocated length of the arrays above */
    char *path;            /* "topology.links[2]"; "" for the root */
    char **asked;          /* MAP: every key name an accessor looked up */
    size_t n_asked;
};

struct cfg_doc {
    char *file;
    struct cfg_node *root;
};

/* An error with its position; message formatted as "file:line:col: msg". */
struct cfg_error {
    char msg[512];
};

/* Load a file / a string (for tests; `name` is used as the file name).
 * NULL on error with `err` filled. */
struct cfg_doc *cfg_load_file(const char *path, struct cfg_error *err);
struct cfg_doc *cfg_load_string(const char *name, const char *text, struct cfg_error *err);
void cfg_free(struct cfg_doc *doc);

/* Apply an override "a.b.c=value" (value parsed as a YAML scalar, or a flow
 * sequence "[1,2]").  Creates missing map keys.  Position reported for
 * errors is "--set:1:N". */
int cfg_set(struct cfg_doc *doc, const char *assignment, struct cfg_error *err);

/* Accessors.  Each marks the key as used.  get_* with a default return the
 * default when the key is absent; req_* fail when absent.  All return 0 on
 * success, -1 with `err` filled ("file:line:col: ...") otherwise. */
struct cfg_node *cfg_child(struct cfg_node *map, const char *key); /* NULL if absent */
int cfg_req_node(struct cfg_node *map, const char *key, enum cfg_kind kind, struct cfg_node **out,
                 struct cfg_error *err);
int cfg_get_str(struct cfg_node *map, const char *key, const char *def, const char **out,
                struct cfg_error *err);
int cfg_get_u64(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out,
                struct cfg_error *err);
int cfg_get_double(struct cfg_node *map, const char *key, double def, double *out,
                   struct cfg_error *err);
int cfg_get_bool(struct cfg_node *map, const char *key, bool def, bool *out, struct cfg_error *err);
int cfg_get_time(struct cfg_node *map, const char *key, sim_time_t def, sim_time_t *out,
                 struct cfg_error *err);
int cfg_get_rate(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out_bps,
                 struct cfg_error *err);
int cfg_get_size(struct cfg_node *map, const char *key, uint64_t def, uint64_t *out_bytes,
                 struct cfg_error *err);
/* One of `choices` (NULL-terminated); returns its index. */
int cfg_get_enum(struct cfg_node *map, const char *key, const char *const *choices, int def,
                 int *out, struct cfg_error *err);
/* Same conversions on a scalar node (sequence items). */
int cfg_node_u64(struct cfg_node *n, uint64_t *out, struct cfg_error *err);
int cfg_node_size(struct cfg_node *n, uint64_t *out, struct cfg_error *err);
int cfg_node_time(struct cfg_node *n, sim_time_t *out, struct cfg_error *err);
int cfg_node_rate(struct cfg_node *n, uint64_t *out, struct cfg_error *err);

/* Error at a node ("file:line:col: <printf message>"); returns -1. */
int cfg_errorf(struct cfg_error *err, const struct cfg_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fail on the first key of `map` (recursively: of every map below it)
 * that no accessor consumed: "file:line:col: unknown key 'x' in 'nic'
 * (did you mean 'mtu'?)". */
int cfg_check_unused(struct cfg_node *map, const char *where, struct cfg_error *err);
/* Same, also suggesting from `known` (NULL-terminated, may be NULL) for
 * the keys of `map` itself.  Without it the suggestions come from the keys
 * the readers of that map consumed or looked up. */
int cfg_check_unused_known(struct cfg_node *map, const char *where, const char *const *known,
                           struct cfg_error *err);
/* The text of a scalar node as a string (error on a mapping / sequence or
 * on an empty unquoted value). */
int cfg_node_str(struct cfg_node *n, const char **out, struct cfg_error *err);
/* "a scalar", "a mapping", "a sequence", "an empty value": for messages. */
const char *cfg_kind_name(const struct cfg_node *n);

/* Plain unit parsers (no position).  Return 0, or -1 with a message in
 * `why` ("unknown unit 'Gbs' (expected bps, Kbps, Mbps, Gbps, Tbps)"). */
int cfg_parse_time(const char *s, sim_time_t *out_ps, char *why, size_t why_len);
int cfg_parse_rate(const char *s, uint64_t *out_bps, char *why, size_t why_len);
int cfg_parse_size(const char *s, uint64_t *out_bytes, char *why, size_t why_len);
int cfg_parse_u64(const char *s, uint64_t *out, char *why, size_t why_len);

/* Ranges (docs/robustness.md): every number a scenario gives is checked
 * against the range of what it means where it is read. */
enum cfg_quantity { CFG_Q_TIME, CFG_Q_RATE, CFG_Q_SIZE, CFG_Q_COUNT };
/* v in the quantity's largest exact unit ("3600s", "100Tbps", "4KiB",
 * "42"; 0 as "0"), a text the parsers read back to v. */
void cfg_format_quantity(enum cfg_quantity q, uint64_t v, char *buf, size_t len);
/* 0 if lo <= v <= hi; else -1 with "file:line:col: 'what': TEXT is out of
 * range (expected LO..HI)" at n (n: the node v was read from). */
int cfg_check_range(const struct cfg_node *n, const char *what, enum cfg_quantity q, uint64_t v,
                    uint64_t lo, uint64_t hi, struct cfg_error *err);

#endif /* RNICSIM_CONFIG_H */
