#!/bin/bash
# cmake --install into an empty prefix, then a program outside the tree
# built with `cc outside.c $(pkg-config --cflags --libs chute)` (shared) and
# against libchute.a (static); libchute.so exports only chute_* symbols.
# Needs CHUTE_BUILD (the build folder) and CHUTE_TOP.
set -euo pipefail
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$CHUTE_BUILD" --prefix "$prefix" >/dev/null
for f in bin/chute lib/libchute.a lib/libchute.so lib/libchute.so.0 include/chute/chute.h \
         lib/pkgconfig/chute.pc; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed in $prefix"; exit 1; }
done
soname=$(objdump -p "$prefix/lib/libchute.so" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libchute.so.0 ] || { echo "FAIL: soname '$soname', want libchute.so.0"; exit 1; }
# The exported (defined, global) symbols: chute_* only.
leaked=$(nm -D --defined-only "$prefix/lib/libchute.so" | awk '$2 ~ /^[A-Z]$/ {print $3}' | grep -v '^chute_' || true)
if [ -n "$leaked" ]; then
    echo "FAIL: libchute.so exports symbols outside chute_*:"; echo "$leaked" | head -20; exit 1
fi
nm -D --defined-only "$prefix/lib/libchute.so" | grep -q ' T chute_engine_packets_in$' ||
    { echo "FAIL: chute_engine_packets_in not exported"; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
src="$CHUTE_TOP/spec/install/outside.c"
cd "$prefix"
# shellcheck disable=SC2046
cc -Wall -Werror -o outside "$src" $(pkg-config --cflags --libs chute)
LD_LIBRARY_PATH="$prefix/lib" ./outside
# shellcheck disable=SC2046
cc -Wall -Werror -o outside-static "$src" $(pkg-config --cflags chute) "$prefix/lib/libchute.a" \
    $(pkg-config --static --libs chute | sed 's/-lchute//')
./outside-static
echo "PASS: installed, linked shared and static from $prefix"
