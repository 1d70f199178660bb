#ifndef CHUTE_SPEC_FUZZ_H
#define CHUTE_SPEC_FUZZ_H

/* What every libFuzzer target in spec/fuzz shares: the entry point's
 * prototype and CHECK(), an invariant that holds in every build. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Not assert(): Release builds define NDEBUG and would drop the checks.
 * The failed condition is printed before the abort, for the crash log. */
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
