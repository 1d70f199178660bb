#include <time.h>

#include "lwip/sys.h"

/* lwIP's clock (NO_SYS=1): milliseconds, monotonic. */
u32_t
sys_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (u32_t)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}
