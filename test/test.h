/* Minimal test harness: CHECK* record a failure and go on; main returns
 * test_summary(), which prints "N passed, N failed" and the exit code. */
#ifndef RNICSIM_TEST_H
#define RNICSIM_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static unsigned test_passed_, test_failed_;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                           \
        if (a_ == b_) {                                                                            \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%" PRIu64 " != %" PRIu64 ")\n",        \
                    __FILE__, __LINE__, #a, #b, a_, b_);                                           \
        }                                                                                          \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (h_ && strstr(h_, n_)) {                                                                \
            test_passed_++;                                                                        \
        } else {                                                                                   \
            test_failed_++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" does not contain \"%s\"\n", __FILE__,     \
                    __LINE__, h_ ? h_ : "(null)", n_);                                             \
        }                                                                                          \
    } while (0)

static inline int test_summary(void)
{
    printf("%u passed, %u failed\n", test_passed_, test_failed_);
    return test_failed_ || !test_passed_ ? 1 : 0;
}

#endif
