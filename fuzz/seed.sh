#!/usr/bin/env bash
# Builds the seed corpora of every fuzz target from the conformance cases (the
# project's own under tests/cases, and the shared ones when ../shared exists).
# Usage: fuzz/seed.sh   (writes fuzz/corpus/<target>/, which git ignores)
set -euo pipefail
cd "$(dirname "$0")"
roots=(../tests/cases)
[ -d ../../shared/conformance ] && roots+=(../../shared/conformance)
mkdir -p corpus/frontend corpus/trace_tc corpus/trace_csv corpus/trace_jsonl corpus/tiers corpus/snapshot
n=0
while IFS= read -r spec; do
  dir=$(dirname "$spec")
  n=$((n + 1))
  cp "$spec" "corpus/frontend/case$n"
  if [ -f "$dir/trace.input" ]; then
    cp "$dir/trace.input" "corpus/trace_tc/case$n"
    { cat "$spec"; printf '\n%%%%\nt'; cat "$dir/trace.input"; } > "corpus/tiers/case$n"
  fi
  for f in "$dir"/*.csv; do [ -f "$f" ] && cp "$f" "corpus/trace_csv/case$n"; done
  for f in "$dir"/*.jsonl; do [ -f "$f" ] && cp "$f" "corpus/trace_jsonl/case$n"; done
done < <(find "${roots[@]}" -name spec.dsrv | sort)
# Traces in the other formats come from the examples.
for f in ../examples/*.csv; do [ -f "$f" ] && cp "$f" corpus/trace_csv/; done
for f in ../examples/*.jsonl; do [ -f "$f" ] && cp "$f" corpus/trace_jsonl/; done
printf 'x,f,b,s,u,a\n1,2.5,true,hi,(),3\n,,,,,\n' > corpus/trace_csv/typed.csv
printf '{"x":1,"f":2.5,"b":true,"s":"hi","u":null,"a":[1]}\n{}\n' > corpus/trace_jsonl/typed.jsonl
# Issue 34: values nested far past the readers' bound (a stack overflow once), and a
# `dynamic` string that runs itself (unbounded instance nesting once).
python3 -c "n = 10000; print('{\"l\": ' + '[' * n + ']' * n + '}')" > corpus/trace_jsonl/deep_nesting
python3 -c "n = 10000; print('l,m'); print('\"' + '[' * n + ']' * n + '\",{}')" > corpus/trace_csv/deep_nesting
# Issue 40: `.input` container values in JSON's form and the language's, nested, for typed and
# untyped inputs, with malformed ones after them, and a list nested far past the bound.
printf '0: a = [1, 2.5, "x, y", (), true]\n   l = List(-1,[])\n   m = {"time": 0, "value": 5.0}\n1: m = Map("k": {"j": [[]]})\n   a = {}\n2: a = [1,]\n3: l = [1 2\n' > corpus/trace_tc/containers
python3 -c "n = 10000; print('0: a = ' + '[' * n + ']' * n)" > corpus/trace_tc/deep_nesting
printf 'in l: List\nin m\nout s\nout k\ns = List.fold(\\a: Int, v: Int -> a + v, 0, l)\nk = m\n%%%%\nt0: l = [1, 2]\n   m = {"a": [1]}\n1: l = List(3)\n' > corpus/tiers/input_containers
printf 'in x: Int\nin s: Str\nout r\nr = dynamic(s)\n%%%%\nj{"x":1,"s":"dynamic(s)"}\n' > corpus/tiers/dynamic_self
printf 'in x: Int\nin s: Str\nout r\nr = eval(s)\n%%%%\nt0: x = 1\n   s = "eval(s)"\n' > corpus/tiers/eval_self
# Issue 37: triggers' alerting clauses and labels, and message placeholders with formats and
# expressions (the parser writes them as aux streams), also malformed.
printf 'in x: Int\nin h: Str\ntrigger hot: x > 1 "{h:>6} {x / 2:.1%%} {x[1]:!n/a}" rising, resolve, every 5min, severity page, label team = "ops"\ntrigger x > 3 "{x:.q} {x +}" every\n' > corpus/frontend/alerting
printf 'in x: Int\nout n: Int @ 1s\nn = window(x, 2s, count)\ntrigger n == 0 "{n:5.2} {n * 2}" rising, resolve, every 3s\n%%%%\nt0: x = 1\n3: x = 2\n' > corpus/tiers/alerting_ticks
# Snapshots: real ones after 0 to 15 rows, each mutated in its binary body (mode 2)
# and in its JSON (mode 3), and keyed ones likewise (modes 6 and 7); the target
# builds them, so a seed is a few bytes.
for rows in 0 3 7 15; do
  printf "\\x02\\x$(printf %02x $rows)" > corpus/snapshot/binary$rows
  printf "\\x03\\x$(printf %02x $rows)" > corpus/snapshot/json$rows
  printf "\\x06\\x$(printf %02x $rows)" > corpus/snapshot/keyed_binary$rows
  printf "\\x07\\x$(printf %02x $rows)" > corpus/snapshot/keyed_json$rows
done
# Inputs fuzzing found, kept as seeds (each also has a unit test): a mutated
# keyed snapshot holding a value in a slot no keyed run keeps.
printf '\x16\x33\x01\x20\x04\x28' > corpus/snapshot/found_keyed_unkept_slot
# Issue 39: STL properties, each followed by a few samples (signal, time step, value).
mkdir -p corpus/stl
while IFS= read -r spec; do
  n=$((n + 1))
  { cat "$spec"; printf '\n%%%%\n\x00\x0a\x04\x01\x0a\xfc\x00\x14\x10\x02\x05\x00'; } > "corpus/stl/case$n"
done < <(find ../tests/stl_cases ../examples -name '*.mstlo' | sort)
printf 'p: G[0,2]($t > x) && (y < 1 U[0,1] !F[0.5,3](z >= $t))\nq: x > 1 -> globally[0,1] eventually[0,1] y <= -2\n%%%%\n\x00\x01\x02\x01\x00\x03\x02\xff\x80\x03\x00\x7f\n' > corpus/stl/mixed
echo "seeded $n cases into fuzz/corpus/"
