/* Streaming JSON writer for results files and traces.
 *
 * Output is deterministic: keys come out in the order the caller writes
 * them, doubles are printed in the shortest form that reads back to the
 * same value ("%.15g", else "%.16g", else "%.17g"; NaN and infinities are
 * written as null), strings are escaped (control characters, quote,
 * backslash; invalid UTF-8 becomes U+FFFD so the output is always valid).
 *
 * Layout: pretty by default (2-space indentation, "key": value, empty
 * containers as {} and []), or compact (no spaces or newlines inside a
 * value), which with one top-level value per line gives JSON Lines.
 * Every complete top-level value is followed by a newline.
 *
 * Misuse (a key outside an object, a value in an object without a key,
 * unbalanced ends) is a bug in the caller: the call is ignored and
 * json_finish() returns -1. */
#ifndef RNICSIM_JSON_H
#define RNICSIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_writer;

/* A writer to `f` (not closed by json_finish), or to a growing memory
 * buffer. */
struct json_writer *json_new_file(FILE *f);
struct json_writer *json_new_mem(void);
/* Compact layout (default: pretty).  Set before writing. */
void json_set_compact(struct json_writer *w, bool compact);

void json_object_begin(struct json_writer *w);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w);
void json_array_end(struct json_writer *w);
/* The next key of the current object; the value follows. */
void json_key(struct json_writer *w, const char *key);

void json_str(struct json_writer *w, const char *s); /* NULL writes null */
void json_str_n(struct json_writer *w, const char *s, size_t len);
void json_u64(struct json_writer *w, uint64_t v);
void json_i64(struct json_writer *w, int64_t v);
void json_double(struct json_writer *w, double v);
void json_bool(struct json_writer *w, bool v);
void json_null(struct json_writer *w);

/* key + value in one call. */
void json_kv_str(struct json_writer *w, const char *key, const char *s);
void json_kv_u64(struct json_writer *w, const char *key, uint64_t v);
void json_kv_i64(struct json_writer *w, const char *key, int64_t v);
void json_kv_double(struct json_writer *w, const char *key, double v);
void json_kv_bool(struct json_writer *w, const char *key, bool v);
void json_kv_object_begin(struct json_writer *w, const char *key);
void json_kv_array_begin(struct json_writer *w, const char *key);

/* Memory writers: the text so far (NUL-terminated, owned by the writer),
 * or take ownership of it (free() it; the writer then holds nothing). */
const char *json_mem(const struct json_writer *w, size_t *len);
char *json_mem_take(struct json_writer *w, size_t *len);

/* Free the writer.  0 if every value was complete and balanced and all
 * output was written (FILE errors are checked with ferror), else -1. */
int json_finish(struct json_writer *w);

/* The number text json_double() writes ("null" for NaN/Inf) into `buf`
 * (32 bytes is always enough); returns its length.  For CSV writers. */
size_t json_format_double(double v, char *buf, size_t len);

#endif /* RNICSIM_JSON_H */
