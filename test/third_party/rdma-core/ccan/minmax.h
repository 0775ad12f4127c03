/* Stand-in for rdma-core's ccan/minmax.h: min() and max() of two values of
 * the same type, each evaluated once (rc_pingpong.c uses them). */
#ifndef RNICSIM_STANDIN_CCAN_MINMAX_H
#define RNICSIM_STANDIN_CCAN_MINMAX_H

#include "config.h"

#define min(a, b)                                                                                  \
    ({                                                                                             \
        __typeof__(a) min_a_ = (a);                                                                \
        __typeof__(b) min_b_ = (b);                                                                \
        min_a_ < min_b_ ? min_a_ : min_b_;                                                         \
    })
#define max(a, b)                                                                                  \
    ({                                                                                             \
        __typeof__(a) max_a_ = (a);                                                                \
        __typeof__(b) max_b_ = (b);                                                                \
        max_a_ > max_b_ ? max_a_ : max_b_;                                                         \
    })

#endif
