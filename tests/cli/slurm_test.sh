#!/usr/bin/env bash
# A real job runner, end to end (issue 37): a one-node Slurm cluster from
# Debian's packages (slurm-wlm, munge; scripts/setup installs them), started
# here on 127.0.0.1 with its own slurm.conf and munge key in a temporary
# folder, runs `tfrecordfs reshard --shuffle` as an array job
# (`sbatch --array=0-3 --wait`: the first pass, then the second), then
# --finalize; the output is compared byte for byte with one process's
# reshard and read back record by record by tests/cli/tfrecord_check.py.
# `verify` and `count` run as arrays too; then the shuffle again over an
# s3:// prefix of the project's S3 test server. Every daemon started here is
# stopped at the end, whatever happens.
#
#   tests/cli/slurm_test.sh        (TFRECORDFS_BIN and TFRECORDFS_GEN set)
#
# Exit 77 (a SKIP) when not root or when the packages are missing.
set -euo pipefail
for a in "$@"; do
  case "$a" in -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
done
here=$(cd "$(dirname "$0")" && pwd)
: "${TFRECORDFS_BIN:?TFRECORDFS_BIN must be set}" "${TFRECORDFS_GEN:?TFRECORDFS_GEN must be set}"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: not root (slurmd and munged run as root here)"; exit 77
fi
for tool in slurmctld slurmd sbatch sinfo munged mungekey; do
  if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ]; then
    echo "SKIP: $tool is missing (apt-get install slurm-wlm munge; scripts/setup does)"; exit 77
  fi
done
PATH=$PATH:/usr/sbin

T=$(mktemp -d /tmp/slurm_test.XXXXXX)
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
    for log in "$T"/*.log "$T"/job-*.out; do
      [ -f "$log" ] && { echo "---- $log"; tail -n 30 "$log"; }
    done
  fi
  rm -rf "$T"
  exit "$status"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Free TCP ports for slurmctld and slurmd.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

host=$(hostname -s)
mkdir -p "$T/state" "$T/spool" "$T/munge"
chmod 755 "$T/munge"
mungekey --create --keyfile="$T/munge/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$T/munge/munge.key"
munged --foreground --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.sock" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/seed" --log-file="$T/munged.log" \
  >"$T/munged.out.log" 2>&1 &
pids+=($!)

cat > "$T/slurm.conf" <<EOF
ClusterName=tfrtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# MinJobAge=0: finished jobs are never purged, so `sbatch --wait` keeps
# polling every 2 s (it backs off to 8 s and 32 s when MinJobAge >= 6; with
# the default 300 each array cost 10 s of waiting instead of 4).
MinJobAge=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

# munged's socket, then the controller and the node daemon (foreground, so
# that they are ours to stop).
for _ in $(seq 100); do [ -S "$T/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.sock" ] || fail "munged did not start"
slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -N "$host" -f "$T/slurm.conf" >"$T/slurmd.out.log" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 300); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n 1 || true)
  case "$state" in idle | mix | alloc) break ;; esac
  sleep 0.2
done
case "$state" in idle | mix | alloc) ;; *) fail "the Slurm node did not come up (state '$state')" ;; esac

# The dataset: 8 plain and 2 GZIP shards.
export XDG_CACHE_HOME="$T/cache"
mkdir -p "$T/src"
"$TFRECORDFS_GEN" synthetic "$T/src/plain" --records 1600 --shards 8 --bytes 300 --prefix a
"$TFRECORDFS_GEN" synthetic "$T/src/gz" --records 400 --shards 2 --bytes 300 --prefix b \
  --compression gzip
args=(reshard "$T/src" -o "$T/out" --shuffle --seed 2024 --shards 5 -q)

cat > "$T/job.sh" <<EOF
#!/bin/bash
exec "$TFRECORDFS_BIN" "\$@"
EOF
chmod +x "$T/job.sh"

# array JOBNAME ARGS...: one array job of 4 tasks, waited for; every task
# must succeed and say where its part came from.
array() {
  local name=$1
  shift
  sbatch --array=0-3 --wait --job-name="$name" --chdir="$T" -o "$T/job-$name-%a.out" \
    "$T/job.sh" "$@" >/dev/null || fail "sbatch $name failed"
  for k in 0 1 2 3; do
    grep -q "part $k/4 (from SLURM_ARRAY_TASK_ID=$k" "$T/job-$name-$k.out" ||
      fail "$name task $k: $(cat "$T/job-$name-$k.out")"
  done
}

array count count "$T/src" --json
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
total = 0
for k in range(4):
    text = open(f"{t}/job-count-{k}.out").read()
    total += json.loads(text[text.index("{"):text.rindex("}") + 1])["records"]
assert total == 2000, total
EOF
array verify verify "$T/src" -q
array map "${args[@]}" --pass map
array reduce "${args[@]}" --pass reduce
"$TFRECORDFS_BIN" "${args[@]}" --finalize > "$T/finalize.out" ||
  fail "finalize: $(cat "$T/finalize.out")"
grep -q "from 4 part(s)" "$T/finalize.out" || fail "finalize said: $(cat "$T/finalize.out")"

# One process: the same bytes.
"$TFRECORDFS_BIN" reshard "$T/src" -o "$T/one" --shuffle --seed 2024 --shards 5 -q >/dev/null
[ "$(ls "$T/out")" = "$(ls "$T/one")" ] || fail "outputs differ: $(ls "$T/out") / $(ls "$T/one")"
for f in "$T/one"/*; do cmp "$f" "$T/out/$(basename "$f")" || fail "$(basename "$f") differs"; done
# Record by record, by the independent reader: every source record once.
python3 - "$T" "$here" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[2])
import tfrecord_check as tc
t = sys.argv[1]
def records(d):
    out = []
    for root, _, files in sorted(os.walk(d)):
        for f in sorted(files):
            out.extend(tc.read_records(os.path.join(root, f)))
    return out
src, got = records(f"{t}/src"), records(f"{t}/out")
assert len(got) == 2000 and sorted(got) == sorted(src), (len(got), len(src))
assert got != src
EOF
# The same over an s3:// prefix of the project's S3 test server
# (tests/objstore/object_server.py, anonymous), the jobs reaching it through
# the environment sbatch passes on.
if [ -x /usr/bin/python3 ]; then
  mkdir -p "$T/served/b"
  cp -r "$T/src" "$T/served/b/data"
  coproc SERVER { exec /usr/bin/python3 "$here/../objstore/object_server.py" \
    --root "$T/served" --log "$T/server.log" --max-requests 100000; }
  pids+=("$SERVER_PID")
  read -r port <&"${SERVER[0]}"
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_NO_SIGN_REQUEST=true NO_GCE_CHECK=true
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
  # Into a prefix of the same bucket: the map's runs and the parts'
  # shards are objects, --finalize copies them to their names server-side.
  s3args=(reshard s3://b/data -o s3://b/s3out/ --shuffle --seed 2024 --shards 5 -q)
  array s3map "${s3args[@]}" --pass map
  array s3reduce "${s3args[@]}" --pass reduce
  "$TFRECORDFS_BIN" "${s3args[@]}" --finalize > "$T/s3finalize.out" ||
    fail "s3 finalize: $(cat "$T/s3finalize.out")"
  # The order depends on the shards' paths below the SOURCE: the bucket's
  # copy gives the local dataset's bytes.
  for f in "$T/one"/*; do
    cmp "$f" "$T/served/b/s3out/$(basename "$f")" || fail "s3: $(basename "$f") differs"
  done
  left=$(find "$T/served/b/s3out" -type f | grep -c /.tfrecordfs-parts/ || true)
  [ "$left" = 0 ] || fail "finalize left $left intermediate object(s)"
  grep -q "GET /b/data/" "$T/server.log" || fail "the server saw no GET of the shards"
else
  echo "note: no /usr/bin/python3 for the S3 test server; the s3:// run is skipped"
fi
echo "OK: count, verify and a two-pass shuffle as Slurm arrays of 4 (local, and s3:// into an s3:// prefix), finalized, byte-identical"
