/* TEMPORARY (lead's integration in progress): weak stand-in until relay_stream.c lands. */
#include "flow/relay.h"
#include "outbound/stream.h"
#define W __attribute__((weak))
W int flow_relay_start_stream(struct flow_relay *r, struct ev_loop *loop, int client_fd, struct outbound_stream *up, const void *a, size_t al, const void *b, size_t bl, uint64_t *uc, uint64_t *dc, double idle, flow_relay_done_cb cb, void *arg) { (void)r; (void)loop; (void)client_fd; (void)up; (void)a; (void)al; (void)b; (void)bl; (void)uc; (void)dc; (void)idle; (void)cb; (void)arg; return -1; }
