/* Where each hardware parameter's effective value comes from, for
 * `rnicsim params` (README: "every hardware knob, its value and source"):
 *
 *   C default      the citation of the block's default (param_defaults.c)
 *   a profile      profiles/<name>.yaml:LINE and the comment on that line
 *                  (every shipped profile cites its source there)
 *   a scenario     FILE:LINE of its `hardware:` entry
 *   --set          the command line's override
 *
 * Later layers win, in the order scenario_load applies them: C defaults,
 * profile, `hardware:`, --set (grafted into `hardware:`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/rnicsim/rnicsim.h"

void param_origins_default(struct param_origin *o)
{
    for (size_t i = 0; i < hw_params_count; i++) {
        const char *src = param_default_source(hw_params[i].key);
        snprintf(o[i].text, sizeof(o[i].text), "C default: %s",
                 src ? src : "see the block's default function");
    }
}

/* The comment on line `line` of `file` ("" if none or unreadable). */
static void line_comment(const char *file, unsigned line, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(file, "r");
    if (!f)
        return;
    char text[1024];
    for (unsigned n = 1; fgets(text, sizeof(text), f); n++) {
        if (n != line)
            continue;
        const char *hash = strstr(text, " #");
        if (hash) {
            hash += 2;
            while (*hash == ' ')
                hash++;
            snprintf(buf, len, "%.*s", (int)strcspn(hash, "\n"), hash);
        }
        break;
    }
    fclose(f);
}

static void walk(struct param_origin *o, const struct cfg_node *map, const char *prefix)
{
    if (!map || map->kind != CFG_MAP)
        return;
    for (size_t i = 0; i < map->n; i++) {
        char full[256];
        snprintf(full, sizeof(full), "%s%s%s", prefix, prefix[0] ? "." : "", map->keys[i]);
        const struct param_def *d = param_find(full);
        if (!d) {
            walk(o, map->items[i], full); /* "nic: {tx_pkt_proc: 5ns}" */
            continue;
        }
        struct param_origin *po = &o[d - hw_params];
        const char *file = map->key_file && map->key_file[i] ? map->key_file[i] : map->file;
        unsigned line = map->key_line ? map->key_line[i] : map->line;
        if (file && !strcmp(file, "--set")) {
            snprintf(po->text, sizeof(po->text), "--set hardware.%s on the command line", full);
            continue;
        }
        char comment[600];
        line_comment(file, line, comment, sizeof(comment));
        snprintf(po->text, sizeof(po->text), "%s:%u%s%s", file ? file : "?", line,
                 comment[0] ? ": " : "", comment);
    }
}

void param_origins_walk(struct param_origin *o, const struct cfg_node *map)
{
    walk(o, map, "");
}
