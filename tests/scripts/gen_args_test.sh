#!/usr/bin/env bash
# tfrecordfs-gen's arguments: --help (anywhere) prints the usage and exit 0,
# writing nothing; an OUTDIR that looks like a flag, or a flag without its
# value, is a usage error (exit 2) that writes nothing. (`tfrecordfs-gen
# sample --help` used to write a sample dataset into a folder named --help,
# which was committed to the repository once.)
#
#   tests/scripts/gen_args_test.sh TFRECORDFS_GEN
set -euo pipefail
gen=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() {  # check WANT_RC WHAT ARGS...: runs the generator in an empty folder
  local want=$1 what=$2 rc=0
  shift 2
  mkdir "$tmp/w"
  (cd "$tmp/w" && "$gen" "$@" >"$tmp/out" 2>"$tmp/err") || rc=$?
  local left
  left=$(ls -A "$tmp/w")
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: tfrecordfs-gen $* ($what): exit $rc, want $want; stderr: $(head -3 "$tmp/err")" >&2
    failed=1
  elif [ -n "$left" ]; then
    echo "FAIL: tfrecordfs-gen $* ($what): wrote $left" >&2
    failed=1
  else
    echo "ok: tfrecordfs-gen $* ($what)"
  fi
  rm -rf "$tmp/w"
}
check 0 "help after a mode" sample --help
grep -q "Usage: tfrecordfs-gen sample OUTDIR" "$tmp/out" || { echo "FAIL: no usage on stdout" >&2; failed=1; }
check 0 "help alone" --help
check 0 "-h" synthetic out -h
check 2 "OUTDIR like a flag" sample --records 5
check 2 "a flag without its value" sample out --records
check 2 "no OUTDIR" sample
# The arguments that are right still write the dataset.
check_written() {
  mkdir "$tmp/w"
  if ! (cd "$tmp/w" && "$gen" sample out --records 4 --shards 1 >/dev/null 2>&1) ||
    [ -z "$(ls -A "$tmp/w/out" 2>/dev/null)" ]; then
    echo "FAIL: tfrecordfs-gen sample out --records 4 --shards 1 wrote nothing" >&2
    failed=1
  else
    echo "ok: tfrecordfs-gen sample out --records 4 --shards 1 writes its dataset"
  fi
  rm -rf "$tmp/w"
}
check_written
exit "$failed"
