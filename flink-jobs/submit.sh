#!/usr/bin/env bash
# Submits the shadow-cache job to a Flink session cluster once (docker-compose's flink-submit):
# nothing to do when it already runs; else it resumes from the newest retained checkpoint in
# CHECKPOINT_DIR, so restarting the stack keeps every shadow cache's state.
#   submit.sh JOBMANAGER_HOST:PORT -- job options (--bootstrap … --clickhouse … --checkpoint-dir …)
# The paths default to the image's; outside it (scripts/services start flink) set
#   FLINK=.venv/lib/python3.11/site-packages/pyflink/bin/flink PYTHON=.venv/bin/python
#   JOB=flink-jobs/shadow_caches.py CONNECTOR_JAR=.cache/flink-jars/… CHECKPOINT_DIR=var/flink/checkpoints
# RESTORE=PATH resumes from that savepoint or checkpoint instead of the newest checkpoint.
# JOB_NAME names the job (a second job beside the first, with other shadow caches: its own name,
# CHECKPOINT_DIR and --consumer-group; deploy/README.md, "Adding a policy or a size").
set -euo pipefail
jm="$1"; shift
[ "${1:-}" = "--" ] && shift
ckdir="${CHECKPOINT_DIR:-/checkpoints}"
ckdir="${ckdir#file://}"
py="${PYTHON:-/opt/venv/bin/python}"
flink="${FLINK:-flink}"
job="${JOB:-/opt/cachescope/shadow_caches.py}"
jar="${CONNECTOR_JAR:-/opt/cachescope/jars/flink-sql-connector-kafka-5.0.0-2.2.jar}"
name="${JOB_NAME:-cachescope shadow caches}"

running="$("$py" - "$jm" "$name" <<'PY'
import json, sys, urllib.request
try:
    jobs = json.load(urllib.request.urlopen(f"http://{sys.argv[1]}/jobs/overview", timeout=10))["jobs"]
except OSError as e:
    sys.exit(f"submit: the JobManager at {sys.argv[1]} does not answer ({e}): is the cluster up?")
print(sum(j["name"] == sys.argv[2] and j["state"] in ("RUNNING", "CREATED", "RESTARTING", "INITIALIZING")
          for j in jobs))
PY
)"
if [ "$running" != "0" ]; then
  echo "submit: '$name' already runs on $jm"
  exit 0
fi

restore=()
if [ -n "${RESTORE:-}" ]; then
  restore=(--restore "$RESTORE")
  echo "submit: resuming from $RESTORE"
else
  latest="$(ls -1dt "$ckdir"/*/chk-*/_metadata 2>/dev/null | head -n 1 || true)"
  if [ -n "$latest" ]; then
    restore=(--restore "file://$(dirname "$latest")")
    echo "submit: resuming from $(dirname "$latest")"
  fi
fi
# the REST address as generic options: the image's entrypoint (which writes FLINK_PROPERTIES into
# the configuration) does not run for this command
exec "$flink" run --detached --target remote -Drest.address="${jm%:*}" -Drest.port="${jm##*:}" \
  --python "$job" -pyclientexec "$py" -pyexec "$py" \
  "$@" --job-name "$name" --jar "$jar" "${restore[@]}"
