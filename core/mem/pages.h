#ifndef CHUTE_MEM_PAGES_H
#define CHUTE_MEM_PAGES_H

/* Memory for a connection's big buffers that an idle connection writes a
 * page or two of (BearSSL's 33 KiB record buffer, nghttp2's 16 KiB frame
 * buffer): mapped per allocation, so pages never written are never
 * resident whatever the heap held there before, and freeing gives every
 * page back to the kernel at once (which also drops the secrets they held,
 * with no pass over them). Worth it from a few pages up (a map and an
 * unmap per connection); small things stay on the heap. */

#include <stddef.h>

/* |n| zeroed bytes, page-aligned; NULL when out of memory. */
void *mem_pages_alloc(size_t n);
/* Gives back what mem_pages_alloc(|n|) returned (NULL: nothing). */
void mem_pages_free(void *p, size_t n);

#endif
