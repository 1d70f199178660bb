#!/bin/bash
# cmake --install into an empty prefix puts the binary, the LuaLS stubs and
# the systemd unit chute@.service, whose ExecStart names the binary under
# that prefix; where systemd-analyze exists (Debian's systemd package),
# `systemd-analyze verify` accepts an instance of the unit. DESTDIR stages
# the files without changing the paths inside them.
# Needs CHUTE_BUILD (the build folder) and CHUTE_TOP.
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$CHUTE_BUILD" --prefix "$prefix" >/dev/null
unit=$prefix/lib/systemd/system/chute@.service
for f in bin/chute lib/systemd/system/chute@.service share/chute/meta/chute.lua; do
    [ -e "$prefix/$f" ] || fail "$f not installed in $prefix"
done
echo "check: the unit's ExecStart is the installed binary, given the bundle path"
grep -qx "ExecStart=$prefix/bin/chute run %f" "$unit" ||
    fail "ExecStart is '$(grep '^ExecStart=' "$unit")', want '$prefix/bin/chute run %f'"
echo "check: the unit's service settings"
for line in 'ExecReload=/bin/kill -HUP $MAINPID' 'Restart=on-failure' 'DynamicUser=yes' \
    'AmbientCapabilities=CAP_NET_ADMIN CAP_NET_BIND_SERVICE' \
    'CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_BIND_SERVICE' 'ProtectSystem=strict' \
    'StateDirectory=chute' 'Environment=CHUTE_STATE_DIR=%S/chute XDG_STATE_HOME=%S' \
    'NoNewPrivileges=yes' 'WantedBy=multi-user.target'; do
    grep -qxF "$line" "$unit" || fail "the unit lacks '$line'"
done
grep -q '@[A-Z_]*@' "$unit" && fail "an unfilled @VARIABLE@ in the unit: $(grep '@[A-Z_]*@' "$unit")"

echo "check: DESTDIR stages the files, the unit still names \$prefix/bin/chute"
DESTDIR=$tmp/stage cmake --install "$CHUTE_BUILD" --prefix /opt/chute >/dev/null
staged=$tmp/stage/opt/chute/lib/systemd/system/chute@.service
[ -e "$staged" ] || fail "DESTDIR: no $staged"
grep -qx "ExecStart=/opt/chute/bin/chute run %f" "$staged" ||
    fail "DESTDIR: ExecStart is '$(grep '^ExecStart=' "$staged")'"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    [ "${CI:-}" = true ] && fail "systemd-analyze is not on PATH (Debian package systemd)"
    echo "PASS (systemd-analyze not on PATH: Debian package systemd; the unit was not verified)"
    exit 0
fi
echo "check: systemd-analyze verify accepts chute@<escaped bundle path>.service"
# An instance, so %f expands to a path: the template beside it is found.
inst=$(systemd-escape --path /etc/chute/home)
mkdir -p "$tmp/units"
cp "$unit" "$tmp/units/chute@.service"
ln -s chute@.service "$tmp/units/chute@$inst.service"
out=$(systemd-analyze verify "$tmp/units/chute@$inst.service" 2>&1) ||
    fail "systemd-analyze verify: $out"
# Its complaints about our unit (not the machine's) count too.
if printf '%s\n' "$out" | grep -i 'chute@'; then
    fail "systemd-analyze verify warns about the unit"
fi
echo "check: verify refuses a unit whose ExecStart binary is missing (the check can fail)"
sed "s#^ExecStart=$prefix/bin/chute#ExecStart=$tmp/nowhere/chute#" "$unit" >"$tmp/units/chute@.service"
if systemd-analyze verify "$tmp/units/chute@$inst.service" >/dev/null 2>&1; then
    fail "systemd-analyze verify passed a unit whose binary does not exist"
fi
echo "PASS: installed into $prefix; chute@$inst.service verified"
