# Shared by spec/lua/NN-*.sh (sourced, not a test: ctest runs spec/lua/*.sh only).
# Env: CHUTE (the binary; default $CHUTE_TOP/build/chute) and CHUTE_TOP (the
# repo; default: two folders up from spec/lua).
set -u
export LC_ALL=C
CHUTE_TOP=${CHUTE_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
CHUTE=${CHUTE:-$CHUTE_TOP/build/chute}
case $CHUTE in /*) ;; *) CHUTE=$PWD/$CHUTE ;; esac
BUNDLES=$CHUTE_TOP/spec/lua/bundles
[ -x "$CHUTE" ] || { echo "FAIL no chute binary at $CHUTE (set CHUTE)"; exit 1; }
T=$'\t'
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# chute ARGS: runs the binary from the bundles folder, so messages name
# "<bundle>/main.lua"; sets $rc, $out and $log (stderr, timestamps cut).
chute() {
    (cd "$BUNDLES" && timeout 30 "$CHUTE" "$@") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12} //' "$tmp/err")
}

# expect WHAT RC STDOUT LOG: compares the last chute run exactly.
expect() {
    local got want
    got=$(printf 'exit %s\nstdout:\n%s\nlog:\n%s' "$rc" "$out" "$log")
    want=$(printf 'exit %s\nstdout:\n%s\nlog:\n%s' "$2" "$3" "$4")
    if [ "$got" == "$want" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1"
        diff <(echo "$want") <(echo "$got") | sed 's/^/     /'
        failed=1
    fi
}

# expect_fallback WHAT RULE LOG [POLICY]: the last `chute route` answered
# POLICY (default DIRECT) as the fallback after route() failed (RULE:
# "fallback: error", ...): it exits 3 and says so on stderr after LOG.
expect_fallback() {
    local p=${4:-DIRECT}
    expect "$1" 3 "$p${T}$2" "$3
chute route: route() failed ($2), so $p is only the fallback policy"
}
