#!/usr/bin/env bash
# chute ca: init makes the local CA in the state folder (key 0600) and
# never overwrites it; export prints it as PEM or DER; path names it.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

check() { # WHAT: passes when the command before it succeeded
    if [ $? -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failed=1; fi
}

export CHUTE_STATE_DIR=$tmp/state/chute
chute ca path
expect "path names ca.pem in \$CHUTE_STATE_DIR" 0 "$CHUTE_STATE_DIR/ca.pem" ""

chute ca export
[ "$rc" = 1 ] && [[ $log == *"$CHUTE_STATE_DIR/ca.pem: cannot open it"*"chute ca init"* ]]
check "export before init fails, naming the file"

chute ca init
[ "$rc" = 0 ] && [[ $out == *"$CHUTE_STATE_DIR/ca.pem"*"update-ca-certificates"*"certutil"* ]]
check "init says where it wrote and how to trust it"
[ "$(stat -c %a "$CHUTE_STATE_DIR/ca.key")" = 600 ] && [ "$(stat -c %a "$CHUTE_STATE_DIR")" = 700 ]
check "the key is 0600, the folder 0700"
sum=$(sha256sum "$CHUTE_STATE_DIR/ca.pem" "$CHUTE_STATE_DIR/ca.key")

chute ca init
[ "$rc" = 1 ] && [[ $log == *"$CHUTE_STATE_DIR/ca.pem: already exists: refusing to overwrite"* ]] &&
    [ "$(sha256sum "$CHUTE_STATE_DIR/ca.pem" "$CHUTE_STATE_DIR/ca.key")" = "$sum" ]
check "a second init fails with exit 1 and leaves both files as they were"

chute ca export
[ "$rc" = 0 ] && [ "$out" = "$(cat "$CHUTE_STATE_DIR/ca.pem")" ]
check "export prints the certificate"
if command -v openssl >/dev/null; then
    printf '%s\n' "$out" | openssl x509 -noout -subject 2>&1 | grep -q "^subject=O = chute, CN = chute CA "
    check "export: openssl reads the PEM"
    (cd "$BUNDLES" && "$CHUTE" ca export --der) >"$tmp/ca.der" </dev/null
    openssl x509 -inform DER -in "$tmp/ca.der" -noout -ext basicConstraints 2>&1 | grep -q "CA:TRUE"
    check "export --der: openssl reads the DER"
    cmp -s "$tmp/ca.der" <(openssl x509 -in "$CHUTE_STATE_DIR/ca.pem" -outform DER)
    check "export --der is the same certificate"
elif [ "${CI:-}" = true ]; then
    echo "FAIL peer openssl is not on PATH (with CI=true a test that cannot run fails)"
    failed=1
else
    echo "SKIP openssl is not on PATH: the export checks do not run"
fi
if command -v script >/dev/null; then
    script -qec "$CHUTE ca export --der" /dev/null >"$tmp/tty.out" 2>&1
    tty_rc=$?
    [ "$tty_rc" = 1 ] && grep -q "refusing to write binary to a terminal" "$tmp/tty.out"
    check "export --der refuses a terminal"
fi

unset CHUTE_STATE_DIR
XDG_STATE_HOME=$tmp/xdg chute ca path
expect "path under \$XDG_STATE_HOME" 0 "$tmp/xdg/chute/ca.pem" ""
XDG_STATE_HOME= HOME=$tmp/home chute ca path
expect "path under \$HOME/.local/state" 0 "$tmp/home/.local/state/chute/ca.pem" ""
chute ca frob
[ "$rc" = 2 ] && [ -z "$out" ] && [[ $log == "usage: chute ca init | export [--der] | path"* ]]
check "an unknown subcommand is a usage error"

exit $failed
