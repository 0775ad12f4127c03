/* microbench's options: the tests' facts, the usage text, parsing with
 * getopt_long (GNU long options, as the other protocol drivers and
 * perftest take them), the cross-option checks and the options hash the
 * programs of a run compare (microbench.c is the benchmark itself).
 * getopt's globals are used only while parsing, before any blocking call,
 * so several instances may run as coroutines in one simulator process. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "protocols/microbench/microbench_priv.h"

const struct mb_test_info mb_tests[MB_TEST_COUNT] = {
    [MB_WRITE] = {"write", IBV_WR_RDMA_WRITE, false, true, true},
    [MB_READ] = {"read", IBV_WR_RDMA_READ, false, false, true},
    [MB_SEND] = {"send", IBV_WR_SEND, false, true, false},
    [MB_FAA] = {"faa", IBV_WR_ATOMIC_FETCH_AND_ADD, true, false, true},
    [MB_CAS] = {"cas", IBV_WR_ATOMIC_CMP_AND_SWP, true, false, true},
};
static const char *const mb_access_names[MB_ACCESS_COUNT] = {
    [MB_SEQ] = "seq", [MB_RANDOM] = "random"};
const char *const mb_target_names[MB_TARGET_COUNT] = {[MB_HOST] = "host", [MB_DM] = "dm"};

/* ------------------------------------------------------------ options */

static void mb_usage(const char *prog)
{
    printf("usage: %s --server | --client --id=I [options] [server-host]\n"
           "  --name=X            out-of-band key prefix (default microbench)\n"
           "  --clients=K         client programs the server serves (default 1)\n"
           "  --id=I              this client's number, 0..K-1\n"
           "  --test=T            write|read|send|faa|cas (default write)\n"
           "  --size=BYTES        bytes per operation (default 64; atomics: 8)\n"
           "  --qps=N             RC QPs per client (default 1)\n"
           "  --depth=D           max_send_wr per QP (default: enough for M over N QPs,\n"
           "                      at least the post list)\n"
           "  --outstanding=M     WRs in flight per client, round robin over its QPs (default 16)\n"
           "  --post-list=P       WRs chained per ibv_post_send (default 1)\n"
           "  --burst=B           posts to one QP before moving to the next (default 1)\n"
           "  --rounds=0|1        1: a round is B posts to each QP; wait for all its\n"
           "                      completions before the next round (default 0: a QP\n"
           "                      gets its next posts as soon as it has room)\n"
           "  --iters=I           timed operations per client (default 1000)\n"
           "  --warmup=W          untimed operations per client first (default 16)\n"
           "  --working-set=B     server MR bytes the remote addresses walk (default one stride)\n"
           "  --access=A          seq|random walk (default seq; stride max(size, 64))\n"
           "  --target=T          host|dm: server target in host or device memory (default host)\n"
           "  --signal-every=C    signal every C-th WR of a QP (default 1)\n"
           "  --inline            inline the payload (write, send; up to the QP's limit)\n"
           "  --mtu=BYTES         256..4096 (default: the port's active MTU)\n"
           "exit status: 0 ok, 1 setup or transport error, 2 usage error or data not verified\n",
           prog);
}

static bool mb_parse_name(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return true;
        }
    return false;
}

enum {
    OPT_SERVER = 256,
    OPT_CLIENT,
    OPT_NAME,
    OPT_CLIENTS,
    OPT_ID,
    OPT_TEST,
    OPT_SIZE,
    OPT_QPS,
    OPT_DEPTH,
    OPT_OUTSTANDING,
    OPT_POST_LIST,
    OPT_BURST,
    OPT_ROUNDS,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_WORKING_SET,
    OPT_ACCESS,
    OPT_TARGET,
    OPT_SIGNAL_EVERY,
    OPT_INLINE,
    OPT_MTU,
    OPT_HELP
};

/* Cross-option checks; prints the reason.  True when the set is usable. */
static bool mb_check_opts(const char *prog, struct mb_opts *o, bool have_id)
{
    const struct mb_test_info *t = &mb_tests[o->test];
    if (o->role == RC_CONN_ROLE_NONE) {
        fprintf(stderr, "%s: give --server or --client (try --help)\n", prog);
        return false;
    }
    if (o->role == RC_CONN_ROLE_CLIENT && !have_id && o->clients > 1) {
        fprintf(stderr, "%s: a client needs --id=0..%" PRIu64 "\n", prog, o->clients - 1);
        return false;
    }
    if (o->id >= o->clients) {
        fprintf(stderr, "%s: --id=%" PRIu64 " is not below --clients=%" PRIu64 "\n", prog, o->id,
                o->clients);
        return false;
    }
    if (o->qps * o->clients > MB_MAX_QPS_TOTAL) {
        fprintf(stderr, "%s: --qps x --clients = %" PRIu64 " QPs at the server, at most %u\n", prog,
                o->qps * o->clients, MB_MAX_QPS_TOTAL);
        return false;
    }
    if (t->atomic)
        o->size = 8;
    if (o->post_list > o->outstanding) {
        fprintf(stderr, "%s: --post-list=%" PRIu64 " exceeds --outstanding=%" PRIu64 "\n", prog,
                o->post_list, o->outstanding);
        return false;
    }
    if (o->depth && o->depth < o->post_list) {
        fprintf(stderr, "%s: --depth=%" PRIu64 " is below --post-list=%" PRIu64 "\n", prog,
                o->depth, o->post_list);
        return false;
    }
    uint64_t stride = o->size > MB_MIN_STRIDE ? o->size : MB_MIN_STRIDE;
    if (!o->working_set)
        o->working_set = stride;
    if (!t->atomic && o->working_set < o->size) {
        fprintf(stderr, "%s: --working-set=%" PRIu64 " is smaller than --size=%" PRIu64 "\n", prog,
                o->working_set, o->size);
        return false;
    }
    if (o->inline_data && !t->can_inline) {
        fprintf(stderr, "%s: --inline applies to write and send only, not %s\n", prog, t->name);
        return false;
    }
    return true;
}

int mb_parse_args(int argc, char **argv, struct mb_opts *o)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, OPT_SERVER},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"name", required_argument, NULL, OPT_NAME},
        {"clients", required_argument, NULL, OPT_CLIENTS},
        {"id", required_argument, NULL, OPT_ID},
        {"test", required_argument, NULL, OPT_TEST},
        {"size", required_argument, NULL, OPT_SIZE},
        {"qps", required_argument, NULL, OPT_QPS},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"outstanding", required_argument, NULL, OPT_OUTSTANDING},
        {"post-list", required_argument, NULL, OPT_POST_LIST},
        {"burst", required_argument, NULL, OPT_BURST},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"iters", required_argument, NULL, OPT_ITERS},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"working-set", required_argument, NULL, OPT_WORKING_SET},
        {"access", required_argument, NULL, OPT_ACCESS},
        {"target", required_argument, NULL, OPT_TARGET},
        {"signal-every", required_argument, NULL, OPT_SIGNAL_EVERY},
        {"inline", no_argument, NULL, OPT_INLINE},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *test_names[MB_TEST_COUNT];
    for (int t = 0; t < MB_TEST_COUNT; t++)
        test_names[t] = mb_tests[t].name;
    const char *prog = argc > 0 && argv[0] ? argv[0] : "microbench";
    bool have_id = false;

    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "microbench");
    o->test = MB_WRITE;
    o->clients = 1;
    o->qps = 1;
    o->size = 64;        /* estimate: one cache line, the small-message case */
    o->outstanding = 16; /* estimate: = max_qp_rd_atom of a ConnectX-5 (16) */
    o->post_list = 1;    /* perftest's default post list */
    o->burst = 1;        /* round robin, one post per QP */
    o->iters = 1000;     /* perftest's default iteration count */
    o->warmup = 16;      /* estimate: as perftest here, fills caches before timing */
    o->signal_every = 1; /* every WR measured */

    optind = 0; /* GNU getopt: full re-initialisation for each instance */
    opterr = 1;
    for (;;) {
        int v = 0;
        bool ok = true;
        int c = getopt_long(argc, argv, "", longopts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case OPT_SERVER:
            o->role = RC_CONN_ROLE_SERVER;
            break;
        case OPT_CLIENT:
            o->role = RC_CONN_ROLE_CLIENT;
            break;
        case OPT_NAME:
            ok = optarg[0] != '\0' && strlen(optarg) < sizeof(o->name) - 24;
            if (ok)
                snprintf(o->name, sizeof(o->name), "%s", optarg);
            break;
        case OPT_CLIENTS:
            ok = rc_conn_parse_uint(optarg, 1, 4096, &o->clients);
            break;
        case OPT_ID:
            ok = rc_conn_parse_uint(optarg, 0, 4095, &o->id);
            have_id = true;
            break;
        case OPT_TEST:
            ok = mb_parse_name(optarg, test_names, MB_TEST_COUNT, &v);
            o->test = (enum mb_test)v;
            break;
        case OPT_SIZE:
            ok = rc_conn_parse_uint(optarg, 1, 1ull << 30, &o->size);
            break;
        case OPT_QPS:
            ok = rc_conn_parse_uint(optarg, 1, MB_MAX_QPS_TOTAL, &o->qps);
            break;
        case OPT_DEPTH:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 16, &o->depth);
            break;
        case OPT_OUTSTANDING:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 20, &o->outstanding);
            break;
        case OPT_POST_LIST:
            ok = rc_conn_parse_uint(optarg, 1, 1024, &o->post_list);
            break;
        case OPT_BURST:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 16, &o->burst);
            break;
        case OPT_ROUNDS: {
            uint64_t r = 0;
            ok = rc_conn_parse_uint(optarg, 0, 1, &r);
            o->rounds = r != 0;
            break;
        }
        case OPT_ITERS:
            ok = rc_conn_parse_uint(optarg, 1, 1ull << 32, &o->iters);
            break;
        case OPT_WARMUP:
            ok = rc_conn_parse_uint(optarg, 0, 1ull << 32, &o->warmup);
            break;
        case OPT_WORKING_SET:
            ok = rc_conn_parse_uint(optarg, 1, 1ull << 40, &o->working_set);
            break;
        case OPT_ACCESS:
            ok = mb_parse_name(optarg, mb_access_names, MB_ACCESS_COUNT, &v);
            o->access = (enum mb_access)v;
            break;
        case OPT_TARGET:
            ok = mb_parse_name(optarg, mb_target_names, MB_TARGET_COUNT, &v);
            o->target = (enum mb_target)v;
            break;
        case OPT_SIGNAL_EVERY:
            ok = rc_conn_parse_uint(optarg, 1, 1u << 20, &o->signal_every);
            break;
        case OPT_INLINE:
            o->inline_data = true;
            break;
        case OPT_MTU: {
            uint64_t m = 0;
            ok = rc_conn_parse_uint(optarg, 256, 4096, &m) && (m & (m - 1)) == 0;
            o->mtu_bytes = m;
            break;
        }
        case OPT_HELP:
            mb_usage(prog);
            return -1;
        default:
            fprintf(stderr, "%s: unknown option (try --help)\n", prog);
            return 2;
        }
        if (!ok) {
            const char *hint = "";
            if (c == OPT_TEST)
                hint = " (write|read|send|faa|cas)";
            else if (c == OPT_ACCESS)
                hint = " (seq|random)";
            else if (c == OPT_TARGET)
                hint = " (host|dm)";
            else if (c == OPT_MTU)
                hint = " (256, 512, 1024, 2048 or 4096)";
            fprintf(stderr, "%s: bad value for --%s: '%s'%s\n", prog, longopts[c - OPT_SERVER].name,
                    optarg ? optarg : "", hint);
            return 2;
        }
    }
    /* At most one positional argument: the server host on real hardware
     * (consumed by the out-of-band layer, tools/real/host_posix.c). */
    if (argc - optind > 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind + 1]);
        return 2;
    }
    return mb_check_opts(prog, o, have_id) ? 0 : 2;
}

uint32_t mb_opts_hash(const struct mb_opts *o)
{
    uint64_t words[] = {
        o->test,         o->clients,     o->qps,       o->size,        o->depth,  o->outstanding,
        o->post_list,    o->iters,       o->warmup,    o->working_set, o->access, o->target,
        o->signal_every, o->inline_data, o->mtu_bytes, o->burst,       o->rounds};
    return rc_conn_hash_words(words, sizeof(words) / sizeof(words[0]));
}
