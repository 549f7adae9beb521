#!/usr/bin/env bash
# tools/format.sh --check, CI's format stage: in a scratch folder (no git,
# as an unpacked archive) with the source tree's .clang-format and one C++
# file, a misformatted file fails the check and is named; after
# tools/format.sh it passes, and a build folder's files are left alone; and
# the source tree itself (a git clone, or not) passes. Skipped (77) without
# clang-format.
# usage: test_format.sh SOURCE-DIR
set -u
src=$1
fail() { echo "FAIL: $*"; exit 1; }
command -v clang-format > /dev/null || { echo "skip: no clang-format"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tools"
cp "$src/.clang-format" "$tmp/"
cp "$src/tools/format.sh" "$tmp/tools/"
printf 'int  f( int x ){return x+1;}\n' > "$tmp/bad.cpp"
mkdir -p "$tmp/build" && printf 'int  g( ){return 0;}\n' > "$tmp/build/ignored.cpp"
out=$("$tmp/tools/format.sh" --check 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a misformatted file: exit $rc, not 1: $out"
grep -qx '  bad.cpp' <<<"$out" || fail "the check did not name bad.cpp on a line of its own: $out"
"$tmp/tools/format.sh" || fail "tools/format.sh failed"
"$tmp/tools/format.sh" --check > /dev/null 2>&1 || fail "the check failed after formatting"
grep -q 'int  g( )' "$tmp/build/ignored.cpp" || fail "tools/format.sh formatted a file under build/"
echo "ok   a misformatted file fails the check and is named; formatted, it passes"
"$src/tools/format.sh" --check || fail "the source tree is not formatted (run tools/format.sh)"
echo "ok   the source tree is formatted"
