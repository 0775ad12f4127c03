/* Scenario loading: positions, strictness (unknown / duplicate / missing
 * keys, wrong types, refused YAML features), typed getters with defaults,
 * --set overrides and the exact text of the documented error messages. */
#include <stdlib.h>

#include "sim/config/config.h"
#include "test.h"

static struct cfg_error err;

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ && b_ && strcmp(a_, b_) == 0) {                                                     \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed:\n  got      \"%s\"\n  expected \"%s\"\n",        \
                    __FILE__, __LINE__, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
        }                                                                                          \
    } while (0)

static struct cfg_doc *load_ok(const char *name, const char *text)
{
    err.msg[0] = '\0';
    struct cfg_doc *d = cfg_load_string(name, text, &err);
    if (!d)
        fprintf(stderr, "unexpected load error: %s\n", err.msg);
    CHECK(d != NULL);
    return d;
}

/* Load must fail; returns the message. */
static const char *load_bad(const char *name, const char *text)
{
    err.msg[0] = '\0';
    struct cfg_doc *d = cfg_load_string(name, text, &err);
    CHECK(d == NULL);
    cfg_free(d);
    return err.msg;
}

static void test_tree_and_positions(void)
{
    struct cfg_doc *d = load_ok("t.yaml", "seed: 7\n"
                                          "name: \"yes\"\n"
                                          "topology:\n"
                                          "  kind: star\n"
                                          "  hosts: [a, 'b']\n"
                                          "empty:\n");
    if (!d)
        return;
    struct cfg_node *r = d->root;
    CHECK(r->kind == CFG_MAP);
    CHECK_EQ_U64(r->n, 4);
    CHECK_STR_EQ(r->keys[2], "topology");
    CHECK_EQ_U64(r->key_line[2], 3);
    CHECK_EQ_U64(r->key_col[2], 1);
    CHECK_STR_EQ(r->key_file[2], "t.yaml");
    struct cfg_node *name = r->items[1];
    CHECK(name->kind == CFG_SCALAR && name->quoted);
    CHECK_EQ_U64(name->line, 2);
    CHECK_EQ_U64(name->col, 7);
    CHECK(!r->items[0]->quoted);
    struct cfg_node *topo = r->items[2];
    CHECK(topo->kind == CFG_MAP);
    CHECK_STR_EQ(topo->path, "topology");
    CHECK_EQ_U64(topo->key_line[1], 5);
    CHECK_EQ_U64(topo->key_col[1], 3);
    struct cfg_node *hosts = topo->items[1];
    CHECK(hosts->kind == CFG_SEQ);
    CHECK_EQ_U64(hosts->n, 2);
    CHECK_STR_EQ(hosts->items[1]->scalar, "b");
    CHECK(hosts->items[1]->quoted);
    CHECK_EQ_U64(hosts->items[1]->line, 5);
    CHECK_EQ_U64(hosts->items[1]->col, 14);
    CHECK_STR_EQ(hosts->items[1]->path, "topology.hosts[1]");
    CHECK_STR_EQ(hosts->items[0]->file, "t.yaml");
    CHECK_STR_EQ(cfg_kind_name(r->items[3]), "an empty value");

    /* Plain "yes" is a boolean, quoted "yes" is a string. */
    const char *s = NULL;
    CHECK(cfg_get_str(r, "name", NULL, &s, &err) == 0);
    CHECK_STR_EQ(s, "yes");
    bool b = true;
    CHECK(cfg_get_bool(r, "name", false, &b, &err) == -1);
    CHECK_STR_EQ(err.msg, "t.yaml:2:7: bad boolean 'yes': a quoted string is not a boolean "
                          "(write true or false without quotes)");
    cfg_free(d);

    /* An empty document is an empty mapping. */
    d = load_ok("e.yaml", "");
    CHECK(d && d->root->kind == CFG_MAP && d->root->n == 0);
    cfg_free(d);
    d = load_ok("e.yaml", "# only a comment\n---\n");
    CHECK(d && d->root->kind == CFG_MAP && d->root->n == 0);
    cfg_free(d);
}

static void test_getters(void)
{
    struct cfg_doc *d = load_ok("g.yaml", "n: 42\n"
                                          "hex: 0x10\n"
                                          "t: 1.5us\n"
                                          "r: 100Gbps\n"
                                          "sz: 4KiB\n"
                                          "on: true\n"
                                          "off: no\n"
                                          "x: -2.5e-3\n"
                                          "mode: ecmp\n"
                                          "str: hello world\n"
                                          "quoted_rate: '25Gbps'\n");
    if (!d)
        return;
    struct cfg_node *r = d->root;
    uint64_t u = 0;
    sim_time_t t = 0;
    double x = 0;
    bool b = false;
    int e = -1;
    const char *s = NULL;
    CHECK(cfg_get_u64(r, "n", 1, &u, &err) == 0);
    CHECK_EQ_U64(u, 42);
    CHECK(cfg_get_u64(r, "hex", 1, &u, &err) == 0);
    CHECK_EQ_U64(u, 16);
    CHECK(cfg_get_u64(r, "absent", 99, &u, &err) == 0);
    CHECK_EQ_U64(u, 99);
    CHECK(cfg_get_time(r, "t", 0, &t, &err) == 0);
    CHECK_EQ_U64(t, 1500000);
    CHECK(cfg_get_time(r, "t_absent", 3 * SIM_NS, &t, &err) == 0);
    CHECK_EQ_U64(t, 3000);
    CHECK(cfg_get_rate(r, "r", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 100000000000ull);
    CHECK(cfg_get_rate(r, "quoted_rate", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 25000000000ull);
    CHECK(cfg_get_size(r, "sz", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 4096);
    CHECK(cfg_get_size(r, "sz_absent", 1500, &u, &err) == 0);
    CHECK_EQ_U64(u, 1500);
    CHECK(cfg_get_bool(r, "on", false, &b, &err) == 0);
    CHECK(b == true);
    CHECK(cfg_get_bool(r, "off", true, &b, &err) == 0);
    CHECK(b == false);
    CHECK(cfg_get_bool(r, "b_absent", true, &b, &err) == 0);
    CHECK(b == true);
    CHECK(cfg_get_double(r, "x", 0, &x, &err) == 0);
    CHECK(x == -2.5e-3);
    CHECK(cfg_get_double(r, "x_absent", 0.25, &x, &err) == 0);
    CHECK(x == 0.25);
    static const char *const modes[] = {"static", "ecmp", "spray", NULL};
    CHECK(cfg_get_enum(r, "mode", modes, 0, &e, &err) == 0);
    CHECK_EQ_U64(e, 1);
    CHECK(cfg_get_enum(r, "mode_absent", modes, 2, &e, &err) == 0);
    CHECK_EQ_U64(e, 2);
    CHECK(cfg_get_str(r, "str", NULL, &s, &err) == 0);
    CHECK_STR_EQ(s, "hello world");
    CHECK(cfg_get_str(r, "s_absent", "dflt", &s, &err) == 0);
    CHECK_STR_EQ(s, "dflt");
    /* Everything was consumed: no unknown keys. */
    CHECK(cfg_check_unused(r, "", &err) == 0);
    /* A NULL map (absent optional section) gives defaults. */
    CHECK(cfg_get_u64(NULL, "n", 5, &u, &err) == 0);
    CHECK_EQ_U64(u, 5);
    cfg_free(d);
}

static void test_getter_errors(void)
{
    struct cfg_doc *d = load_ok("x.yaml", "topology:\n"
                                          "  link:\n"
                                          "    rate: 100Gbs\n"
                                          "    delay: 300\n"
                                          "    mtu: 4096B\n"
                                          "    size: 4Kb\n"
                                          "    list: [1, 2]\n"
                                          "    mode: spary\n"
                                          "    ratio: 1/2\n"
                                          "    flag: maybe\n"
                                          "    nothing:\n"
                                          "    map: {a: 1}\n");
    if (!d)
        return;
    struct cfg_node *topo = cfg_child(d->root, "topology");
    struct cfg_node *link = cfg_child(topo, "link");
    CHECK(link != NULL);
    uint64_t u = 0;
    sim_time_t t = 0;
    double x = 0;
    bool b = false;
    int e = 0;
    const char *s = NULL;
    CHECK(cfg_get_rate(link, "rate", 0, &u, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:3:11: bad rate '100Gbs': unknown unit 'Gbs' (expected bps, "
                          "Kbps, Mbps, Gbps, Tbps)");
    CHECK(cfg_get_time(link, "delay", 0, &t, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:4:12: bad time '300': missing unit (expected ps, ns, us, ms, s)");
    CHECK(cfg_get_u64(link, "mtu", 0, &u, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:5:10: bad integer '4096B': unexpected 'B' after the number");
    CHECK(cfg_get_size(link, "size", 0, &u, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "x.yaml:6:11: bad size '4Kb': unknown unit 'Kb'");
    CHECK(cfg_get_u64(link, "list", 0, &u, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:7:11: 'topology.link.list': expected an integer, got a sequence");
    static const char *const modes[] = {"static", "ecmp", "spray", NULL};
    CHECK(cfg_get_enum(link, "mode", modes, 0, &e, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:8:11: bad value 'spary' for 'topology.link.mode': expected one "
                          "of static, ecmp, spray (did you mean 'spray'?)");
    CHECK(cfg_get_double(link, "ratio", 0, &x, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "x.yaml:9:12: bad number '1/2'");
    CHECK(cfg_get_bool(link, "flag", false, &b, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:10:11: bad boolean 'maybe': expected true or false");
    CHECK(cfg_get_str(link, "nothing", "d", &s, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "x.yaml:11:");
    CHECK_STR_CONTAINS(err.msg, "'topology.link.nothing' has no value");
    CHECK(cfg_get_str(link, "map", "d", &s, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:12:10: 'topology.link.map': expected a string, got a mapping");
    /* A getter on something that is not a mapping. */
    struct cfg_node *list = cfg_child(link, "list");
    CHECK(cfg_get_u64(list, "a", 0, &u, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:7:11: 'topology.link.list': expected a mapping, got a sequence");
    cfg_free(d);
}

static void test_required_and_types(void)
{
    struct cfg_doc *d = load_ok("x.yaml", "topology:\n"
                                          "  kind: star\n"
                                          "hosts: [a, b]\n"
                                          "seed:\n");
    if (!d)
        return;
    struct cfg_node *topo = NULL, *n = NULL;
    CHECK(cfg_req_node(d->root, "topology", CFG_MAP, &topo, &err) == 0);
    CHECK(topo != NULL);
    CHECK(cfg_req_node(topo, "hosts", CFG_SEQ, &n, &err) == -1);
    CHECK(n == NULL);
    CHECK_STR_EQ(err.msg, "x.yaml:2:3: missing required key 'hosts' in 'topology'");
    CHECK(cfg_req_node(d->root, "workload", CFG_SEQ, &n, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:1:1: missing required key 'workload' at the top level");
    CHECK(cfg_req_node(d->root, "hosts", CFG_MAP, &n, &err) == -1);
    CHECK_STR_EQ(err.msg, "x.yaml:3:8: 'hosts': expected a mapping, got a sequence");
    CHECK(cfg_req_node(d->root, "hosts", CFG_SEQ, &n, &err) == 0);
    CHECK_EQ_U64(n->n, 2);
    CHECK(cfg_req_node(d->root, "seed", CFG_SCALAR, &n, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "'seed': expected a scalar, got an empty value");
    CHECK(cfg_req_node(NULL, "x", CFG_MAP, &n, &err) == -1);
    CHECK_STR_EQ(err.msg, "missing required key 'x'");
    /* cfg_child marks used and returns NULL when absent. */
    CHECK(cfg_child(topo, "kind") != NULL);
    CHECK(cfg_child(topo, "nope") == NULL);
    CHECK(cfg_child(NULL, "kind") == NULL);
    CHECK(cfg_check_unused(d->root, "", &err) == 0);
    cfg_free(d);

    /* The top level must be a mapping. */
    CHECK_STR_EQ(load_bad("x.yaml", "- a\n- b\n"),
                 "x.yaml:1:1: the top level must be a mapping (key: value lines), got a sequence");
    CHECK_STR_CONTAINS(load_bad("x.yaml", "just text\n"), "got a scalar");
}

static void test_unknown_keys(void)
{
    const char *text = "seed: 1\n"
                       "topology:\n"
                       "  kind: star\n"
                       "  hosts: 2\n"
                       "  link:\n"
                       "    mtu: 4096\n"
                       "    rat: 100Gbps\n";
    struct cfg_doc *d = load_ok("scenario.yaml", text);
    if (!d)
        return;
    uint64_t u;
    struct cfg_node *topo = cfg_child(d->root, "topology");
    CHECK(cfg_get_u64(d->root, "seed", 0, &u, &err) == 0);
    CHECK(cfg_get_u64(topo, "hosts", 0, &u, &err) == 0);
    CHECK(cfg_child(topo, "kind") != NULL);
    struct cfg_node *link = cfg_child(topo, "link");
    CHECK(cfg_get_u64(link, "mtu", 0, &u, &err) == 0);
    /* "rate" was looked up (absent, so defaulted): it is the suggestion. */
    CHECK(cfg_get_rate(link, "rate", 100, &u, &err) == 0);
    CHECK_EQ_U64(u, 100);
    CHECK(cfg_check_unused(link, "link", &err) == -1);
    CHECK_STR_EQ(err.msg, "scenario.yaml:7:5: unknown key 'rat' in 'link' (did you mean 'rate'?)");
    /* From the root the path is spelled out. */
    CHECK(cfg_check_unused(d->root, "", &err) == -1);
    CHECK_STR_EQ(err.msg,
                 "scenario.yaml:7:5: unknown key 'rat' in 'topology.link' (did you mean 'rate'?)");
    cfg_free(d);

    /* Suggestion from the consumed keys of the same map (transposition),
     * none when nothing is close, and from a known-keys list. */
    d = load_ok("s.yaml", "nic:\n  mut: 4096\n  lanes: 8\n");
    struct cfg_node *nic = cfg_child(d->root, "nic");
    CHECK(cfg_get_u64(nic, "lanes", 0, &u, &err) == 0);
    CHECK(cfg_check_unused(nic, "nic", &err) == -1);
    CHECK_STR_EQ(err.msg, "s.yaml:2:3: unknown key 'mut' in 'nic'");
    static const char *const known[] = {"mtu", "lanes", NULL};
    CHECK(cfg_check_unused_known(nic, "nic", known, &err) == -1);
    CHECK_STR_EQ(err.msg, "s.yaml:2:3: unknown key 'mut' in 'nic' (did you mean 'mtu'?)");
    cfg_free(d);

    /* A whole section nobody read: its key is the unknown one; top level. */
    d = load_ok("s.yaml", "seed: 1\nsede: 2\n");
    CHECK(cfg_get_u64(d->root, "seed", 0, &u, &err) == 0);
    CHECK(cfg_check_unused(d->root, NULL, &err) == -1);
    CHECK_STR_EQ(err.msg, "s.yaml:2:1: unknown key 'sede' at the top level (did you mean 'seed'?)");
    cfg_free(d);
}

static void test_sequences_of_maps(void)
{
    struct cfg_doc *d = load_ok("w.yaml", "workloads:\n"
                                          "  - host: 0\n"
                                          "    size: 4KiB\n"
                                          "  - host: 1\n"
                                          "    size: 64B\n"
                                          "    iteration: 10\n");
    if (!d)
        return;
    struct cfg_node *w = NULL;
    CHECK(cfg_req_node(d->root, "workloads", CFG_SEQ, &w, &err) == 0);
    CHECK_EQ_U64(w->n, 2);
    uint64_t host = 9, size = 0;
    for (size_t i = 0; i < w->n; i++) {
        CHECK(cfg_get_u64(w->items[i], "host", 0, &host, &err) == 0);
        CHECK_EQ_U64(host, i);
        CHECK(cfg_get_size(w->items[i], "size", 0, &size, &err) == 0);
        CHECK(cfg_get_u64(w->items[i], "iterations", 1, &host, &err) == 0);
    }
    CHECK_EQ_U64(size, 64);
    CHECK_STR_EQ(w->items[1]->path, "workloads[1]");
    CHECK(cfg_check_unused(d->root, "", &err) == -1);
    CHECK_STR_EQ(err.msg, "w.yaml:6:5: unknown key 'iteration' in 'workloads[1]' (did you "
                          "mean 'iterations'?)");
    cfg_free(d);

    /* Sequence items converted one by one. */
    d = load_ok("q.yaml", "delays: [1ns, 2us, 3]\nsizes: [1KiB, 2]\nrates: [1Gbps]\nn: [1, x]\n");
    struct cfg_node *seq = cfg_child(d->root, "delays");
    sim_time_t t = 0;
    uint64_t u = 0;
    CHECK(cfg_node_time(seq->items[0], &t, &err) == 0);
    CHECK_EQ_U64(t, 1000);
    CHECK(cfg_node_time(seq->items[1], &t, &err) == 0);
    CHECK_EQ_U64(t, 2000000);
    CHECK(cfg_node_time(seq->items[2], &t, &err) == -1);
    CHECK_STR_EQ(err.msg, "q.yaml:1:20: bad time '3': missing unit (expected ps, ns, us, ms, s)");
    seq = cfg_child(d->root, "sizes");
    CHECK(cfg_node_size(seq->items[0], &u, &err) == 0);
    CHECK_EQ_U64(u, 1024);
    CHECK(cfg_node_size(seq->items[1], &u, &err) == 0);
    CHECK_EQ_U64(u, 2);
    seq = cfg_child(d->root, "rates");
    CHECK(cfg_node_rate(seq->items[0], &u, &err) == 0);
    CHECK_EQ_U64(u, 1000000000);
    seq = cfg_child(d->root, "n");
    CHECK(cfg_node_u64(seq->items[0], &u, &err) == 0);
    CHECK_EQ_U64(u, 1);
    CHECK(cfg_node_u64(seq->items[1], &u, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "q.yaml:4:8: bad integer 'x'");
    const char *s;
    CHECK(cfg_node_str(seq->items[1], &s, &err) == 0);
    CHECK_STR_EQ(s, "x");
    CHECK(cfg_node_str(seq, &s, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "expected a string, got a sequence");
    cfg_free(d);
}

static void test_refused_yaml(void)
{
    CHECK_STR_EQ(load_bad("d.yaml", "a: 1\nb: 2\na: 3\n"),
                 "d.yaml:3:1: duplicate key 'a' (first given at line 1, column 1)");
    CHECK_STR_EQ(load_bad("d.yaml", "x:\n  k: 1\n  k: 2\n"),
                 "d.yaml:3:3: duplicate key 'k' (first given at line 2, column 3)");
    CHECK_STR_CONTAINS(load_bad("a.yaml", "base: &b {x: 1}\n"),
                       "a.yaml:1:7: YAML anchors ('&b') are not supported");
    CHECK_STR_CONTAINS(load_bad("a.yaml", "base: {x: 1}\nother: *b\n"),
                       "a.yaml:2:8: YAML aliases ('*b') are not supported");
    CHECK_STR_CONTAINS(load_bad("t.yaml", "n: !!str 5\n"), "t.yaml:1:4: YAML tags");
    CHECK_STR_CONTAINS(load_bad("t.yaml", "n: !custom {a: 1}\n"),
                       "t.yaml:1:4: YAML tags ('!custom')");
    CHECK_STR_EQ(load_bad("m.yaml", "a: 1\n---\nb: 2\n"),
                 "m.yaml:2:1: more than one YAML document ('---') in one file is not supported");
    CHECK_STR_CONTAINS(load_bad("k.yaml", "[a]: 1\n"),
                       "k.yaml:1:1: a mapping key must be a plain name, got a sequence");
    CHECK_STR_CONTAINS(load_bad("k.yaml", "\"\": 1\n"), "k.yaml:1:1: empty key");

    /* Syntax errors where libyaml puts them. */
    const char *m = load_bad("s.yaml", "a: 1\nb: [1, 2\nc: 3\n");
    CHECK_STR_CONTAINS(m, "s.yaml:");
    CHECK_STR_CONTAINS(m, "YAML syntax error");
    m = load_bad("s.yaml", "a:\n  b: 1\n   c: 2\n");
    CHECK_STR_CONTAINS(m, "s.yaml:3:5: YAML syntax error: mapping values are not allowed");
    m = load_bad("s.yaml", "a:\n\tb: 1\n");
    CHECK_STR_CONTAINS(m, "s.yaml:2:1: YAML syntax error");
    CHECK_STR_CONTAINS(m, "tabs cannot be used for indentation");
    m = load_bad("u.yaml", "a: \"\xff\"\n");
    CHECK_STR_CONTAINS(m, "u.yaml:1:5: invalid input");

    /* Deep nesting is refused, not a stack overflow. */
    char deep[400];
    memset(deep, '[', 300);
    strcpy(deep + 300, "\n");
    char doc[420] = "a: ";
    strcat(doc, deep);
    CHECK_STR_CONTAINS(load_bad("n.yaml", doc), "nesting deeper than");

    /* Files. */
    struct cfg_doc *d = cfg_load_file("/nonexistent/x.yaml", &err);
    CHECK(d == NULL);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.yaml: cannot open: No such file");
    char path[] = "/tmp/rnicsim_cfg_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs("seed: 3\nlink:\n  rate: 10Gbs\n", f);
        fclose(f);
        d = cfg_load_file(path, &err);
        CHECK(d != NULL);
        if (d) {
            uint64_t u;
            CHECK(cfg_get_rate(cfg_child(d->root, "link"), "rate", 0, &u, &err) == -1);
            char want[600];
            snprintf(want, sizeof want, "%s:3:9: bad rate '10Gbs'", path);
            CHECK_STR_CONTAINS(err.msg, want);
            cfg_free(d);
        }
        remove(path);
    }
}

static void test_set(void)
{
    struct cfg_doc *d = load_ok("s.yaml", "topology:\n"
                                          "  link:\n"
                                          "    rate: 100Gbps\n"
                                          "  hosts:\n"
                                          "    - name: a\n"
                                          "    - name: b\n"
                                          "seed: 1\n");
    if (!d)
        return;
    uint64_t u = 0;
    /* Override an existing scalar. */
    CHECK(cfg_set(d, "topology.link.rate=40Gbps", &err) == 0);
    struct cfg_node *link = cfg_child(cfg_child(d->root, "topology"), "link");
    CHECK(cfg_get_rate(link, "rate", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 40000000000ull);
    /* The new value's position is on the --set line. */
    CHECK(cfg_set(d, "topology.link.rate=40Gbs", &err) == 0);
    CHECK(cfg_get_rate(link, "rate", 0, &u, &err) == -1);
    CHECK_STR_EQ(err.msg, "--set:1:20: bad rate '40Gbs': unknown unit 'Gbs' (expected bps, Kbps, "
                          "Mbps, Gbps, Tbps)");
    /* Create nested keys. */
    CHECK(cfg_set(d, "hardware.pcie.lanes=8", &err) == 0);
    struct cfg_node *pcie = cfg_child(cfg_child(d->root, "hardware"), "pcie");
    CHECK(pcie != NULL && pcie->kind == CFG_MAP);
    CHECK_STR_EQ(pcie->path, "hardware.pcie");
    CHECK(cfg_get_u64(pcie, "lanes", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 8);
    CHECK(cfg_set(d, "hardware.pcie.gen=4", &err) == 0);
    CHECK_EQ_U64(pcie->n, 2);
    /* An unknown key given by --set is reported at its --set column. */
    CHECK(cfg_set(d, "hardware.pcie.lanez=4", &err) == 0);
    CHECK(cfg_get_u64(pcie, "gen", 0, &u, &err) == 0);
    CHECK(cfg_check_unused(pcie, "hardware.pcie", &err) == -1);
    CHECK_STR_EQ(err.msg,
                 "--set:1:15: unknown key 'lanez' in 'hardware.pcie' (did you mean 'lanes'?)");
    /* Flow sequence value; quoted string value. */
    CHECK(cfg_set(d, "sizes=[64B, 4KiB]", &err) == 0);
    struct cfg_node *sizes = cfg_child(d->root, "sizes");
    CHECK(sizes && sizes->kind == CFG_SEQ && sizes->n == 2);
    if (sizes && sizes->n == 2) {
        CHECK(cfg_node_size(sizes->items[1], &u, &err) == 0);
        CHECK_EQ_U64(u, 4096);
        CHECK_EQ_U64(sizes->items[1]->col, 13);
        CHECK_STR_EQ(sizes->items[1]->file, "--set");
    }
    CHECK(cfg_set(d, "name=\"a: b\"", &err) == 0);
    const char *s = NULL;
    CHECK(cfg_get_str(d->root, "name", NULL, &s, &err) == 0);
    CHECK_STR_EQ(s, "a: b");
    /* Index into a sequence of maps. */
    CHECK(cfg_set(d, "topology.hosts.1.name=c", &err) == 0);
    struct cfg_node *hosts = cfg_child(cfg_child(d->root, "topology"), "hosts");
    CHECK(cfg_get_str(hosts->items[1], "name", NULL, &s, &err) == 0);
    CHECK_STR_EQ(s, "c");

    /* Errors, all positioned on the --set text. */
    CHECK(cfg_set(d, "seed.x=1", &err) == -1);
    CHECK_STR_EQ(err.msg,
                 "--set:1:6: cannot set 'x': 'seed' is a scalar (s.yaml:7:7), not a mapping");
    CHECK(cfg_set(d, "topology.link.rate.x.y=1", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:20: cannot set 'x': 'topology.link.rate' is a scalar");
    CHECK(cfg_set(d, "topology.hosts.2.name=x", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:16: 'topology.hosts' is a sequence of 2 items");
    CHECK(cfg_set(d, "topology.hosts.first=x", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "'first' is not an index 0..1");
    CHECK(cfg_set(d, "seed", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:1: expected KEY=VALUE");
    CHECK(cfg_set(d, "=5", &err) == -1);
    CHECK_STR_EQ(err.msg, "--set:1:1: missing key before '='");
    CHECK(cfg_set(d, "seed=", &err) == -1);
    CHECK_STR_EQ(err.msg, "--set:1:6: missing value after '='");
    CHECK(cfg_set(d, "a..b=1", &err) == -1);
    CHECK_STR_EQ(err.msg, "--set:1:3: empty key in 'a..b'");
    CHECK(cfg_set(d, "seed={a: 1}", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:6: the value must be a scalar or a flow sequence");
    CHECK(cfg_set(d, "seed=[1, 2", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:11: ");
    CHECK_STR_CONTAINS(err.msg, "YAML syntax error");
    CHECK(cfg_set(d, "seed=&x 5", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--set:1:6: YAML anchors");
    /* A failed --set changes nothing: no half-created maps. */
    CHECK(cfg_set(d, "new.section=[1, 2", &err) == -1);
    CHECK(cfg_child(d->root, "new") == NULL);
    /* Setting the last value of seed still works after all that. */
    CHECK(cfg_set(d, "seed=0x2a", &err) == 0);
    CHECK(cfg_get_u64(d->root, "seed", 0, &u, &err) == 0);
    CHECK_EQ_U64(u, 42);
    cfg_free(d);
}

static void test_errorf(void)
{
    struct cfg_doc *d = load_ok("e.yaml", "a:\n  b: 1\n");
    struct cfg_node *b = cfg_child(cfg_child(d->root, "a"), "b");
    CHECK(cfg_errorf(&err, b, "value %d is wrong", 1) == -1);
    CHECK_STR_EQ(err.msg, "e.yaml:2:6: value 1 is wrong");
    CHECK(cfg_errorf(NULL, b, "ignored") == -1);
    /* Long messages are truncated, not overflowed. */
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(cfg_errorf(&err, b, "%s", big) == -1);
    CHECK_EQ_U64(strlen(err.msg), sizeof err.msg - 1);
    cfg_free(d);
}

int main(void)
{
    test_tree_and_positions();
    test_getters();
    test_getter_errors();
    test_required_and_types();
    test_unknown_keys();
    test_sequences_of_maps();
    test_refused_yaml();
    test_set();
    test_errorf();
    return test_summary();
}
