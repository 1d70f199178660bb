#ifndef CHUTE_TUN_NETLINK_H
#define CHUTE_TUN_NETLINK_H

/* rtnetlink requests for the TUN device's addresses, routes and policy
 * rules: one request, one acknowledgement, no tool spawned. Folder-private. */

#include <stdint.h>

#include "ip/ip.h"

/* Each returns 0 or a negative errno. */
int tun_nl_addr(int ifindex, const struct ip_cidr *a);
/* A route to |dst| through |ifindex| in |table|. */
int tun_nl_route(int ifindex, const struct ip_cidr *dst, uint32_t table);
/* A policy rule at |prio|: to |dst| (NULL: any, of |family|), lookup |table|;
 * with |fwmark|, only packets without that mark ("not fwmark"). |add| 0
 * deletes the same rule. */
int tun_nl_rule(int add, int family, uint32_t prio, const struct ip_cidr *dst, uint32_t table,
                uint32_t fwmark);

#endif
