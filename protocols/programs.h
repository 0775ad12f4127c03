/* Built-in programs: protocol drivers compiled into the rnicsim command.
 *
 * A program is an ordinary `main(argc, argv)` written against
 * <infiniband/verbs.h> and <rnicsim/host.h> only.  A scenario places
 * programs on hosts by name; names not found here are loaded from a shared
 * object whose exported `main` is the entry point (tools/rnicsim). */
#ifndef RNICSIM_PROGRAMS_H
#define RNICSIM_PROGRAMS_H

struct program_def {
    const char *name;                   /* as written in scenarios */
    int (*main)(int argc, char **argv); /* argv[0] is the name */
    const char *summary;                /* one line for `rnicsim programs` */
};

/* Terminated by an entry with name == NULL. */
extern const struct program_def protocol_programs[];

const struct program_def *program_find(const char *name);

#endif /* RNICSIM_PROGRAMS_H */
