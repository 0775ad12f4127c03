/* Stand-in for rdma-core's util/compiler.h: the annotations the examples
 * use (asyncwatch.c: SWITCH_FALLTHROUGH). */
#ifndef RNICSIM_STANDIN_UTIL_COMPILER_H
#define RNICSIM_STANDIN_UTIL_COMPILER_H

#define SWITCH_FALLTHROUGH __attribute__((fallthrough))
#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

#endif
