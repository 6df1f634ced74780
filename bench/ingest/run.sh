#!/usr/bin/env bash
# bench/ingest: an alert storm against a production-like Rootline (gunicorn + Celery worker + beat
# via bin/serve, PostgreSQL, Redis), side by side with alerta-server, Alertmanager's own API and raw
# PostgreSQL COPY (all through testbed/). Everything on 127.0.0.1, bounded in count and time;
# every process started here is stopped on exit. See bench/ingest/README.md.
#
#   bench/ingest/run.sh                 # the whole comparison, ~4 min
#   SKIP_PEERS=1 bench/ingest/run.sh    # only Rootline
#
# env: N1=10000 (alerts, bodies of 1)  N100=100000 (alerts, bodies of 100)  C=8
#      PEER_N=1500 (alerta, each of its 4 runs)  AM_N=10000  AM_BIG=100000  PG_ROWS=100000
#      WEB_WORKERS=2 WEB_THREADS=4 WORKER_CONCURRENCY=2 (passed to bin/serve)  PORT (free port)
#      BENCH_DB=rootline_bench  BENCH_REDIS_DB=12 (flushed at start: keep it for this bench)
#      MAX_SECONDS=40 (per load run)  DRAIN_TIMEOUT=300  PROFILE=1 (py-spy the web + worker)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TESTBED=${TESTBED:-$ROOT/testbed}
cd "$ROOT"
BIN=${BIN:-$ROOT/.venv/bin}
PY="$BIN/python"
N1=${N1:-10000}
N100=${N100:-100000}
C=${C:-8}
PEER_N=${PEER_N:-1500}
AM_N=${AM_N:-10000}
AM_BIG=${AM_BIG:-100000}
PG_ROWS=${PG_ROWS:-100000}
MAX_SECONDS=${MAX_SECONDS:-40}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-300}
BENCH_DB=${BENCH_DB:-rootline_bench}
BENCH_REDIS_DB=${BENCH_REDIS_DB:-12}
PORT=${PORT:-$(python3 "$TESTBED/tbutil.py" freeport)}
WORK=${WORK:-$(mktemp -d /tmp/rl_bench.XXXXXX)}
mkdir -p "$WORK"
RES="$WORK/results.jsonl"
: > "$RES"
SERVE_PID=""
PROF_PIDS=()

psql_pg() { psql -h 127.0.0.1 -U postgres -XAtq -v ON_ERROR_STOP=1 "$@"; }
stop_group() {  # stop bin/serve (its own trap stops gunicorn, the worker and beat), then its process group
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -TERM -- "-$pid" 2>/dev/null || true
  sleep 0.5
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local p
  for p in "${PROF_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${PROF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -n "$SERVE_PID" ]] && stop_group "$SERVE_PID"
  SERVE_PID=""
}
trap cleanup EXIT
echo "work dir: $WORK"

# --- fresh database and broker db ------------------------------------------------------------------
psql_pg -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null
psql_pg -c "CREATE DATABASE $BENCH_DB" >/dev/null
redis-cli -h 127.0.0.1 -n "$BENCH_REDIS_DB" FLUSHDB >/dev/null
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$BENCH_DB"
export CELERY_BROKER_URL="redis://127.0.0.1:6379/$BENCH_REDIS_DB"
export ROOTLINE_DATA_DIR="$WORK/data"
export ROOTLINE_LOG_LEVEL=${ROOTLINE_LOG_LEVEL:-WARNING}
mkdir -p "$ROOTLINE_DATA_DIR"
"$PY" manage.py migrate --noinput >/dev/null
INTEGRATION=$("$PY" manage.py integration add --kind alertmanager --name bench --token T)
HOOK_PATH=$(printf '%s' "$INTEGRATION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])')
API_TOKEN=$("$PY" manage.py api_token bench --create-user | tail -n 1)
BASE="http://127.0.0.1:$PORT"

# --- Rootline, as `make serve` runs it -------------------------------------------------------------
# setsid: bin/serve leads its own process group, so everything it started can be stopped together.
export WEB_WORKERS=${WEB_WORKERS:-2} WEB_THREADS=${WEB_THREADS:-4} WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-2}
printf '{"mode": "config", "web_workers": %s, "web_threads": %s, "worker_concurrency": %s, "n1": %s, "n100": %s, "c": %s, "started": "%s"}\n' \
  "$WEB_WORKERS" "$WEB_THREADS" "$WORKER_CONCURRENCY" "$N1" "$N100" "$C" "$(date -u +%FT%TZ)" >> "$RES"
PORT=$PORT BIN=$BIN setsid bash bin/serve > "$WORK/serve.log" 2>&1 &
SERVE_PID=$!
python3 "$TESTBED/tbutil.py" wait-http "$BASE/healthz" 60 || { echo "rootline not up"; tail -30 "$WORK/serve.log"; exit 1; }
sleep 2  # the Celery worker connects to the broker
echo "rootline (bin/serve, pid $SERVE_PID) on :$PORT; webhook $HOOK_PATH"
if [[ -n "${PROFILE:-}" ]]; then
  for p in $(pgrep -g "$SERVE_PID" -f 'gunicorn|celery' || true); do
    "$BIN/py-spy" record --nonblocking -r 100 -f raw -o "$WORK/profile.$p.txt" -p "$p" >/dev/null 2>&1 &
    PROF_PIDS+=($!)
  done
fi

api_count() { python3 "$HERE/drain.py" --base "$BASE" --token "$API_TOKEN" --expect 0 --timeout 0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])'; }

ours() {  # label batch n
  local label=$1 batch=$2 n=$3 before out wall ok t_end t_start
  before=$(api_count)
  python3 "$HERE/cpu.py" snap "$WORK/cpu.$label.json"
  # /usr/bin/time: the load client's own CPU (it exits before cpu.py's second snapshot).
  out=$(/usr/bin/time -f '%U %S' -o "$WORK/client.$label.time" timeout $((MAX_SECONDS + 120)) "$PY" "$TESTBED/peer_bench.py" http \
        --label "$label" --url "$BASE$HOOK_PATH" \
        --format am-webhook --batch "$batch" -n "$n" -c "$C" --max-seconds "$MAX_SECONDS" --header 'Authorization: Bearer T')
  t_end=$(python3 "$TESTBED/tbutil.py" now)
  echo "$out" | tee -a "$RES"
  wall=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["wall_s"])')
  ok=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ok_alerts"])')
  t_start=$(python3 -c "print($t_end - $wall)")
  # + C: peer_bench.py's untimed warm-up sends one 1-alert body per thread (its own run id).
  (python3 "$HERE/drain.py" --base "$BASE" --token "$API_TOKEN" --expect $((before + ok + C)) --since "$t_start" \
    --timeout "$DRAIN_TIMEOUT" --label "${label}_processed" || true) | python3 -c '
import json, sys
d = json.loads(sys.stdin.read()); d["alerts"] = int(sys.argv[1]); d["send_wall_s"] = float(sys.argv[2])
d["processed_alerts_per_s"] = round(d["alerts"] / d["since_load_start_s"], 1)
print(json.dumps(d))' "$ok" "$wall" | tee -a "$RES"
  APP_PGID=$SERVE_PID python3 "$HERE/cpu.py" diff "$WORK/cpu.$label.json" "$label" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read()); user, system = open(sys.argv[1]).read().split()[-2:]
d["cpu_s"]["load_client"] = round(float(user) + float(system), 2)  # its whole run, body building included
print(json.dumps(d))' "$WORK/client.$label.time" | tee -a "$RES"
}

python3 "$ROOT/bench/calibrate.py" | tee -a "$RES"  # the machine's speed now, to compare runs of other days
ours rootline_am_webhook_batch1 1 "$N1"
ours rootline_am_webhook_batch100 100 "$N100"

# Every alert is one distinct occurrence (no dedup hit): rows == distinct (fingerprint, starts_at),
# no delivery left pending, and the deliveries are distinct bodies.
psql_pg -d "$BENCH_DB" -c "SELECT json_build_object('mode','check','alerts',(SELECT count(*) FROM incidents_alert),
  'distinct_occurrences',(SELECT count(DISTINCT (fingerprint, starts_at)) FROM incidents_alert),
  'deliveries',(SELECT count(*) FROM incidents_delivery),
  'not_processed',(SELECT count(*) FROM incidents_delivery WHERE status <> 'processed'))" | tee -a "$RES"
for p in "${PROF_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
for p in "${PROF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PROF_PIDS=()
stop_group "$SERVE_PID"; SERVE_PID=""

# --- peers, through the testbed's peer_bench.sh --------------------------------------------------
if [[ -z "${SKIP_PEERS:-}" ]]; then
  if [[ ! -x /tmp/alertavenv/bin/gunicorn ]]; then
    python3 -m venv /tmp/alertavenv
    /tmp/alertavenv/bin/pip install -q alerta-server psycopg2-binary gunicorn requests httpx "psycopg[binary]"
  fi
  # Separate invocations so each peer gets an N that runs ~10-20 s (alerta takes ~100 alerts/s).
  WORK="$WORK/peer_alerta" N="$PEER_N" C="$C" SKIP_AM=1 SKIP_PG=1 timeout 600 bash "$TESTBED/peer_bench.sh" \
    | grep '^{' | tee -a "$RES" || echo "alerta run failed (see $WORK/peer_alerta)"
  WORK="$WORK/peer_am" N="$AM_N" AM_BIG="$AM_BIG" C="$C" SKIP_ALERTA=1 SKIP_PG=1 timeout 300 bash "$TESTBED/peer_bench.sh" \
    | grep '^{' | tee -a "$RES" || echo "alertmanager run failed (see $WORK/peer_am)"
  WORK="$WORK/peer_pg" PG_ROWS="$PG_ROWS" SKIP_ALERTA=1 SKIP_AM=1 timeout 300 bash "$TESTBED/peer_bench.sh" \
    | grep '^{' | tee -a "$RES" || echo "pg run failed (see $WORK/peer_pg)"
fi

echo "results: $RES"
python3 "$HERE/summary.py" "$RES"
