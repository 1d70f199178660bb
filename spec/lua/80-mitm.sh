#!/usr/bin/env bash
# Lua surface, MITM: mitm = {...} validation, chute.on_request/on_response
# registration errors and route()'s options. Each error names file:line.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

check_error() {
    chute check "$2"
    expect "$1" 1 "" "chute: $3"
}

check_error "a host pattern with a bad port names the line and the entry" mitm-bad-host \
    'mitm-bad-host/main.lua:4: chute.config: mitm.hosts: [2]: "api.example.net:70000": the port must be 1..65535 ("host:8443")'
check_error "an unknown mitm key is named with its path and the known keys" mitm-unknown-key \
    "mitm-unknown-key/main.lua:4: chute.config: unknown key 'mitm.skip_verify' (known: auto_bypass, block_quic, bypass_seconds, ca, ca_key, hosts, max_body, max_buffered, skip_verify_hosts)"
check_error "a URL pattern PCRE2 refuses: the call's line and PCRE2's reason" mitm-bad-pattern \
    'mitm-bad-pattern/main.lua:4: chute.on_request: bad pattern "^https://api\.example\.com/(v1": missing closing parenthesis at offset 30'
check_error "a CA without its key beside it names the path looked for" mitm-missing-key \
    "mitm-missing-key/main.lua:4: chute.config: mitm.ca_key (by default the .key beside mitm.ca): cannot read mitm-missing-key/certs/ca.key (No such file or directory)"
check_error "on_request assigned instead of called" mitm-hook-assign \
    "mitm-hook-assign/main.lua:4: chute.on_request is called, not assigned: chute.on_request(pattern, function(req) ... end [, opts])"

chute check mitm-ok
expect "every mitm key and both hooks load; skip_verify_hosts is warned" 0 "ok: mitm-ok" \
    "warn  mitm: certificate checks are off for self-signed.example.com (mitm.skip_verify_hosts): anyone on the path to those origins can read and change their traffic"

chute route mitm-ok plain.example.com
expect "route() with { mitm = false } still decides" 0 "DIRECT${T}route" \
    "warn  mitm: certificate checks are off for self-signed.example.com (mitm.skip_verify_hosts): anyone on the path to those origins can read and change their traffic"

chute route mitm-route-option example.com
expect_fallback "an unknown route() option: logged with route()'s line, the fallback decides" \
    "fallback: bad options" \
    "warn  flow 1: mitm-route-option/main.lua:4: route() returned an unknown option 'mitn' (options: mitm); using DIRECT"

exit $failed
