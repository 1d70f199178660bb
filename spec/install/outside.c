/* A program outside chute's tree, built only from the installed header and
 * pkg-config (spec/install/outside.sh): the embedding API links and works. */
#include <chute/chute.h>
#include <stdio.h>
#include <string.h>

static void
on_out(void *arg, const struct chute_packet *p, size_t n)
{
}

int
main(void)
{
    chute_engine *e;
    struct chute_options o = {.packets_out = on_out, .queue = 16, .batch = 4};
    char err[256];
    if (chute_engine_new(&e, &o) != 0)
        return 1;
    if (chute_engine_load_string(e, "require('chute').config{}", err, sizeof(err)) != 0) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    unsigned char pkt[40] = {0x45};
    struct chute_packet p[32];
    for (int i = 0; i < 32; i++)
        p[i] = (struct chute_packet){pkt, sizeof(pkt)};
    int a = chute_engine_packets_in(e, p, 32), b = chute_engine_packets_in(e, p, 1);
    chute_engine_free(e);
    printf("chute %s taken %d then %d\n", chute_version(), a, b);
    return a == 20 && b == CHUTE_ERR_FULL ? 0 : 1;
}
