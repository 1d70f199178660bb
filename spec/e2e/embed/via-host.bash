#!/usr/bin/env bash
# via-host.bash CASE: runs the suite spec/e2e/CASE.sh (tun/02-parallel,
# dns/10-tun-fake-ip, ...) through examples/embed/host with CHUTE_VIA_HOST=1
# (ctest: e2e/embed/via-host/CASE). A case must not pass on chute's own TUN
# instead: CHUTE is a stand-in that refuses `chute run` (other subcommands
# go to the real binary), and the host must have been started and been
# running: embed_host_start writes a line per start to CHUTE_VIA_HOST_MARK.
# Exit codes as the case's (0, 1, 77).
set -u
case=${1:?usage: via-host.bash CASE (e.g. tun/02-parallel)}
top=$(cd "$(dirname "$0")/../../.." && pwd)
src=$top/spec/e2e/$case.sh
[ -f "$src" ] || { echo "via-host: no suite $src" >&2; exit 1; }
real=${CHUTE:?CHUTE: the chute binary}
export HOST_BIN=${HOST_BIN:-$(dirname "$real")/embed-host}
dir=$(mktemp -d "${TMPDIR:-/tmp}/chute-via-host.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cat >"$dir/chute" <<STUB
#!/bin/sh
if [ "\${1:-}" = run ]; then
    echo "via-host: $case ran chute's own TUN (chute \$*) instead of examples/embed/host" | tee -a "$dir/refused" >&2
    exit 97
fi
exec "$real" "\$@"
STUB
chmod +x "$dir/chute"
: >"$dir/mark"
rc=0
CHUTE=$dir/chute CHUTE_VIA_HOST=1 CHUTE_VIA_HOST_MARK=$dir/mark bash "$src" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
if [ -s "$dir/refused" ]; then
    echo "via-host: FAIL: $case passed, but tried chute's own TUN: $(cat "$dir/refused")" >&2
    exit 1
fi
if ! grep -q "^host: tun " "$dir/mark"; then
    echo "via-host: FAIL: $case passed without starting examples/embed/host ($HOST_BIN)" >&2
    exit 1
fi
echo "via-host: $case ran through examples/embed/host ($(grep -c . "$dir/mark") start(s))"
