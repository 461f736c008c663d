#!/usr/bin/env bash
# A real single-node Slurm run of docs/cluster.md's job array (CTest: slurm_array, label cluster).
#
# Starts a private munged (key and socket in a temporary folder, run as user munge) and slurmctld + slurmd
# on this machine (a minimal slurm.conf in WORK_DIR pointed to by SLURM_CONF, free ports, accounting
# off), then does what docs/cluster.md tells a user to do, with the script taken from docs/cluster.md itself
# (only the array size, N, --cpus-per-task and --mem scaled down to this machine):
#   1. sbatch the 4-shard array, sbatch the dependent merge (--dependency=afterok);
#   2. scancel one array task while it runs (after it recorded something): the merge stays pending;
#   3. resubmit that index (sbatch --array=I), point the merge at it (scontrol update ... Dependency=);
#   4. check that the resubmitted task resumed (reused the killed task's records), that the merge ran once
#      every task succeeded, and that the merged folder equals an unsharded run of the same job
#      (compare_runs.py: records identical up to `seconds`, plan order, summary.csv, sweeps, figures).
# Every daemon is stopped by the PID in its pid file whatever happens (trap EXIT); a last check kills and
# reports (as a failure) any process left with this run's SLURM_CONF in its environment.
#
# Usage: slurm_array_test.sh ATTNSCOPE DATA_DIR CLUSTER_MD WORK_DIR PYTHON [FIGURES(0|1)]
# Exit status: 0 passed, 1 failed, 77 skipped (not root, slurm-wlm or munge missing, munged or the Slurm
# daemons cannot start here). ATTNSCOPE_REQUIRE_SLURM=1 turns a skip into a failure (for a CI machine that
# must run it). The transcript of the run (commands and what Slurm printed) is WORK_DIR/transcript.txt.
set -euo pipefail

if [ $# -lt 5 ]; then
  sed -n '2,22p' "$0"
  exit 2
fi
ATTNSCOPE=$(realpath "$1")
DATA=$(realpath "$2")
DOC=$(realpath "$3")
W=$(realpath -m "$4")
PY=$5
HERE=$(dirname "$(realpath "$0")")
FIGURES=${6:-1}
CONF=$W/slurm.conf
SHARDS=4            # the array: --array=0-3
KILL=1              # the task that is cancelled while it runs and resubmitted
PATH=$PATH:/usr/sbin:/sbin
export PATH

START=$SECONDS
log() { printf '[slurm_array %3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { log "FAILED: $*" >&2; exit 1; }
skip() {
  if [ "${ATTNSCOPE_REQUIRE_SLURM:-0}" = 1 ]; then
    fail "cannot run here (ATTNSCOPE_REQUIRE_SLURM=1 forbids skipping): $*"
  fi
  log "SKIPPED: $*"
  exit 77
}

# This run's processes (daemons, slurmstepd, jobs, clients) carry SLURM_CONF=$CONF in their environment;
# this shell does not (sl passes it per command), so `ours` lists exactly what this test started.
sl() { env SLURM_CONF="$CONF" "$@"; }
ours() {
  local d p
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = $$ ] && continue
    if { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
      [ "$(awk '{print $3}' "$d/stat" 2>/dev/null)" = Z ] || echo "$p"
    fi
  done
}
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# Stops the process whose PID is in pid file $1 (if it is ours): TERM, up to 10 s, then KILL.
stop_pidfile() {
  local pidfile=$1 name=$2 pid i
  [ -s "$pidfile" ] || return 0
  pid=$(tr -dc '0-9' <"$pidfile")
  [ -n "$pid" ] && alive "$pid" || return 0
  if ! { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
    log "$name: PID $pid in $pidfile is not this test's process; left alone"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    log "$name (PID $pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 20); do alive "$pid" || break; sleep 0.1; done
  fi
  log "stopped $name (PID $pid)"
}

MUNGE_DIR=""
STARTED=0
cleanup() {
  local rc=$? left i
  set +e
  trap - EXIT INT TERM HUP
  if [ "$STARTED" = 1 ]; then
    if [ -s "$W/slurmctld.pid" ] && alive "$(cat "$W/slurmctld.pid")"; then
      left=$(sl squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
      if [ -n "${left// /}" ]; then
        log "cancelling jobs still queued: $left"
        sl scancel $left
        for i in $(seq 100); do [ -z "$(sl squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
      fi
    fi
    stop_pidfile "$W/slurmd.pid" slurmd
    stop_pidfile "$W/slurmctld.pid" slurmctld
    [ -n "$MUNGE_DIR" ] && stop_pidfile "$MUNGE_DIR/munged.pid" munged
  fi
  left=$(ours | tr '\n' ' ')
  if [ -n "${left// /}" ]; then
    log "processes left by this run: $left; killing them"
    ps -o pid,ppid,stat,args -p "${left// /,}" 2>/dev/null | sed 's/^/    /'
    kill -KILL $left 2>/dev/null
    sleep 0.5
    [ "$rc" = 0 ] && rc=1
  fi
  if [ -n "$MUNGE_DIR" ] && [ -d "$MUNGE_DIR" ]; then
    mkdir -p "$W/logs" && cp "$MUNGE_DIR/munged.log" "$W/logs/" 2>/dev/null
    rm -rf "$MUNGE_DIR"
  fi
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for f in "$W"/logs/*.log "$W"/study/logs/*.log "$W"/study/slurm-*.out; do
      [ -f "$f" ] && { echo "---- tail $f"; tail -n 15 "$f"; }
    done
  fi
  if [ "$STARTED" = 1 ]; then
    log "done (exit $rc; daemons stopped, nothing of this run left running; transcript: $W/transcript.txt)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- Can this machine run it? -----------------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (it starts munged as user munge and slurmctld, slurmd as root)"
missing=()
for c in munged mungekey munge unmunge slurmctld slurmd sbatch squeue scancel scontrol sinfo runuser; do
  command -v "$c" >/dev/null || missing+=("$c")
done
[ ${#missing[@]} -eq 0 ] || skip "missing ${missing[*]}: apt-get install --no-install-recommends slurm-wlm munge (tools/install-deps.sh)"
id munge >/dev/null 2>&1 || skip "no user munge (the munge package creates it)"
[ -x "$ATTNSCOPE" ] || fail "$ATTNSCOPE: not an executable"

# Slurm variables of an enclosing job must not leak into this cluster's commands.
for v in $(compgen -e); do
  case $v in SLURM_* | SBATCH_* | SQUEUE_* | SCANCEL_* | SINFO_* | SCONTROL_* | SALLOC_* | SRUN_*) unset "$v" ;; esac
done

# Leftovers of an earlier run of this test that was killed (same SLURM_CONF path), then a fresh folder.
old=$(ours | tr '\n' ' ')
if [ -n "${old// /}" ]; then
  log "killing processes left by an earlier run: $old"
  kill -KILL $old 2>/dev/null || true
  sleep 1
fi
if [ -f "$W/munge_dir" ]; then
  old=$(cat "$W/munge_dir")
  case $old in /tmp/attnscope-munge.*) rm -rf "$old" ;; esac
fi
rm -rf "$W"
mkdir -p "$W/state" "$W/spool" "$W/logs" "$W/bin" "$W/study/samples"
TRANSCRIPT=$W/transcript.txt
: >"$TRANSCRIPT"
STARTED=1

# ---- The study: the bundled synthetic samples plus one larger file, every head, three mechanisms ----------
# The larger file (8 heads, N = 2048, ~1 s per unit) makes each shard run for seconds, so one can be
# cancelled while it runs; it is made by `attnscope synth` (deterministic).
cd "$W/study"
for f in gaussian lm_local1d lowrank vit_local2d; do cp "$DATA/$f.h5" samples/; done
"$ATTNSCOPE" synth --kind local1d --n 2048 --d 64 --heads 8 --seed 5 --out samples/xl_local1d.h5 >/dev/null
cat >study.toml <<'EOF'
# tests/cluster/slurm_array_test.sh: data/example_study.toml over samples/*.h5 (one larger file added)
inputs = ["samples/*.h5"]
q = "/q"
k = "/k"
heads = "all"
mechanisms = ["softmax", "linear", "mhla"]

[attention]
blocks = 16

[metrics]
top_k = 16

[[sweep]]
name = "first_n"
vary = "n=64,128,256"
subsample = "first"
heads = [0, 1]
EOF
if [ "$FIGURES" = 1 ]; then
  cat >>study.toml <<'EOF'

[[figure]]
view = "spectrum"
heads = [0]

[[figure]]
view = "curves"
sweep = "first_n"
metric = "rank"
log = true
EOF
fi
ln -s "$ATTNSCOPE" "$W/bin/attnscope"
export PATH="$W/bin:$PATH"   # the jobs call `attnscope` as docs/cluster.md does (sbatch exports PATH)

# The job script is docs/cluster.md's, scaled down: 4 shards, one CPU each, 500 MB.
awk '/^## Slurm job array/ {s = 1} s && /^```sh/ {c = 1; next} c && /^```/ {exit} c' "$DOC" >run_shards.doc.sh
grep -q '^#SBATCH --array=0-15' run_shards.doc.sh || fail "$DOC: the script has no '#SBATCH --array=0-15' (update this test)"
grep -q '^N=16 ' run_shards.doc.sh || fail "$DOC: the script does not set N=16 (update this test)"
grep -q 'attnscope batch study.toml --out "shards/\$I" --shard "\$I/\$N"' run_shards.doc.sh ||
  fail "$DOC: the script's batch command changed (update this test)"
sed -e 's/^#SBATCH --array=0-15 .*/#SBATCH --array=0-3              # 4 shards: I = 0..3/' \
    -e 's/^N=16 /N=4  /' \
    -e 's/^#SBATCH --cpus-per-task=[0-9]*/#SBATCH --cpus-per-task=1/' \
    -e 's/^#SBATCH --mem=.*/#SBATCH --mem=500M/' run_shards.doc.sh >run_shards.sh
log "job script (docs/cluster.md's, scaled down):"
diff run_shards.doc.sh run_shards.sh | sed 's/^/    /' || true

# ---- munged: own key and socket ---------------------------------------------------------------------------
MUNGE_DIR=$(mktemp -d /tmp/attnscope-munge.XXXXXX)   # short (a socket path) and reachable by user munge
echo "$MUNGE_DIR" >"$W/munge_dir"
mungekey -c -k "$MUNGE_DIR/munge.key" >/dev/null 2>&1 || skip "mungekey cannot create a key"
chown -R munge:munge "$MUNGE_DIR"
chmod 0755 "$MUNGE_DIR"
SOCK=$MUNGE_DIR/munge.socket
if ! runuser -u munge -- env SLURM_CONF="$CONF" munged --socket="$SOCK" --key-file="$MUNGE_DIR/munge.key" \
      --log-file="$MUNGE_DIR/munged.log" --pid-file="$MUNGE_DIR/munged.pid" --seed-file="$MUNGE_DIR/munged.seed"; then
  tail -n 3 "$MUNGE_DIR/munged.log" 2>/dev/null | sed 's/^/    /'
  skip "munged does not start here"
fi
munge -S "$SOCK" -n | unmunge -S "$SOCK" >/dev/null 2>&1 || skip "munged runs but 'munge -n | unmunge' fails"
log "munged up (PID $(cat "$MUNGE_DIR/munged.pid"), socket $SOCK)"

# ---- slurmctld + slurmd on this machine -----------------------------------------------------------------
HOST=$(hostname -s)
read -r CTLD_PORT SLURMD_PORT < <("$PY" -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("", 0))
print(*(x.getsockname()[1] for x in s))')
MEM=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
cat >"$CONF" <<EOF
# A one-machine cluster for tests/cluster/slurm_array_test.sh (Slurm 22.05, Debian 12)
ClusterName=attnscope-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/logs/slurmctld.log
SlurmdLogFile=$W/logs/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
sl slurmctld -f "$CONF" || { tail -n 5 "$W/logs/slurmctld.log" 2>/dev/null || true; skip "slurmctld does not start here"; }
sl slurmd -f "$CONF" || { tail -n 5 "$W/logs/slurmd.log" 2>/dev/null || true; skip "slurmd does not start here"; }
for i in $(seq 150); do
  state=$(sl sinfo -h -n "$HOST" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
if [ "$state" != idle ]; then
  tail -n 5 "$W/logs/slurmctld.log" "$W/logs/slurmd.log" 2>/dev/null || true
  skip "the node did not become idle within 30 s (sinfo says '$state')"
fi
# The last-resort check in cleanup finds this run's processes by SLURM_CONF: it must see the daemons.
seen=" $(ours | tr '\n' ' ') "
for f in "$MUNGE_DIR/munged.pid" "$W/slurmctld.pid" "$W/slurmd.pid"; do
  [[ $seen == *" $(cat "$f") "* ]] || fail "the leftover check does not see PID $(cat "$f") ($f)"
done
log "slurmctld (PID $(cat "$W/slurmctld.pid"), port $CTLD_PORT) and slurmd (PID $(cat "$W/slurmd.pid"), port $SLURMD_PORT) up; node $HOST idle"

# ---- The reference: one unsharded run ------------------------------------------------------------------
log "unsharded reference run"
# (In the background with this run's SLURM_CONF, so that a signal stops the test at once and the cleanup's
# leftover check ends it.)
sl "$ATTNSCOPE" batch study.toml --out unsharded --jobs 1 2>unsharded.log &
wait $! || { tail -n 5 unsharded.log; fail "unsharded run failed"; }
tail -n 1 unsharded.log | sed 's/^/    /'
per_shard=$("$PY" -c "import json,sys
print(sum(1 for l in open('unsharded/results.jsonl') if json.loads(l)['unit'] % $SHARDS == $KILL))")
log "shard $KILL has $per_shard records to write"

# ---- What a user does -------------------------------------------------------------------------------------
# run: prints "$ command" and what it printed, here and in the transcript.
run() {
  printf '$ %s\n' "$*" | tee -a "$TRANSCRIPT"
  sl bash -c "$*" 2>&1 | tee -a "$TRANSCRIPT"
  return "${PIPESTATUS[0]}"
}
# wait_for SECONDS CONDITION...: polls the condition every 0.2 s.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}
job_state() { sl scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }
queued() { [ -n "$(sl squeue -h -j "$1" 2>/dev/null)" ]; }
not_queued() { ! queued "$1"; }
records() { [ -f "$1" ] && tr -cd '\n' <"$1" | wc -c || echo 0; }

mkdir -p logs
echo '$ mkdir -p logs' >>"$TRANSCRIPT"
jid=$(sl sbatch --parsable run_shards.sh) || fail "sbatch run_shards.sh failed"
printf '$ jid=$(sbatch --parsable run_shards.sh); echo $jid\n%s\n' "$jid" | tee -a "$TRANSCRIPT"
mid=$(sl sbatch --parsable --dependency=afterok:"$jid" --wrap 'attnscope merge shards/* --out results') ||
  fail "sbatch of the merge failed"
printf "\$ mid=\$(sbatch --parsable --dependency=afterok:\$jid --wrap 'attnscope merge shards/* --out results'); echo \$mid\n%s\n" \
  "$mid" | tee -a "$TRANSCRIPT"
run squeue

# Cancel task $KILL while it runs, once it has recorded something (it then has seconds of work left).
partial=shards/$KILL/results.jsonl
kill_now() { [ "$(sl squeue -h -j "${jid}_$KILL" -o %T 2>/dev/null)" = RUNNING ] && [ "$(records "$partial")" -ge 1 ]; }
wait_for 120 kill_now || fail "task ${jid}_$KILL did not run and record within 120 s"
run squeue
run scancel "${jid}_$KILL"
kept=$(records "$partial")
log "task ${jid}_$KILL cancelled with $kept of $per_shard records written"
wait_for 30 not_queued "${jid}_$KILL" ||
  fail "task ${jid}_$KILL still queued 30 s after scancel"
[ "$(job_state "${jid}_$KILL")" = CANCELLED ] || fail "task ${jid}_$KILL: state $(job_state "${jid}_$KILL"), not CANCELLED"
[ -f "shards/$KILL/summary.csv" ] && fail "task ${jid}_$KILL finished before it was cancelled (no partial shard to resume)"
kept=$(records "$partial")
[ "$kept" -lt "$per_shard" ] || fail "shard $KILL has all its records although it was cancelled"
run tail -n 2 "logs/attnscope_${jid}_$KILL.log"
run wc -l "$partial"

# The other tasks finish; the merge waits for ever (afterok cannot be satisfied any more).
wait_for 180 not_queued "$jid" ||
  fail "array job $jid still running after 180 s"
for i in $(seq 0 $((SHARDS - 1))); do
  [ "$i" = "$KILL" ] && continue
  [ "$(job_state "${jid}_$i")" = COMPLETED ] || fail "task ${jid}_$i: $(job_state "${jid}_$i")"
  [ -f "shards/$i/summary.csv" ] || fail "shard $i has no summary.csv"
done
never() { sl squeue -h -j "$mid" -o %r 2>/dev/null | grep -q DependencyNeverSatisfied; }
wait_for 30 never || log "(the merge's reason is not DependencyNeverSatisfied yet)"
[ "$(job_state "$mid")" = PENDING ] || fail "merge job $mid: $(job_state "$mid") although task $KILL was cancelled"
[ -e results ] && fail "results/ exists although the merge must not have run"
run squeue

# Resubmit the index; the merge now waits for the new job.
rid=$(sl sbatch --parsable --array="$KILL" run_shards.sh) || fail "resubmission failed"
printf '$ rid=$(sbatch --parsable --array=%s run_shards.sh); echo $rid\n%s\n' "$KILL" "$rid" | tee -a "$TRANSCRIPT"
run scontrol update JobId="$mid" Dependency=afterok:"$rid"
run squeue
all_done() { [ -z "$(sl squeue -h 2>/dev/null)" ]; }
wait_for 180 all_done || fail "jobs still queued 180 s after the resubmission"
[ "$(job_state "${rid}_$KILL")" = COMPLETED ] || fail "resubmitted task ${rid}_$KILL: $(job_state "${rid}_$KILL")"
[ "$(job_state "$mid")" = COMPLETED ] || fail "merge job $mid: $(job_state "$mid")"
run tail -n 2 "logs/attnscope_${rid}_$KILL.log"
run cat "slurm-$mid.out"

# ---- Checks -----------------------------------------------------------------------------------------------
line=$(grep '^batch study.toml:' "logs/attnscope_${rid}_$KILL.log" | tail -n 1)
new=$(sed -n 's/.*, \([0-9]*\) new records.*/\1/p' <<<"$line")
[ -n "$new" ] || fail "no summary line in logs/attnscope_${rid}_$KILL.log"
[ $((new + kept)) -eq "$per_shard" ] ||
  fail "the resubmitted task wrote $new records, the cancelled one $kept: not the shard's $per_shard (no resume?)"
log "the resubmitted task resumed: $kept records kept, $new new"
printf '$ %s\n' "compare_runs.py unsharded results" >>"$TRANSCRIPT"
"$PY" "$HERE/compare_runs.py" unsharded results | tee -a "$TRANSCRIPT"
[ "${PIPESTATUS[0]}" = 0 ] || fail "merged results differ from the unsharded run"
for i in $(seq 0 $((SHARDS - 1))); do
  grep -q '^error' "logs/attnscope_${jid}_$i.log" && fail "logs/attnscope_${jid}_$i.log has an error line"
done
log "PASSED: the docs/cluster.md array with a cancelled and resubmitted task merges to the unsharded results"
