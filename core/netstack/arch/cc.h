#ifndef CHUTE_LWIP_ARCH_CC_H
#define CHUTE_LWIP_ARCH_CC_H

#include <stdio.h>
#include <stdlib.h>

/* glibc already defines these with the same values. */
#ifndef BYTE_ORDER
#define BYTE_ORDER LITTLE_ENDIAN
#endif

#define LWIP_RAND() ((u32_t)random())
#define LWIP_PLATFORM_DIAG(x) do { printf x; } while (0)
#define LWIP_PLATFORM_ASSERT(x) do { fprintf(stderr, "lwip assert: %s\n", x); abort(); } while (0)

#endif
