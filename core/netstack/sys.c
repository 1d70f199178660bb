#include <time.h>

#include "lwip/sys.h"

#include "ip/ip.h"

/* lwIP's clock (NO_SYS=1): milliseconds, monotonic. */
u32_t
sys_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (u32_t)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* LWIP_CHKSUM: the ones'-complement sum of |len| bytes, not inverted, as
 * the 16-bit value lwIP expects (summed in memory order, like
 * lwip_standard_chksum). */
unsigned short
netstack_lwip_chksum(const void *data, int len)
{
    return (unsigned short)ip_csum_add(0, data, (size_t)len);
}
