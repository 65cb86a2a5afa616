#!/usr/bin/env bash
# Submits the shadow-cache job to a Flink session cluster once (docker-compose's flink-submit):
# nothing to do when it already runs; else it resumes from the newest retained checkpoint in
# CHECKPOINT_DIR, so restarting the stack keeps every shadow cache's state.
#   submit.sh JOBMANAGER_HOST:PORT -- job options (--bootstrap … --clickhouse … --checkpoint-dir …)
set -euo pipefail
jm="$1"; shift
[ "${1:-}" = "--" ] && shift
ckdir="${CHECKPOINT_DIR:-/checkpoints}"
name="cachescope shadow caches"

py=/opt/venv/bin/python
running="$("$py" - "$jm" "$name" <<'PY'
import json, sys, urllib.request
jobs = json.load(urllib.request.urlopen(f"http://{sys.argv[1]}/jobs/overview", timeout=10))["jobs"]
print(sum(j["name"] == sys.argv[2] and j["state"] in ("RUNNING", "CREATED", "RESTARTING") for j in jobs))
PY
)"
if [ "$running" != "0" ]; then
  echo "submit: '$name' already runs on $jm"
  exit 0
fi

restore=()
latest="$(ls -1dt "$ckdir"/*/chk-*/_metadata 2>/dev/null | head -n 1 || true)"
if [ -n "$latest" ]; then
  restore=(--restore "file://$(dirname "$latest")")
  echo "submit: resuming from $(dirname "$latest")"
fi
# the REST address as generic options: the image's entrypoint (which writes FLINK_PROPERTIES into
# the configuration) does not run for this command
exec flink run --detached --target remote -Drest.address="${jm%:*}" -Drest.port="${jm##*:}" \
  --python /opt/cachescope/shadow_caches.py \
  -pyclientexec /opt/venv/bin/python -pyexec /opt/venv/bin/python \
  "$@" --jar /opt/cachescope/jars/flink-sql-connector-kafka-5.0.0-2.2.jar "${restore[@]}"
