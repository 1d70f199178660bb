#!/usr/bin/env bash
# The command line: check/run refuse a broken bundle with file:line, name a
# missing path, and version/--help/route answer as documented.
. "$(dirname "$0")/../lib.sh"

e2e_init

# cli OUT_PREFIX ARGS...: runs chute (10 s at most), stdout/stderr to files,
# and sets RC.
cli() {
    local out=$1
    shift
    RC=0
    timeout 10 "$CHUTE" "$@" >"$E2E_TMP/$out.out" 2>"$E2E_TMP/$out.err" || RC=$?
}

say "a bundle with a syntax error"
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end end
LUA
BAD_LINE=$(line_of 'end end')
cli check check "$BUNDLE"
assert_eq 1 "$RC" "chute check exits 1"
assert_match "main\.lua:$BAD_LINE:" "$(cat "$E2E_TMP/check.err")" "chute check prints main.lua:$BAD_LINE"
cli run run "$BUNDLE"
assert_eq 1 "$RC" "chute run refuses to start: exit 1"
assert_match "main\.lua:$BAD_LINE:" "$(cat "$E2E_TMP/run.err")" "chute run prints main.lua:$BAD_LINE"
check "chute run opened no listener"
! wait_port 127.0.0.1 "$SOCKS_PORT" 0.2 || fail "something listens on the bundle's SOCKS5 port"

say "a bundle whose chute.config is wrong (a runtime error, not a syntax one)"
bundle_write '  frobnicate = true,' <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
CFG_LINE=$(line_of 'frobnicate = true')
cli check check "$BUNDLE"
assert_eq 1 "$RC" "chute check exits 1"
assert_match "main\.lua:$CFG_LINE:.*frobnicate" "$(cat "$E2E_TMP/check.err")" \
    "the error names the unknown key and its own line, main.lua:$CFG_LINE"

say "missing paths"
cli check check "$E2E_TMP/no-such-bundle"
assert_eq 1 "$RC" "chute check on a missing folder exits 1"
assert_match "$E2E_TMP/no-such-bundle" "$(cat "$E2E_TMP/check.err")" "the error names the path"
mkdir -p "$E2E_TMP/empty"
cli check check "$E2E_TMP/empty"
assert_eq 1 "$RC" "chute check on a folder without main.lua exits 1"
assert_match "empty.*main\.lua" "$(cat "$E2E_TMP/check.err")" "the error names the folder and main.lua"
cli run run "$E2E_TMP/no-such-bundle"
assert_eq 1 "$RC" "chute run on a missing folder exits 1"
assert_match "$E2E_TMP/no-such-bundle" "$(cat "$E2E_TMP/run.err")" "the error names the path"

say "a good bundle"
bundle_write <<'LUA'
function chute.route(flow)
  if flow.host == "blocked.test" then return "REJECT" end
  return "DIRECT"
end
LUA
cli check check "$BUNDLE"
assert_eq 0 "$RC" "chute check exits 0"
assert_eq "ok: $BUNDLE" "$(cat "$E2E_TMP/check.out")" "chute check prints ok and the path"
cli route route "$BUNDLE" blocked.test:80
assert_eq "$(printf 'REJECT\troute')" "$(cat "$E2E_TMP/route.out")" "chute route blocked.test:80"
cli route route "$BUNDLE" 127.0.0.1:80
assert_eq "$(printf 'DIRECT\troute')" "$(cat "$E2E_TMP/route.out")" "chute route 127.0.0.1:80"
cli check check "$CHUTE_TOP/examples/default"
assert_eq 0 "$RC" "the shipped example bundle passes chute check"

say "version and help"
cli version version
assert_eq 0 "$RC" "chute version exits 0"
want=$(sed -n -E 's/^project\(chute VERSION ([0-9.]+).*/\1/p' "$CHUTE_TOP/CMakeLists.txt")
assert_eq "chute $want" "$(cat "$E2E_TMP/version.out")" "chute version prints the project's version"
cli help run --help
assert_eq 0 "$RC" "chute run --help exits 0"
assert_match '^usage: chute run ' "$(cat "$E2E_TMP/help.out")" "it prints run's usage on stdout"
cli help check --help
assert_eq 0 "$RC" "chute check --help exits 0"
cli bad frobnicate
assert_eq 2 "$RC" "an unknown command exits 2"
assert_match "unknown command 'frobnicate'" "$(cat "$E2E_TMP/bad.err")" "and says so"
cli bad run
assert_eq 2 "$RC" "chute run without a bundle exits 2 (usage)"
e2e_pass
