/* Register arrays and match-action tables of the programmable switch, and
 * the per-pass rules that make them behave like a pipeline's stages.
 *
 * Each array / table is declared in one stage of one pipeline (gress).  A
 * stage holds at most salus_per_stage arrays and tables_per_stage tables
 * and stage_sram_bytes of both (arrays: entries x width rounded up to
 * bytes; exact-match tables: entries x (8 B key + action data)).
 *
 * In a pass (one packet through one pipeline) a program may
 *   - access an array once: one read, one write, or one register action
 *     (read-modify-write through a stateful ALU);
 *   - apply a table once;
 *   - only in non-decreasing stage order (a later stage cannot feed an
 *     earlier one within the pass: that needs a recirculation);
 *   - only the resources of the pipeline it is in.
 * Anything else fails the run (ps_fail). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

static const char *gress_name(enum ps_gress g)
{
    return g == PS_INGRESS ? "ingress" : "egress";
}

static bool name_taken(const struct pswitch *ps, const char *name)
{
    for (uint32_t i = 0; i < ps->n_res; i++) {
        const char *n = ps->res[i].reg ? ps->res[i].reg->name : ps->res[i].tbl->name;
        if (strcmp(n, name) == 0)
            return true;
    }
    return false;
}

static int declare_check(struct pswitch *ps, const char *what, const char *name, enum ps_gress g,
                         uint32_t stage, uint32_t entries, uint64_t sram)
{
    if (ps->dp.ingress || ps->unloaded) {
        ps_set_last_error(ps, EBUSY, "%s '%s': declared after the data plane was loaded", what,
                          name ? name : "?");
        return -1;
    }
    if (!name || !name[0] || entries == 0 || (g != PS_INGRESS && g != PS_EGRESS)) {
        ps_set_last_error(ps, EINVAL, "%s: a name, a pipeline and at least one entry are needed",
                          what);
        return -1;
    }
    if (stage >= ps->p.stages) {
        ps_set_last_error(ps, EINVAL, "%s '%s': stage %u, but a pipeline has stages 0..%u", what,
                          name, stage, ps->p.stages - 1);
        return -1;
    }
    if (name_taken(ps, name)) {
        ps_set_last_error(ps, EEXIST, "%s '%s': the name is taken", what, name);
        return -1;
    }
    if (ps->stage_sram[stage] + sram > ps->p.stage_sram_bytes) {
        ps_set_last_error(
            ps, ENOSPC, "%s '%s': %llu bytes do not fit in stage %u (%llu of %llu bytes used)",
            what, name, (unsigned long long)sram, stage, (unsigned long long)ps->stage_sram[stage],
            (unsigned long long)ps->p.stage_sram_bytes);
        return -1;
    }
    return 0;
}

static void add_res(struct pswitch *ps, struct ps_reg *r, struct ps_table *t)
{
    ps->res = realloc(ps->res, (ps->n_res + 1) * sizeof(*ps->res));
    if (!ps->res) {
        fprintf(stderr, "rnicsim: pswitch: out of memory\n");
        abort();
    }
    ps->res[ps->n_res++] = (struct ps_res_ref){r, t};
}

static void *xcalloc_ps(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "rnicsim: pswitch: out of memory\n");
        abort();
    }
    return p;
}

struct ps_reg *ps_reg_declare(struct pswitch *ps, const char *name, enum ps_gress g, uint32_t stage,
                              uint32_t entries, uint32_t width_bits)
{
    if (width_bits == 0 || width_bits > 64) {
        ps_set_last_error(ps, EINVAL, "register '%s': width %u bits (1..64)", name ? name : "?",
                          width_bits);
        return NULL;
    }
    uint64_t sram = (uint64_t)entries * ((width_bits + 7) / 8);
    if (declare_check(ps, "register", name, g, stage, entries, sram))
        return NULL;
    if (ps->stage_salus[stage] >= ps->p.salus_per_stage) {
        ps_set_last_error(ps, ENOSPC,
                          "register '%s': stage %u has no stateful ALU left (%u per stage)", name,
                          stage, ps->p.salus_per_stage);
        return NULL;
    }
    struct ps_reg *r = xcalloc_ps(1, sizeof(*r));
    r->ps = ps;
    r->name = strdup(name);
    r->gress = g;
    r->stage = stage;
    r->entries = entries;
    r->width_bits = width_bits;
    r->mask = width_bits == 64 ? UINT64_MAX : ((1ull << width_bits) - 1);
    r->cells = xcalloc_ps(entries, sizeof(*r->cells));
    r->last_pass = 0;
    ps->stage_sram[stage] += sram;
    ps->stage_salus[stage]++;
    add_res(ps, r, NULL);
    return r;
}

struct ps_table *ps_table_declare(struct pswitch *ps, const char *name, enum ps_gress g,
                                  uint32_t stage, uint32_t entries, uint32_t data_bytes)
{
    uint64_t sram = (uint64_t)entries * (8 + data_bytes);
    if (declare_check(ps, "table", name, g, stage, entries, sram))
        return NULL;
    if (ps->stage_tables[stage] >= ps->p.tables_per_stage) {
        ps_set_last_error(ps, ENOSPC, "table '%s': stage %u holds %u tables already", name, stage,
                          ps->p.tables_per_stage);
        return NULL;
    }
    struct ps_table *t = xcalloc_ps(1, sizeof(*t));
    t->ps = ps;
    t->name = strdup(name);
    t->gress = g;
    t->stage = stage;
    t->entries = entries;
    t->data_bytes = data_bytes;
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)entries)
        cap *= 2;
    t->cap = cap;
    t->slots = xcalloc_ps(cap, sizeof(*t->slots));
    t->data = xcalloc_ps(cap, data_bytes ? data_bytes : 1);
    for (uint32_t i = 0; i < cap; i++)
        t->slots[i].data = t->data + (size_t)i * data_bytes;
    ps->stage_sram[stage] += sram;
    ps->stage_tables[stage]++;
    add_res(ps, NULL, t);
    return t;
}

void ps_resources_free(struct pswitch *ps)
{
    for (uint32_t i = 0; i < ps->n_res; i++) {
        struct ps_reg *r = ps->res[i].reg;
        struct ps_table *t = ps->res[i].tbl;
        if (r) {
            free(r->name);
            free(r->cells);
            free(r);
        } else {
            free(t->name);
            free(t->slots);
            free(t->data);
            free(t);
        }
    }
    free(ps->res);
    ps->res = NULL;
    ps->n_res = 0;
}

/* ---------------------------------------------------------------- the pass rules */

static bool pass_touch(struct ps_pass *x, const char *kind, const char *name, enum ps_gress g,
                       uint32_t stage, uint64_t *last_pass)
{
    struct pswitch *ps = x->ps;
    if (ps->error[0])
        return false;
    if (g != x->gress) {
        ps_fail(ps, "%s '%s' belongs to the %s pipeline, used in %s", kind, name, gress_name(g),
                gress_name(x->gress));
        return false;
    }
    if (*last_pass == x->id) {
        ps_fail(ps,
                "%s '%s' used twice in one %s pass (one access per pass: recirculate for "
                "another)",
                kind, name, gress_name(x->gress));
        return false;
    }
    if (x->touched && stage < x->stage) {
        ps_fail(ps,
                "%s '%s' (stage %u) used after stage %u in one %s pass: stages are passed "
                "in order",
                kind, name, stage, x->stage, gress_name(x->gress));
        return false;
    }
    *last_pass = x->id;
    x->stage = stage;
    x->touched = true;
    return true;
}

static bool reg_ok(struct ps_pass *x, struct ps_reg *r, uint32_t idx)
{
    if (!r) {
        ps_fail(x->ps, "a NULL register array");
        return false;
    }
    if (!pass_touch(x, "register", r->name, r->gress, r->stage, &r->last_pass))
        return false;
    if (idx >= r->entries) {
        ps_fail(x->ps, "register '%s': index %u of %u entries", r->name, idx, r->entries);
        return false;
    }
    r->accesses++;
    x->ps->c.reg_accesses++;
    return true;
}

uint64_t ps_reg_exec(struct ps_pass *x, struct ps_reg *r, uint32_t idx, ps_reg_action fn,
                     const void *arg)
{
    if (!reg_ok(x, r, idx))
        return 0;
    uint64_t v = r->cells[idx];
    uint64_t out = fn(&v, arg);
    r->cells[idx] = v & r->mask;
    return out;
}

uint64_t ps_reg_read(struct ps_pass *x, struct ps_reg *r, uint32_t idx)
{
    return reg_ok(x, r, idx) ? r->cells[idx] : 0;
}

void ps_reg_write(struct ps_pass *x, struct ps_reg *r, uint32_t idx, uint64_t v)
{
    if (reg_ok(x, r, idx))
        r->cells[idx] = v & r->mask;
}

/* ---------------------------------------------------------------- tables */

static uint32_t slot_of(const struct ps_table *t, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32) & (t->cap - 1);
}

static struct ps_table_ent *find(const struct ps_table *t, uint64_t key)
{
    uint32_t i = slot_of(t, key);
    while (t->slots[i].used) {
        if (t->slots[i].key == key)
            return &t->slots[i];
        i = (i + 1) & (t->cap - 1);
    }
    return NULL;
}

const void *ps_table_apply(struct ps_pass *x, struct ps_table *t, uint64_t key)
{
    if (!t) {
        ps_fail(x->ps, "a NULL table");
        return NULL;
    }
    if (!pass_touch(x, "table", t->name, t->gress, t->stage, &t->last_pass))
        return NULL;
    t->lookups++;
    x->ps->c.table_lookups++;
    const struct ps_table_ent *e = find(t, key);
    if (!e)
        return NULL;
    x->ps->c.table_hits++;
    return e->data;
}

int ps_table_add(struct ps_table *t, uint64_t key, const void *data)
{
    if (!t || (t->data_bytes && !data)) {
        errno = EINVAL;
        return -1;
    }
    /* the operation takes its time first, then the entry appears whole:
     * the data plane never sees a half-written one */
    ps_cp_charge(t->ps);
    struct ps_table_ent *e = find(t, key);
    if (!e) {
        if (t->used == t->entries) {
            errno = ENOSPC;
            return -1;
        }
        uint32_t i = slot_of(t, key);
        while (t->slots[i].used)
            i = (i + 1) & (t->cap - 1);
        e = &t->slots[i];
        e->used = true;
        e->key = key;
        t->used++;
    }
    if (t->data_bytes)
        memcpy(e->data, data, t->data_bytes);
    return 0;
}

int ps_table_del(struct ps_table *t, uint64_t key)
{
    if (!t) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(t->ps); /* first: e stays valid (no other operation meanwhile) */
    struct ps_table_ent *e = find(t, key);
    if (!e) {
        errno = ENOENT;
        return -1;
    }
    /* backward-shift deletion keeps every probe chain intact */
    uint32_t i = (uint32_t)(e - t->slots);
    e->used = false;
    for (uint32_t j = (i + 1) & (t->cap - 1); t->slots[j].used; j = (j + 1) & (t->cap - 1)) {
        uint32_t home = slot_of(t, t->slots[j].key);
        bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (!movable)
            continue;
        t->slots[i].key = t->slots[j].key;
        t->slots[i].used = true;
        memcpy(t->slots[i].data, t->slots[j].data, t->data_bytes);
        t->slots[j].used = false;
        i = j;
    }
    t->used--;
    return 0;
}

int ps_reg_set(struct ps_reg *r, uint32_t idx, uint64_t v)
{
    if (!r || idx >= r->entries) {
        errno = EINVAL;
        return -1;
    }
    ps_cp_charge(r->ps);
    r->cells[idx] = v & r->mask;
    return 0;
}

uint64_t ps_reg_get(struct ps_reg *r, uint32_t idx)
{
    if (!r || idx >= r->entries)
        return 0;
    ps_cp_charge(r->ps);
    return r->cells[idx];
}

uint64_t ps_reg_peek(const struct ps_reg *r, uint32_t idx)
{
    return r && idx < r->entries ? r->cells[idx] : 0;
}

/* ---------------------------------------------------------------- resource report */

uint32_t ps_n_resources(const struct pswitch *ps)
{
    return ps->n_res;
}

void ps_resource(const struct pswitch *ps, uint32_t i, struct ps_resource *out)
{
    memset(out, 0, sizeof(*out));
    if (i >= ps->n_res)
        return;
    const struct ps_reg *r = ps->res[i].reg;
    const struct ps_table *t = ps->res[i].tbl;
    if (r) {
        *out = (struct ps_resource){.name = r->name,
                                    .table = false,
                                    .gress = r->gress,
                                    .stage = r->stage,
                                    .entries = r->entries,
                                    .width_bits = r->width_bits,
                                    .sram_bytes = (uint64_t)r->entries * ((r->width_bits + 7) / 8),
                                    .accesses = r->accesses,
                                    .used = r->entries};
    } else {
        *out = (struct ps_resource){.name = t->name,
                                    .table = true,
                                    .gress = t->gress,
                                    .stage = t->stage,
                                    .entries = t->entries,
                                    .width_bits = 8 * t->data_bytes,
                                    .sram_bytes = (uint64_t)t->entries * (8 + t->data_bytes),
                                    .accesses = t->lookups,
                                    .used = t->used};
    }
}
