#!/usr/bin/env bash
# Every script in scripts/ answers --help with its usage and exit 0, and
# does nothing else: no build, no install, nothing left in TMPDIR or in the
# source tree. (scripts/package --help used to start a real package build
# and leave tfrecordfs-package-0/ and its lock file in /tmp.)
#
#   tests/scripts/scripts_help_test.sh SOURCE_ROOT
set -euo pipefail
root=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
before=$(ls -A "$root")
failed=0
fail() {
  echo "FAIL: scripts/$name --help: $*" >&2
  failed=1
  this_failed=1
}
for script in "$root"/scripts/*; do
  [ -f "$script" ] && [ -x "$script" ] || continue
  name=$(basename "$script")
  mkdir "$tmp/t"
  this_failed=0
  rc=0
  # A script that ignores --help and starts its real work is stopped here.
  (cd "$tmp" && TMPDIR="$tmp/t" BUILD_DIR="$tmp/t/build" timeout 20 "$script" --help \
    </dev/null >"$tmp/out" 2>"$tmp/err") || rc=$?
  [ "$rc" -eq 0 ] || fail "exit status $rc"
  grep -q "scripts/$name" "$tmp/out" || fail "no usage line naming scripts/$name"
  [ ! -s "$tmp/err" ] || fail "wrote to stderr: $(head -3 "$tmp/err")"
  left=$(ls -A "$tmp/t")
  [ -z "$left" ] || fail "left in TMPDIR: $left"
  rm -rf "$tmp/t"
  [ "$this_failed" -eq 1 ] || echo "ok: scripts/$name --help"
done
after=$(ls -A "$root")
if [ "$before" != "$after" ]; then
  name='*'
  fail "the source tree changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]')"
fi
exit "$failed"
