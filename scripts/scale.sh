#!/usr/bin/env bash
# Scale-out figures, end to end (docs/operations.md, "Scaling out"): a 1,000,000-row, 10,000-key JSON-lines
# trace through `vigil run --key host` in one thread, on 1 and 2 timely workers, and on 2
# processes of 1 worker on localhost. Prints the median wall time of 3 runs and rows/s for each;
# every run's output is compared with the single-threaded run's (they must be byte-identical).
#   scripts/scale.sh [ROWS] [KEYS]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
keys=${2:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo build --release --quiet
vigil=target/release/vigil
spec=examples/telemetry.dsrv
python3 - "$rows" "$keys" > "$dir/trace.jsonl" <<'PY'
import sys
rows, keys = int(sys.argv[1]), int(sys.argv[2])
state = 12345
out = sys.stdout
for i in range(rows):
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    host = (state >> 33) % keys
    temp = 20 + ((state >> 13) % 2000) / 100
    out.write(f'{{"host":"h{host}","temp":{temp}}}\n')
PY
$vigil run $spec --input "$dir/trace.jsonl" --key host --output-file "$dir/want.txt"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
time_runs() { # name, then the command (its output file is $dir/got.txt)
  local name=$1; shift
  local times=()
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
    cmp -s "$dir/got.txt" "$dir/want.txt" || { echo "$name: output differs"; exit 1; }
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  printf '%-28s %8.3f s %12.0f rows/s\n' "$name" "$median" "$(echo "$rows / $median" | bc -l)"
}
two_processes() {
  printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$(free_port)" "$(free_port)" > "$dir/hosts"
  $vigil run $spec --input "$dir/trace.jsonl" --key host --processes 2 --process 1 --hostfile "$dir/hosts" &
  $vigil run $spec --input "$dir/trace.jsonl" --key host --processes 2 --process 0 --hostfile "$dir/hosts" --output-file "$dir/got.txt"
  wait
}
echo "$rows rows, $keys keys, $(nproc) cores"
time_runs "single thread (--key)" $vigil run $spec --input "$dir/trace.jsonl" --key host --output-file "$dir/got.txt"
time_runs "--workers 1" $vigil run $spec --input "$dir/trace.jsonl" --key host --workers 1 --output-file "$dir/got.txt"
time_runs "--workers 2" $vigil run $spec --input "$dir/trace.jsonl" --key host --workers 2 --output-file "$dir/got.txt"
time_runs "2 processes x 1 worker" two_processes
