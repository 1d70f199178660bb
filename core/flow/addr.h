#ifndef CHUTE_FLOW_ADDR_H
#define CHUTE_FLOW_ADDR_H

/* The flow's address and policy vocabulary, all core/outbound may see of
 * core/flow (it sits below flow): destinations, built-in policies, names. */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "flow/flow-t.h"

/* Policies built into the engine; proxies and groups will follow these ids. */
enum flow_policy { FLOW_POLICY_DIRECT = 0, FLOW_POLICY_REJECT, FLOW_POLICY__BUILTIN };

const char *flow_policy_name(int policy);
/* A copy of |name| that lives as long as the process: one per distinct
 * name, so flows can keep policy names across reloads. */
const char *flow_policy_intern(const char *name);
/* Writes the host part of |a| (no port, no brackets) into |buf|. */
void flow_addr_host(const struct flow_addr *a, char *buf, size_t len);
/* Writes "host:port" ("[v6]:port") into |buf|. */
void flow_addr_format(const struct flow_addr *a, char *buf, size_t len);
void flow_sockaddr_format(const struct sockaddr_storage *ss, char *buf, size_t len);
/* Sets |ss| to IPv|version| address |ip| (4 or 16 bytes) and |port| (host order). */
void flow_sockaddr_set(struct sockaddr_storage *ss, int version, const uint8_t *ip, uint16_t port);
/* The 16-byte key of |ss|'s address for per-source caps: IPv6 as is,
 * IPv4 v4-mapped (::ffff:a.b.c.d), anything else all zero. */
void flow_sockaddr_key(uint8_t key[16], const struct sockaddr_storage *ss);
/* Parses an IP literal (v4 or v6, no brackets) into |a|; returns 0 or -1. */
int flow_addr_from_ip(struct flow_addr *a, const char *ip, size_t len, uint16_t port);
/* Sets |a| to an IP literal if |host| is one, else to a name. -1 if too long
 * or empty. */
int flow_addr_from_host(struct flow_addr *a, const char *host, size_t len, uint16_t port);

#endif
