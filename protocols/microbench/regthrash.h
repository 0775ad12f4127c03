/* Memory registration cost and the registration-thrash load (issue 11):
 * a program that registers and deregisters (or re-registers) a buffer in
 * a loop, measuring what each call costs.  Written against
 * <infiniband/verbs.h> and <rnicsim/host.h> only. */
#ifndef RNICSIM_PROTOCOLS_REGTHRASH_H
#define RNICSIM_PROTOCOLS_REGTHRASH_H

/* Entry point, an ordinary main().  Returns 0 on success, 1 on a verbs
 * error, 2 on a usage error.  `--help` lists the options. */
int regthrash_main(int argc, char **argv);

#endif /* RNICSIM_PROTOCOLS_REGTHRASH_H */
