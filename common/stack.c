/* Whether memory lies on the calling thread's stack (stack.h). */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE /* pthread_get_stackaddr_np */
#else
#define _GNU_SOURCE /* pthread_getattr_np */
#endif
#include "stack.h"

#include <pthread.h>
#include <stdint.h>

/* The stack of the calling thread, [*low, *high); false where the system
 * cannot say. */
static bool thread_stack(uintptr_t *low, uintptr_t *high)
{
#if defined(__APPLE__)
    pthread_t self = pthread_self();
    *high = (uintptr_t)pthread_get_stackaddr_np(self);
    *low = *high - pthread_get_stacksize_np(self);
    return true;
#elif defined(__GLIBC__)
    pthread_attr_t attributes;
    void *start = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attributes) != 0)
        return false;
    bool found = pthread_attr_getstack(&attributes, &start, &size) == 0;
    pthread_attr_destroy(&attributes);
    *low = (uintptr_t)start;
    *high = *low + size;
    return found;
#else
    (void)low, (void)high;
    return false;
#endif
}

static bool main_noted, main_found;
static pthread_t main_thread;
static uintptr_t main_low, main_high;

void stack_find_main(void)
{
    if (main_noted)
        return;
    main_noted = true;
    main_thread = pthread_self();
    main_found = thread_stack(&main_low, &main_high);
}

bool stack_holds(const void *address)
{
    uintptr_t low, high, at = (uintptr_t)address;
    if (main_noted && pthread_equal(main_thread, pthread_self())) {
        if (!main_found)
            return false;
        low = main_low;
        high = main_high;
    } else if (!thread_stack(&low, &high)) {
        return false;
    }
    return at >= low && at < high;
}
