#ifndef CHUTE_HTTP_HTTP_INT_H
#define CHUTE_HTTP_HTTP_INT_H

/* Private to core/http: what its parsers and the forwarding rules share. */

#include <string.h>

/* Header names, methods and transfer codings are tokens (RFC 9110 §5.6.2). */
static inline int
http_is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

#endif
