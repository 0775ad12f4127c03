/* Stand-in for the config.h of rdma-core's own build, written for the
 * tests that compile rdma-core v44's libibverbs/examples unmodified as
 * rnicsim plug-ins (test/scenario/test_third_party_*.sh).  The examples
 * need nothing from it but the compiler facts ccan/minmax.h checks. */
#ifndef RNICSIM_STANDIN_RDMA_CORE_CONFIG_H
#define RNICSIM_STANDIN_RDMA_CORE_CONFIG_H

#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define PACKAGE_VERSION "44.0"

#endif
