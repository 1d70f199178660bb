#!/usr/bin/env bash
# examples/import as it ships: config.yaml run in place by chute.clash with
# Lua around it (its own chute.config and route()), and the same config
# through `chute import`.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
EX=$CHUTE_TOP/examples/import

chute check "$EX"
[ $rc -eq 0 ] && echo "ok   examples/import loads" || { echo "FAIL examples/import: $log"; failed=1; }
case $log in *"chute.clash: config.yaml:27: group 'Proxy': member 'auto' is a group"*)
    echo "ok   the flattened group is noted with config.yaml's line" ;;
*) echo "FAIL no note for the group of groups: $log"; failed=1 ;; esac

routes() { # DEST WANT: the decision and its rule (the log's warnings are checked above)
    chute route "$EX" "$1"
    if [ $rc -eq 0 ] && [ "$out" == "$2" ]; then echo "ok   examples/import: $1 -> ${2%%$T*}"
    else echo "FAIL examples/import: $1: exit $rc, '$out', want '$2'"; failed=1; fi
}
routes x.corp.example "DIRECT${T}route"
routes ads.doubleclick.net "REJECT${T}route rule 1 rules/ads.yaml:2"
routes api.github.com "Proxy${T}route rule 2 DOMAIN-SUFFIX,github.com"
routes 192.168.1.1:80 "DIRECT${T}route rule 3 IP-CIDR,192.168.0.0/16"
routes 198.51.100.1 "DIRECT${T}route rule 5 FINAL"

(cd "$EX" && "$CHUTE" import --quiet config.yaml -o "$tmp/b") >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q 'chute.group "Proxy" { type = "fallback", proxies = { "hk", "jp", "DIRECT" }' "$tmp/b/main.lua" \
    && grep -q 'listen = { mixed = "127.0.0.1:7890" }' "$tmp/b/main.lua" && [ -f "$tmp/b/rules/ads.yaml" ]; then
    echo "ok   chute import writes the same config out as a bundle"
else
    echo "FAIL chute import of examples/import: $(cat "$tmp/out")"; cat "$tmp/b/main.lua"; failed=1
fi
exit $failed
