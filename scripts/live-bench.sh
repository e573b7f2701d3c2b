#!/usr/bin/env bash
# Live-transport throughput (docs/operations.md, "Live sources"): rows/s through a private mosquitto and a
# private redis-server on this machine, beside the same rows read from a file. Each figure is
# the median wall time of 3 runs of the whole process (broker round trips included); every
# run's outputs are checked against the file run's.
#   scripts/live-bench.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-200000}
dir=$(mktemp -d)
chmod 777 "$dir"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
scripts/install-brokers.sh
cargo build --release --quiet
vigil=target/release/vigil
spec="$dir/spec.dsrv"
printf 'in x: Int\nin y: Int\nout total: Int\nout hot: Bool\ntotal = default(total[1], 0) + x\nhot = x > y\n' > "$spec"
python3 - "$rows" > "$dir/trace.jsonl" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    sys.stdout.write(f'{{"x":{(i * 7) % 11 - 3},"y":{i % 5}}}\n')
PY
# The same rows as XADD commands in Redis's protocol, for `redis-cli --pipe`.
python3 - "$rows" > "$dir/xadd.resp" <<'PY'
import sys
def cmd(*args):
    out = [f"*{len(args)}\r\n"]
    for a in args:
        out.append(f"${len(a.encode())}\r\n{a}\r\n")
    return "".join(out)
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    w(cmd("XADD", "in", "*", "x", str((i * 7) % 11 - 3), "y", str(i % 5)))
PY
$vigil run "$spec" --input "$dir/trace.jsonl" --output jsonl > "$dir/want.jsonl"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mport=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n' "$mport" > "$dir/m.conf"
mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
$mosquitto -c "$dir/m.conf" 2>/dev/null & pids+=($!)
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >/dev/null & pids+=($!)
until redis-cli -p "$rport" ping >/dev/null 2>&1 && mosquitto_pub -p "$mport" -t ping -n 2>/dev/null; do sleep 0.1; done
rcli() { redis-cli -p "$rport" "$@"; }

median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
report() { # name, median seconds
  printf '%-44s %8.3f s %12.0f rows/s\n' "$1" "$2" "$(echo "$rows / $2" | bc -l)"
}
now() { date +%s.%N; }
check() { cmp -s "$1" "$dir/want.jsonl" || { echo "$2: outputs differ from the file run"; exit 1; }; }

bench() { # name, then a function that runs once and prints its seconds
  local name=$1 times=()
  for _ in 1 2 3; do times+=("$($2)"); done
  report "$name" "$(median "${times[@]}")"
}

file_in() {
  local s; s=$(now)
  $vigil run "$spec" --input "$dir/trace.jsonl" --output jsonl > "$dir/got.jsonl"
  echo "$(now) - $s" | bc; check "$dir/got.jsonl" "file"
}
mqtt_in() { # rows published to one topic (QoS 1) while vigil reads them
  : > "$dir/err"
  $vigil run "$spec" --input "mqtt://127.0.0.1:$mport/b" --mqtt-rows rows --output jsonl \
    > "$dir/got.jsonl" 2> "$dir/err" &
  local v=$!
  until grep -q subscribed "$dir/err"; do sleep 0.01; done
  local s; s=$(now)
  python3 scripts/mqtt_publish.py "$mport" b/rows "$dir/trace.jsonl"
  wait $v
  echo "$(now) - $s" | bc; check "$dir/got.jsonl" "mqtt in"
}
mqtt_out() { # rows from the file, each step published as a row object (QoS 1)
  timeout 300 mosquitto_sub -p "$mport" -q 1 -t o/rows -C "$rows" > "$dir/sub.jsonl" &
  local sub=$!
  sleep 0.3
  local s; s=$(now)
  $vigil run "$spec" --input "$dir/trace.jsonl" --output "mqtt://127.0.0.1:$mport/o" --mqtt-output-rows rows
  wait $sub
  echo "$(now) - $s" | bc; check "$dir/sub.jsonl" "mqtt out"
}
redis_in() { # the stream filled beforehand, read to its end
  rcli del in >/dev/null; rcli --pipe < "$dir/xadd.resp" >/dev/null
  local s; s=$(now)
  $vigil run "$spec" --input "redis://127.0.0.1:$rport/in" --drain --output jsonl > "$dir/got.jsonl"
  echo "$(now) - $s" | bc; check "$dir/got.jsonl" "redis in"
}
redis_out() { # rows from the file, one XADD per step
  rcli del out >/dev/null
  local s; s=$(now)
  $vigil run "$spec" --input "$dir/trace.jsonl" --output "redis://127.0.0.1:$rport/out"
  echo "$(now) - $s" | bc
  [ "$(rcli xlen out)" = "$rows" ] || { echo "redis out: $(rcli xlen out) entries"; exit 1; }
}
redis_through() { # stream to stream with checkpoints every 10,000 rows
  rcli del in out >/dev/null; rcli --pipe < "$dir/xadd.resp" >/dev/null
  rm -f "$dir/ck"
  local s; s=$(now)
  $vigil run "$spec" --input "redis://127.0.0.1:$rport/in" --drain \
    --output "redis://127.0.0.1:$rport/out" --checkpoint "$dir/ck" --checkpoint-every 10000
  echo "$(now) - $s" | bc
  [ "$(rcli xlen out)" = "$rows" ] || { echo "redis through: $(rcli xlen out) entries"; exit 1; }
}

echo "$rows rows, $(nproc) cores, $(mosquitto -h 2>/dev/null | head -1 || true)"
bench "file (JSON lines) -> file" file_in
bench "MQTT rows topic (QoS 1) -> file" mqtt_in
bench "file -> MQTT row topic (QoS 1)" mqtt_out
bench "Redis stream (XREAD, --drain) -> file" redis_in
bench "file -> Redis stream (XADD)" redis_out
bench "Redis -> Redis, checkpoint every 10,000" redis_through
