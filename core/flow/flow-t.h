#ifndef CHUTE_FLOW_FLOW_T_H
#define CHUTE_FLOW_FLOW_T_H

#include <stdint.h>

/* Where a flow wants to go: an IP literal or a name still to resolve. */
enum flow_addr_kind {
    FLOW_ADDR_NONE = 0,
    FLOW_ADDR_IP4,
    FLOW_ADDR_IP6,
    FLOW_ADDR_NAME,
};

#define FLOW_NAME_MAX 255

struct flow_addr {
    enum flow_addr_kind kind;
    uint16_t port;              /* host order */
    uint8_t ip[16];             /* IP4: first 4 bytes, network order */
    uint8_t name_len;
    char name[FLOW_NAME_MAX + 1]; /* NAME: NUL-terminated, as received */
};

struct flow;
struct flow_table;

#endif
