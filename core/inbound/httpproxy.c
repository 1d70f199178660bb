#include <unistd.h>

#include "inbound/inbound.h"

/* Placeholder until the HTTP proxy lands: refuse politely. */
void
inbound_http_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    static const char resp[] = "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)!write(fd, resp, sizeof(resp) - 1);
    close(fd);
}
