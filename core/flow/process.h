#ifndef CHUTE_FLOW_PROCESS_H
#define CHUTE_FLOW_PROCESS_H

/* Which local process owns a flow's client socket (Linux): the socket is
 * found with sock_diag by its 4-tuple, its owner by scanning /proc for the
 * socket's inode. Costly (a /proc walk): called only when a script reads
 * flow.process_name, process_path or uid, once per flow. */

#include <stdint.h>
#include <sys/types.h>

#include "flow/flow.h"

struct flow_process {
    uid_t uid;
    pid_t pid;        /* 0 when the socket was found but not its process */
    char name[64];    /* the base name of /proc/PID/exe, else of argv[0], else comm:
                       * the executable's real name, not the 15-byte comm */
    char path[512];   /* /proc/PID/exe */
};

/* Looks up the process behind |f|'s client socket: the socket from |f|->src
 * to |f|->local (the address the client connected to: the listener for
 * proxies, the destination for TUN flows). Returns 0 with |out| filled, or
 * -1 when the client is not a local socket (a routed host, a closed one). */
int flow_process_lookup(const struct flow *f, struct flow_process *out);

#endif
