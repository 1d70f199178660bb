#!/usr/bin/env bash
# The decision corpus through `chute route`: spec/fixtures/corpus (lists
# shaped like the public Surge and Clash/mihomo ones, two generated 100k-line
# lists) copied with its gen.sh run, every query of decisions.txt (the one
# spec/unit/script/corpus_test.c runs) decided as written, the skip warnings
# word for word, and a name resolved into lancidr.yaml shown as resolved.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

corpus=$CHUTE_TOP/spec/fixtures/corpus
BUNDLES=$tmp/b
mkdir -p "$BUNDLES/corpus"
cp -R "$corpus/." "$BUNDLES/corpus" && sh "$BUNDLES/corpus/gen.sh" "$BUNDLES/corpus/lists" ||
    { echo "FAIL copying the corpus"; exit 1; }

load_log="warn  chute.ruleset: lists/sukka-reject.list: 2 rules of types chute cannot evaluate left out (the first: lists/sukka-reject.list:10, USER-AGENT; strict = true makes this an error)
warn  chute.ruleset: lists/acl4ssr-classical.yaml: 2 rules of types chute cannot evaluate left out (the first: lists/acl4ssr-classical.yaml:10, GEOSITE without geo.geosite; strict = true makes this an error)
warn  chute.ruleset: lists/mihomo-classical.txt: 2 rules of types chute cannot evaluate left out (the first: lists/mihomo-classical.txt:6, SUB-RULE; strict = true makes this an error)"

chute check corpus
expect "the corpus loads, one warning per list with rules it cannot evaluate" 0 "ok: corpus" "$load_log"

n=0
while IFS= read -r line; do
    case $line in '' | '#'*) continue ;; esac
    query=${line%% -> *} want=${line#* -> }
    set -- $query
    dest=$1
    shift
    args=() resolves=
    for opt; do
        case $opt in
        inbound=http-plain) continue 2 ;; # no chute route flag: the unit test has it
        inbound=*) args+=(--inbound "${opt#inbound=}") ;;
        network=*) args+=(--network "${opt#network=}") ;;
        resolves=*) resolves=${opt#resolves=} ;;
        esac
    done
    chute route "${args[@]}" corpus "$dest"
    policy=${want%% *} why=
    [ "$want" != "$policy" ] && why=" ${want#* }"
    got=$(printf '%s\n' "$out" | cut -f1,2)
    ok=1
    [ "$rc" = 0 ] && [ "$got" == "$policy${T}route$why" ] || ok=0
    # A name that reached lancidr.yaml says what it resolved to.
    if [ -n "$resolves" ] && [ "$(printf '%s\n' "$out" | cut -f3)" != "resolved $dest: $resolves" ]; then
        ok=0
    fi
    n=$((n + 1))
    if [ $ok = 0 ]; then
        echo "FAIL $query -> $want"
        printf '     exit %s, got: %s\n' "$rc" "$out"
        failed=1
    fi
done <"$corpus/decisions.txt"
echo "ran  $n corpus queries through chute route"

exit $failed
