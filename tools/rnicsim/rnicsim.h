/* The rnicsim command: internal interfaces between its files.
 *
 * Reading order: main.c (CLI) -> scenario.c (schema) -> params.c /
 * profile.c (hardware parameters) -> world.c (building the simulated
 * hardware) -> run.c (programs as coroutines, outcome) -> host_api.c
 * (<rnicsim/host.h> in simulation) -> results.c (JSON + summary) ->
 * bench.c (`rnicsim bench`). */
#ifndef RNICSIM_TOOL_H
#define RNICSIM_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim/config/config.h"
#include "sim/fabric/fabric.h"
#include "sim/host.h"
#include "sim/nic/nic.h"
#include "sim/pcie/pcie.h"
#include "sim/pswitch/pswitch.h"
#include "sim/sim.h"
#include "sim/traffic/traffic.h"

#define RNICSIM_VERSION "0.1"

/* ---------------------------------------------------------------- params.c */

/* A PCIe device of every host whose memory the RNIC reaches peer to peer
 * (GPUDirect RDMA / PeerDirect): a GPU or an FPGA.  Programs allocate its
 * memory with host_device_alloc; the NIC's DMA to it is timed on a PCIe
 * link with these parameters (sim/nic/peer.c). */
struct pu_dev_params {
    uint32_t gen, lanes;
    sim_time_t read_latency_ps, write_latency_ps;
    uint64_t mem_bytes; /* 0: the hosts have no such device */
};
#define HW_N_DEVICES 2                      /* gpu, fpga */
extern const char *const hw_device_names[]; /* "gpu", "fpga", NULL */

/* Every hardware parameter a scenario can set. */
struct hw_profile {
    struct nic_params nic;
    struct pcie_params pcie;
    struct host_cpu_params cpu;
    struct ps_params pswitch;
    struct pu_dev_params dev[HW_N_DEVICES]; /* gpu, fpga */
};

enum param_kind {
    PARAM_TIME,      /* sim_time_t, written with a time unit; base unit ps */
    PARAM_RATE,      /* uint64_t bits/s, written with a rate unit */
    PARAM_BYTE_RATE, /* uint64_t bytes/s, written as a rate in bits/s (divisible by 8) */
    PARAM_SIZE,      /* integer field, written as a size; base unit bytes */
    PARAM_COUNT,     /* integer field, plain number */
    PARAM_BOOL,      /* bool */
    PARAM_MTU,       /* enum ibv_mtu, written as 256..4096 (bytes) */
    PARAM_ENUM,      /* uint32_t index into param_def.names, written as the name */
};

struct param_def {
    const char *key; /* dotted: "nic.tx_pkt_proc" */
    enum param_kind kind;
    size_t offset;            /* into struct hw_profile */
    size_t width;             /* sizeof the field */
    const char *doc;          /* one line */
    const char *const *names; /* PARAM_ENUM: the values' names, NULL-terminated */
    const uint64_t *choices;  /* if set: the only values allowed, ending with 0 */
    /* The range checked where the value is read (base units).  max 0
     * means the kind's default range (param_range: times 0..1h, rates
     * 0..100Tbps, sizes 0..1GiB, counts 0..2^24); a count or a size whose
     * meaning needs other bounds gives them (PR in params.c). */
    uint64_t min, max;
};

extern const struct param_def hw_params[];
extern const size_t hw_params_count;

/* The C defaults of every block (nic_params_default, ...). */
void hw_profile_default(struct hw_profile *hw);
const struct param_def *param_find(const char *key);
/* The closest known key (did-you-mean), or NULL. */
const char *param_suggest(const char *key);
/* Parse a scalar node according to the parameter's kind and store it. */
int param_set_node(struct hw_profile *hw, const struct param_def *d, struct cfg_node *n,
                   struct cfg_error *err);
/* Value in base units (ps, bits/s, bytes, count, 0/1; MTU in bytes). */
uint64_t param_value(const struct hw_profile *hw, const struct param_def *d);
/* Human form with a unit ("5ns", "100Gbps", "4KiB"), as a file would say. */
void param_format(const struct hw_profile *hw, const struct param_def *d, char *buf, size_t len);
const char *param_kind_name(enum param_kind k);
/* The allowed range of a numeric parameter in base units ([min, max]);
 * false for kinds without one (bool, mtu, enum). */
bool param_range(const struct param_def *d, uint64_t *min, uint64_t *max);
/* "0..3600s", "1..16": the range as a scenario writes it ("" if none). */
void param_format_range(const struct param_def *d, char *buf, size_t len);
/* Where a parameter's value comes from (param_source.c): the C default's
 * citation (param_defaults.c), a profile's FILE:LINE and its comment, a
 * scenario's `hardware:` FILE:LINE, or --set.  One per hw_params[] entry. */
struct param_origin {
    char text[720];
};
const char *param_default_source(const char *key);
void param_origins_default(struct param_origin *o);
/* The parameters a map sets (a profile's params:, a scenario's hardware:)
 * now come from its lines. */
void param_origins_walk(struct param_origin *o, const struct cfg_node *map);
/* Apply a (possibly nested) map of parameters: nested maps flatten to
 * dotted keys ("nic: {mtu: 4096}" == "nic.mtu: 4096").  Unknown keys are
 * errors with a suggestion.  `where` names the map in messages. */
int params_apply_map(struct hw_profile *hw, struct cfg_node *map, const char *where,
                     struct cfg_error *err);
/* Checks between parameters (each is in range already): 0, or -1 with the
 * error at the node of `map` (a hardware map) that set one of them, else
 * at `fallback` (the profile: value, or the top of the file). */
int params_check(const struct hw_profile *hw, struct cfg_node *map, struct cfg_node *fallback,
                 struct cfg_error *err);

/* ---------------------------------------------------------------- profile.c */

struct profile_search {
    const char *cli_dir;       /* --profiles DIR, or NULL */
    const char *scenario_file; /* for <scenario dir>/../profiles, or NULL */
};

/* Find profiles/<name>.yaml and apply it onto `hw`.  `at` positions the
 * "not found" error (the scenario's profile: value).  The path found is
 * returned in `path` (malloc'd). */
int profile_load(const char *name, const struct profile_search *s, struct cfg_node *at,
                 struct hw_profile *hw, char **path, struct cfg_error *err);
/* Print the search directories, one a line (for `rnicsim params`). */
void profile_print_dirs(const struct profile_search *s, FILE *out);

/* ---------------------------------------------------------------- scenario.c */

typedef int (*program_main_fn)(int argc, char **argv);

struct scn_program {
    char *host; /* "h1" */
    uint32_t host_index;
    char *program;     /* as written (argv[0]) */
    char *so_path;     /* resolved shared-object path, or NULL for a built-in */
    int so_fd;         /* memfd of a private copy (a second instance), or -1 */
    uintptr_t so_base; /* where the object was loaded, and its extent */
    size_t so_size;
    program_main_fn main;
    char **args; /* NULL-terminated */
    size_t nargs;
    bool daemon;
    size_t stack_bytes;
    /* cpus: [..] pins the program's threads (main first, then each thread
     * it starts, round robin); socket: keeps their placement on one
     * socket (-1: any).  docs/host.md */
    int *cpus;
    size_t ncpus;
    int socket;
};

/* topology.links[]: per-link overrides (scenario.c reads, world.c applies). */
struct scn_link_override {
    char *link; /* as written: "leaf0->spine1", "h0<->sw0" */
    bool has_rate, has_delay, has_loss, has_corrupt;
    uint64_t rate_bps;
    sim_time_t delay_ps;
    double loss_prob, corrupt_prob;
};

/* topology.failures[] */
struct scn_failure {
    char *link;
    sim_time_t at_ps;
    sim_time_t recover_at_ps; /* SIM_TIME_NEVER: stays down */
};

/* capture[] */
enum scn_capture_kind { CAPTURE_LINK, CAPTURE_HOST, CAPTURE_ALL };
struct scn_capture {
    enum scn_capture_kind kind;
    char *link;    /* CAPTURE_LINK */
    uint32_t host; /* CAPTURE_HOST */
    bool rx;       /* CAPTURE_LINK: tap at the far end instead of the sender */
    char *path;    /* file (LINK, HOST) or directory (ALL), relative to the cwd */
};

struct scenario {
    struct cfg_doc *doc;
    char *file; /* as given */
    char *name, *description;
    uint64_t seed;
    sim_time_t stop_time_ps;
    char *profile_name, *profile_path;
    struct hw_profile hw;
    struct topo_params topo;
    /* topology.switch.programmable: sw0 is a programmable switch (node id
     * = hosts) whose CPU runs the programs placed on host "sw0"
     * (scn_program.host_index == topo.n_nodes) */
    bool pswitch;
    struct scn_link_override *link_overrides;
    size_t n_link_overrides;
    struct scn_failure *failures;
    size_t nfailures;
    struct scn_capture *captures;
    size_t ncaptures;
    struct scn_program *progs;
    size_t nprogs;
    /* payload: none (sizes without bytes), traffic: (the built-in
     * generator, traffic_cli.c) */
    bool payload_none;
    bool has_traffic;
    struct traffic_params traffic;
    char *traffic_flows_file;
    /* vars: (after --set), in file order; ${name} in program fields */
    char **var_names, **var_values;
    size_t nvars;
    void **dl_handles; /* dlopen()ed user programs */
    size_t n_dl;
};

struct scenario_opts {
    const char *profiles_dir; /* --profiles */
    const char *const *sets;  /* --set assignments */
    size_t nsets;
    bool have_seed; /* --seed */
    uint64_t seed;
    bool emulate; /* emulation mode (emu/): no `programs:` */
};

/* Load a scenario file (or, when `text` is non-NULL, that text under the
 * name `file`), apply --set overrides, read and check everything.  NULL
 * with `err` filled ("file:line:col: message") on any error. */
struct scenario *scenario_load(const char *file, const char *text, const struct scenario_opts *o,
                               struct cfg_error *err);
void scenario_free(struct scenario *s);
/* Can `path` be written (`dir`: as a directory, created if missing; else
 * as a file; `make_parents`: missing parent directories will be created)?
 * 0, or -1 with the reason in `why` (empty, a directory, not writable, a
 * file in the way, no parent).  Creates nothing. */
int check_output_path(const char *path, bool dir, bool make_parents, char *why, size_t why_len);

/* ---------------------------------------------------------------- world.c */

struct pcap_writer;

struct world {
    struct sim *sim;
    struct pkt_pool *pool;
    struct topology *topo;
    struct pcap_writer **pcaps; /* capture files, one writer per distinct path */
    size_t npcaps;
    size_t nhosts;
    struct host *hosts;
    struct pcie_link **pcie;
    struct nic **nics;
    struct pswitch *pswitch; /* topology.switch.programmable, else NULL */
    /* per host and device (gpu, fpga): its PCIe link for peer-to-peer DMA
     * (index host * HW_N_DEVICES + device), and the bytes handed out */
    struct pcie_link **dev_links;
    uint64_t *dev_used;
    struct dev_alloc *dev_allocs; /* host_device_alloc'ed blocks */
    size_t n_dev_allocs;
};
struct dev_alloc {
    void *p;
    uint64_t bytes;
    size_t slot; /* host * HW_N_DEVICES + device */
};

/* Build the simulator and the hardware of a scenario (with per-link
 * overrides, scheduled failures and capture files).  NULL with a message
 * in `why` if something cannot be created. */
struct world *world_build(const struct scenario *s, char *why, size_t why_len);
/* Close the capture files: 0, or -1 after one stderr line per file that
 * could not be written in full.  world_free closes what is still open. */
int world_close_captures(struct world *w);
void world_free(struct world *w);
/* Links named `name` in `t`: "A->B" is one direction, "A<->B" both; "h<i>"
 * may stand for "node<i>".  Returns how many were found (0, 1 or 2). */
unsigned world_find_links(const struct topology *t, const char *name, struct link *out[2]);
/* Sum of pkts_tx over every NIC. */
uint64_t world_pkts_tx(const struct world *w);

/* ---------------------------------------------------------------- run.c */

struct oob_entry;
struct run_thread;

/* A table of host_report rows, in report order. */
struct report_row {
    size_t n;
    char **keys;
    double *values;
};
struct report_table {
    char *name;
    struct report_row *rows;
    size_t nrows, cap;
};

enum run_result { RUN_DONE, RUN_DEADLOCK, RUN_PROGRAM_FAILED, RUN_TIME_LIMIT, RUN_WALL_LIMIT };

struct run;
struct posix_world;
struct posix_prog;

/* One program instance (and, shared, its threads): the host_thread.program
 * pointer of its processes. */
struct prog_inst {
    struct run *run;
    const struct scn_program *def;
    struct host *host;
    char **argv;
    int argc;
    char proc_name[96]; /* "h1/perftest#0": the process name (kept alive) */
    int exit_code;
    bool finished;
    struct posix_prog *os;    /* a shared object's simulated POSIX (posix/), or NULL */
    uint32_t threads_started; /* host_thread_start calls (the cpus: list) */
    sim_time_t finished_ps;   /* when it returned */
};

struct run {
    const struct scenario *scn;
    struct world *world;
    struct prog_inst *insts;
    size_t ninsts;
    /* host_thread_start handles (index = handle) */
    struct run_thread **threads;
    size_t nthreads, threads_cap;
    /* out-of-band board: hash table of entries (host_api.c) */
    struct oob_entry **oob;
    size_t noob, oob_cap;
    /* host_report tables, in order of first report */
    struct report_table *tables;
    size_t ntables, tables_cap;
    /* non-daemon processes still running; daemons present */
    size_t live_nondaemon;
    bool has_daemons;
    /* outcome */
    enum sim_run_result sim_result;
    enum run_result result;
    sim_time_t sim_time_ps;
    uint64_t events;
    double wall_s;
    bool progress;
    bool progress_shown; /* the progress line is on the terminal now */
    double progress_t0, progress_last;
    /* stop the simulation as soon as a program returns non-zero */
    bool stop_on_failure;
    /* the simulated POSIX of the shared-object programs (posix/), or NULL */
    struct posix_world *os;
    const struct prog_inst *first_failed; /* the first program that returned non-zero */
    /* --wall-limit: stop when the run has taken this many seconds (0: none) */
    double wall_limit_s, wall_t0;
    bool wall_limit_hit;
    /* the observer of run_opts, called from run.c's own tick */
    sim_progress_fn observe;
    void *observe_arg;
    /* the built-in traffic generator (NULL without `traffic:`) */
    struct traffic *traffic;
    bool traffic_done;
    int timeline_rc; /* -1: the timeline file could not be written */
};

/* Options of run_scenario_opts (run_scenario = {.progress = progress}). */
struct timeline_opts;
struct run_opts {
    bool progress;           /* progress line on stderr (ignored with `observe`) */
    size_t trace_capacity;   /* > 0: keep the last N event-trace records (sim/trace.h) */
    bool stop_on_failure;    /* stop at the first program returning non-zero */
    sim_progress_fn observe; /* called every `observe_every` events during the run */
    void *observe_arg;
    uint64_t observe_every;
    double watchdog_s;   /* spin watchdog of shared-object programs: 0 default, < 0 off */
    double wall_limit_s; /* > 0: stop after this much wall-clock time (result wall-limit) */
    const struct timeline_opts *timeline; /* --timeline / --trace (timeline.h), or NULL */
};

/* Build the world, start every program, run the simulation.  Fills the
 * outcome fields.  NULL with `why` filled if the world cannot be built. */
struct run *run_scenario(const struct scenario *s, bool progress, char *why, size_t why_len);
struct run *run_scenario_opts(const struct scenario *s, const struct run_opts *o, char *why,
                              size_t why_len);
void run_free(struct run *r);
/* A program or thread process of `pi` returned (keeps the live count). */
void run_process_finished(struct prog_inst *pi);
const char *run_result_name(enum run_result r);
int run_exit_code(enum run_result r);
double wall_seconds(void);

/* ---------------------------------------------------------------- traffic_cli.c */

struct json_writer;
/* `payload:` and `traffic:` of a scenario (after the topology is read). */
int scn_read_payload(struct scenario *s, struct cfg_node *root, struct cfg_error *err);
int scn_read_traffic(struct scenario *s, struct cfg_node *root, struct cfg_error *err);
/* topology.pfc and topology.ecn (switches; traffic_cli.c). */
int scn_read_lossless(struct scenario *s, struct cfg_node *topo, struct cfg_error *err);
/* The "traffic" object of the results, the summary table, the flows file. */
void traffic_json(struct json_writer *w, const struct run *r);
void traffic_print_summary(const struct run *r, FILE *out);
int traffic_write_outputs(const struct run *r, char *why, size_t why_len);
/* scenario.c helpers shared with traffic_cli.c: a probability (0.01, 1%)
 * and a host name h<i> (index, or -1). */
int scn_parse_prob(struct cfg_node *n, double *out, struct cfg_error *err);
long scn_host_index(const char *name, unsigned hosts);

/* ---------------------------------------------------------------- host_api.c */

/* Free the out-of-band board and the report tables of a run. */
void host_api_free_run(struct run *r);

/* ---------------------------------------------------------------- programs_load.c */

/* Resolve the `program:` value `name` (node `at` for errors): a built-in
 * (program_find) or a shared object (contains '/' or ends in .so),
 * relative to the directory of `scenario_file`.  Sets p->main and
 * p->so_path; a new dlopen handle goes to *handle. */
int program_resolve(const char *name, const char *scenario_file, struct cfg_node *at,
                    struct scn_program *p, void **handle, struct cfg_error *err);
void programs_list(FILE *out);

/* ---------------------------------------------------------------- results.c */

int results_write_json(const struct run *r, const char *path, char *why, size_t why_len);
/* The outcome, simulated time and events, fabric impairments, then the
 * results tables: their contents with `tables`, else one line naming them
 * (programs print their own results as they run; -o writes them all). */
void results_print_summary(const struct run *r, bool tables, const char *json_path, FILE *out);
/* "12.345 us" style. */
void format_time(sim_time_t ps, char *buf, size_t len);

/* ---------------------------------------------------------------- bench.c */

int bench_main(int argc, char **argv);

/* ---------------------------------------------------------------- check_order.c */

/* `rnicsim check-order`; `prog` is argv[0] (for the reproduce command). */
int check_order_main(const char *prog, int argc, char **argv);

/* ---------------------------------------------------------------- table2.c */

/* `rnicsim table2`: Taranov et al.'s Table 2 measured for every channel. */
int table2_main(int argc, char **argv);

/* ---------------------------------------------------------------- sweep.c */

/* `rnicsim sweep` (runs `/proc/self/exe run` once per combination). */
int sweep_main(int argc, char **argv);

/* ---------------------------------------------------------------- json_read.c */

/* A parsed JSON value (json_read.c: strict RFC 8259, for sweep). */
enum jv_kind { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };
struct jv {
    enum jv_kind kind;
    bool b;      /* JV_BOOL */
    char *text;  /* JV_STRING: the UTF-8 text; JV_NUMBER: the number as written */
    size_t n;    /* JV_ARRAY / JV_OBJECT: items */
    char **keys; /* JV_OBJECT: keys, in document order */
    struct jv **items;
};

/* Parse `len` bytes of `text` (one value, optional white space around).
 * NULL with "JSON error at byte N: ..." in `why` on any error. */
struct jv *jv_parse(const char *text, size_t len, char *why, size_t why_len);
void jv_free(struct jv *v);
/* The first member `key` of an object; NULL if absent or not an object. */
const struct jv *jv_get(const struct jv *obj, const char *key);

/* ---------------------------------------------------------------- util */

/* Closest of `cands` (n strings) to `word`: case-insensitive edit distance,
 * at most one edit per three letters; NULL if none close. */
const char *suggest_word(const char *word, const char *const *cands, size_t n);
char *xstrdup_or_die(const char *s) __attribute__((returns_nonnull));
void *xcalloc_or_die(size_t n, size_t size) __attribute__((returns_nonnull));
void *xrealloc_or_die(void *p, size_t size) __attribute__((returns_nonnull));
/* Write `w` as one POSIX shell word (single-quoted unless it is plain). */
void shell_word(FILE *out, const char *w);
/* The one option parser of every command (run, sweep, check-order, emulate,
 * rnicsimd): argv[*i] is `name`: "--opt VALUE" (advances *i), "--opt=VALUE",
 * or for a one-letter option "-jVALUE".  NULL if argv[*i] is another option;
 * NULL with *missing set when the value is absent. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, bool *missing);
/* A new string formatted like printf (exits when out of memory). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2), returns_nonnull));

/* Start `exe args...` (NULL-terminated) with stdin from /dev/null and
 * stdout + stderr to `log` (NULL: inherited): the pid, or -1 with errno. */
pid_t rn_spawn(const char *exe, const char *const *args, const char *log);
/* A waitpid status as an exit status (128 + signal when killed). */
int rn_wait_status(int st);

/* ---------------------------------------------------------------- validate.c */

/* `rnicsim validate`: published data points against the model. */
int validate_main(int argc, char **argv);

/* ---------------------------------------------------------------- datadir.c */

/* The directories that may hold the files rnicsim ships with (profiles/,
 * tools/plot_*.py), most specific first: $RNICSIM_DATA_DIR, the installed
 * share/rnicsim next to the executable, the source tree, the executable's
 * parent.  Fills `dirs` with new strings (the caller frees each). */
#define RNICSIM_MAX_DATA_DIRS 4
size_t rnicsim_data_dirs(char *dirs[RNICSIM_MAX_DATA_DIRS]);
/* The first readable `<data dir>/<rel>` (a new string), or NULL. */
char *rnicsim_find_data(const char *rel);

#endif /* RNICSIM_TOOL_H */
