#!/usr/bin/env bash
# chute.config's log_format, log_file and listen.mixed: bad values are named
# with file:line; a good bundle checks without opening its log file
# (`chute check` writes nowhere).
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

chute check config-log-format
expect "log_format: a value that is not text or json" 1 "" \
    'chute: config-log-format/main.lua:3: chute.config: log_format: "xml" is not text or json'
chute check config-mixed-http
expect "listen.mixed on listen.http's port (one of them the wildcard)" 1 "" \
    "chute: config-mixed-http/main.lua:2: chute.config: listen.mixed (0.0.0.0:7890) and listen.http (127.0.0.1:7890) share a port: the mixed port already serves SOCKS5 and HTTP; drop listen.http or move it"
rm -f "$BUNDLES/config-log-ok/chute.log"
chute check config-log-ok
expect "log_format json, log_file and a mixed port with users pass check" 0 "ok: config-log-ok" ""
if [ -e "$BUNDLES/config-log-ok/chute.log" ]; then
    echo "FAIL chute check created the bundle's log_file"
    rm -f "$BUNDLES/config-log-ok/chute.log"
    failed=1
else
    echo "ok   chute check did not create the log file"
fi
exit $failed
