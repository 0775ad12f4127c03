/* Linked into every plug-in by rnicsim-cc (not part of rnicsim itself).
 *
 * libgcc.a defines a __wrap_pthread_create of its own (split-stack
 * support, generic-morestack-thread.o): with -Wl,--wrap=pthread_create the
 * linker would pull it into the plug-in and the program's threads would be
 * real threads.  This hidden definition is found first and forwards to
 * the simulated one the rnicsim executable exports (posix/thread.c). */
#include <pthread.h>

int rnicsim_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                           void *arg);

__attribute__((visibility("hidden"))) int
__wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *), void *arg);
__attribute__((visibility("hidden"))) int
__wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    return rnicsim_pthread_create(id, attr, start, arg);
}
