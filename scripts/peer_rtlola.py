#!/usr/bin/env python3
"""Cross-check vigil against RTLola's CLI, value by value, on the translatable cases (issue 37 §5).

Not part of CI: it installs rtlola-cli from crates.io. What it does, in order:

1. Installs rtlola-cli 0.1.2 (the CLI of rtlola-interpreter 0.11) into <repo>/target/peers,
   not on the PATH, unless <repo>/target/peers/bin/rtlola-cli exists (the folder
   scripts/peers.py uses; target/ is ignored by git):
       cargo install --locked --root <repo>/target/peers rtlola-cli --version 0.1.2
   (retried without --locked if that fails, saying so). It builds from source: about 10
   minutes on two cores.
2. Builds vigil with `cargo build` (skip with --no-build; another binary with --vigil PATH).
3. For every case below, writes the trace twice (vigil's CSV, where an empty cell is an absent
   value, and RTLola's, where `#` is) and runs
       vigil run case.dsrv --input case.csv --time time --start 0 --output csv --alerts FILE
       rtlola-cli monitor --csv-in case.lola.csv --offline relative --output-format csv
           --verbosity outputs case.lola
   (`--start 0`: RTLola's `--offline relative` counts periods from time 0).
4. Lines the two outputs up: a trace row is a step on both sides (vigil ticks before the rows
   of their time, RTLola after them), a tick is a step of its time; and compares every
   output at every row (event streams) or tick (periodic streams), and every trigger at
   every row or tick (fired or not), numbers within a relative 1e-9.
5. Classifies each differing cell: a documented difference (DIFFERENCES below, also in
   docs/operations.md, "Beside RTLola"), either found from the trace (a tick at the origin, a
   row on a tick or on a window's far edge) or declared by the case for a stream (a choice
   of definition), or UNEXPECTED. Prints a table (cases, cells compared, agreements,
   documented differences by kind, unexpected) and, with --verbose, every differing cell.
   Exits 1 if any cell differs unexpectedly.

Usage (from anywhere; Python 3.11, standard library only):
    python3 scripts/peer_rtlola.py                 # install, build, run every case
    python3 scripts/peer_rtlola.py --no-build --verbose --case time_windows
Options: --no-build, --vigil PATH, --rtlola PATH, --case NAME (repeatable), --verbose,
--keep DIR (write the cases' files there and keep them).
"""

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(REPO, "target", "peers")
RTLOLA_VERSION = "0.1.2"

# The documented differences: what each is, and where docs/operations.md says it.
DIFFERENCES = {
    "origin_tick": "vigil ticks at the origin (--start 0); RTLola's first tick is one period later",
    "tick_before_rows": "at a tick with a row of the same time, vigil's periodic streams run "
    "before the row (they read the held values before it), RTLola's after it",
    "window_edge": "a periodic stream's time window: vigil's tick at t reads [t - T, t), "
    "RTLola's (t - T, t]; they differ where a row lies on t or t - T",
    "hold_rule": "vigil evaluates every stream at every row, reading an absent input as its "
    "held value, and a window's value is present at every row; RTLola evaluates a stream at "
    "the rows where its inputs arrive (its pacing), elsewhere it has no value",
    "offset_rows": "x[n] is x n rows back (an absent x holds its value), RTLola's "
    "x.offset(by: -n) n values of x back; they differ after a row without x",
    "int_avg": "avg of Ints: vigil's is a Float, RTLola's an Int (rounded toward zero)",
    "percentile_rank": "percentiles of N values: vigil's is the value of rank floor(q (N - 1)), "
    "RTLola's the value at ceil(q N) - 1, or the mean of it and the next when q N is whole "
    "(RTLola's median of 1, 2, 3, 4 is 2.5, vigil's p50 2)",
    "percentile_sketch": "percentiles of time windows: vigil's DDSketch is within 1% of the "
    "value of its rank",
    "rtlola_integral_subsecond": "integral: RTLola 0.11 adds a time difference's sub-second "
    "part as nanoseconds / 10^8 (ten times too large), vigil as seconds; they agree where "
    "consecutive samples are whole seconds apart",
}


@dataclass
class Case:
    name: str
    about: str
    inputs: list  # (name, "Float" | "Int" | "Bool")
    rows: list  # (time, {input: value}); an input missing from the dict is absent
    dsrv: str
    lola: str
    # Periodic streams and what they read: None (held values), or a window's reach in seconds.
    periodic: dict = field(default_factory=dict)
    # Triggers in declaration order (the same on both sides): (kind, periodic stream read or
    # None); kind "event" (fires at rows) or "tick".
    triggers: list = field(default_factory=list)
    # Streams whose values differ by a documented choice: stream -> DIFFERENCES key.
    declared: dict = field(default_factory=dict)


IRREGULAR = [
    (0.0, {"x": 1.0, "k": 1}),
    (0.4, {"x": 2.5, "k": 2}),
    (1.0, {"x": 4.0}),
    (2.0, {"x": 8.0, "k": 7}),
    (2.5, {"k": -3}),
    (3.25, {"x": -1.5, "k": 5}),
    (6.0, {"x": 16.0, "k": 4}),
    (6.5, {"x": 3.0, "k": 4}),
    (7.0, {"x": 3.0, "k": 9}),
    (9.75, {"x": 0.5, "k": 1}),
]

# Rows off the ticks' grid, whole seconds apart but for a gap: a periodic stream's window
# then reads the same rows on both sides, and an integral's time differences are whole.
OFF_GRID = [(t, {"x": v}) for t, v in
            [(0.5, 2.0), (1.5, 4.0), (2.5, 4.0), (3.5, 1.0), (5.5, 7.0), (6.5, 9.0), (7.5, 9.0),
             (9.5, 3.0)]]

CASES = [
    Case(
        name="triggers_offsets",
        about="event triggers with messages, offsets with defaults, an absent input",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out prev: Float
out back2: Float
out delta: Float
out kk: Int
prev = default(x[1], 0.0)
back2 = default(x[2], 0.0)
delta = x - prev
kk = k * 2 + 1
trigger x > 3.0 "big"
trigger delta < 0.0 "falling"
""",
        lola="""input x: Float64
input k: Int64
output prev := x.offset(by: -1).defaults(to: 0.0)
output back2 := x.offset(by: -2).defaults(to: 0.0)
output delta := x - prev
output kk := k * 2 + 1
trigger x > 3.0 "big"
trigger delta < 0.0 "falling"
""",
        triggers=[("event", None), ("event", None)],
        declared={"back2": "offset_rows", "prev": "offset_rows", "delta": "offset_rows"},
    ),
    Case(
        name="count_windows",
        about="count windows (RTLola's discrete windows): sum, avg, min, max, last; Int sum and avg",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out s: Float
out a: Float
out lo: Float
out hi: Float
out l: Float
out ks: Int
out ka: Float
s = window(x, 3, sum)
a = window(x, 3, avg)
lo = window(x, 3, min)
hi = window(x, 3, max)
l = window(x, 3, last)
ks = window(k, 4, sum)
ka = window(k, 4, avg)
""",
        lola="""input x: Float64
input k: Int64
output s := x.aggregate(over_discrete: 3, using: sum)
output a := x.aggregate(over_discrete: 3, using: avg).defaults(to: -1.0)
output lo := x.aggregate(over_discrete: 3, using: min).defaults(to: -1.0)
output hi := x.aggregate(over_discrete: 3, using: max).defaults(to: -1.0)
output l := x.aggregate(over_discrete: 3, using: last).defaults(to: -1.0)
output ks := k.aggregate(over_discrete: 4, using: sum)
output ka := k.aggregate(over_discrete: 4, using: avg).defaults(to: -1)
""",
        declared={"ka": "int_avg"},
    ),
    Case(
        name="count_window_spread_percentiles",
        about="issue 37 §4 on count windows: variance, stddev (both population), median, p90 "
        "(RTLola's variance of an Int64 is an Int64, which `defaults` cannot mix with a Float: "
        "Floats only)",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out v: Float
out sd: Float
out md: Float
out p9: Float
v = window(x, 3, variance)
sd = window(x, 4, stddev)
md = window(x, 4, p50)
p9 = window(x, 5, p90)
""",
        lola="""input x: Float64
input k: Int64
output v := x.aggregate(over_discrete: 3, using: var).defaults(to: -1.0)
output sd := x.aggregate(over_discrete: 4, using: sd).defaults(to: -1.0)
output md := x.aggregate(over_discrete: 4, using: median).defaults(to: -1.0)
output p9 := x.aggregate(over_discrete: 5, using: pctl90).defaults(to: -1.0)
""",
        declared={"md": "percentile_rank", "p9": "percentile_rank"},
    ),
    Case(
        name="periodic_streams",
        about="periodic streams at two rates reading held values, a trigger at ticks",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out h: Float @ 500ms
out g: Int @ 2s
h = default(x, 0.0)
g = default(k, 0) + 1
trigger h > 5.0 "held high"
""",
        lola="""input x: Float64
input k: Int64
output h @ 2Hz := x.hold().defaults(to: 0.0)
output g @ 0.5Hz := k.hold().defaults(to: 0) + 1
trigger @2Hz h > 5.0 "held high"
""",
        periodic={"h": None, "g": None},
        triggers=[("tick", "h")],
    ),
    Case(
        name="time_windows",
        about="time windows read by periodic streams over irregular times and a gap; a "
        "silence trigger",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out c: Int @ 1s
out s: Float @ 1s
out ks: Int @ 1s
out lo: Float @ 1s
c = window(x, 2s, count)
s = window(x, 2s, sum)
ks = window(k, 3s, sum)
lo = default(window(x, 3s, min), -1.0)
trigger c == 0 "silent"
""",
        lola="""input x: Float64
input k: Int64
output c @ 1Hz := x.aggregate(over: 2s, using: count)
output s @ 1Hz := x.aggregate(over: 2s, using: sum)
output ks @ 1Hz := k.aggregate(over: 3s, using: sum)
output lo @ 1Hz := x.aggregate(over: 3s, using: min).defaults(to: -1.0)
trigger @1Hz c == 0 "silent"
""",
        periodic={"c": 2.0, "s": 2.0, "ks": 3.0, "lo": 3.0},
        triggers=[("tick", "c")],
    ),
    Case(
        name="time_windows_off_grid",
        about="time windows whose rows lie off the ticks (no edge): count, sum, avg, min, max",
        inputs=[("x", "Float")],
        rows=OFF_GRID,
        dsrv="""in x: Float
out c: Int @ 1s
out s: Float @ 1s
out a: Float @ 1s
out lo: Float @ 1s
out hi: Float @ 500ms
c = window(x, 2s, count)
s = window(x, 3s, sum)
a = default(window(x, 3s, avg), -1.0)
lo = default(window(x, 3s, min), -1.0)
hi = default(window(x, 2s, max), -1.0)
trigger c == 0 "silent"
""",
        lola="""input x: Float64
output c @ 1Hz := x.aggregate(over: 2s, using: count)
output s @ 1Hz := x.aggregate(over: 3s, using: sum)
output a @ 1Hz := x.aggregate(over: 3s, using: avg).defaults(to: -1.0)
output lo @ 1Hz := x.aggregate(over: 3s, using: min).defaults(to: -1.0)
output hi @ 2Hz := x.aggregate(over: 2s, using: max).defaults(to: -1.0)
trigger @1Hz c == 0 "silent"
""",
        periodic={"c": 2.0, "s": 3.0, "a": 3.0, "lo": 3.0, "hi": 2.0},
        triggers=[("tick", "c")],
    ),
    Case(
        name="time_window_spread_integral",
        about="issue 37 §4 on time windows, rows off the ticks: variance, stddev, integral, "
        "median, p90",
        inputs=[("x", "Float")],
        rows=OFF_GRID,
        dsrv="""in x: Float
out v: Float @ 1s
out sd: Float @ 1s
out ig: Float @ 1s
out md: Float @ 1s
out p9: Float @ 1s
v = default(window(x, 3s, variance), -1.0)
sd = default(window(x, 3s, stddev), -1.0)
ig = window(x, 3s, integral)
md = default(window(x, 3s, p50), -1.0)
p9 = default(window(x, 4s, p90), -1.0)
""",
        lola="""input x: Float64
output v @ 1Hz := x.aggregate(over: 3s, using: var).defaults(to: -1.0)
output sd @ 1Hz := x.aggregate(over: 3s, using: sd).defaults(to: -1.0)
output ig @ 1Hz := x.aggregate(over: 3s, using: integral)
output md @ 1Hz := x.aggregate(over: 3s, using: median).defaults(to: -1.0)
output p9 @ 1Hz := x.aggregate(over: 4s, using: pctl90).defaults(to: -1.0)
""",
        periodic={"v": 3.0, "sd": 3.0, "ig": 3.0, "md": 3.0, "p9": 4.0},
        declared={"md": "percentile_sketch|percentile_rank", "p9": "percentile_sketch|percentile_rank"},
    ),
    Case(
        name="time_window_integral_subsecond",
        about="integral over samples less than a second apart",
        inputs=[("x", "Float"), ("k", "Int")],
        rows=IRREGULAR,
        dsrv="""in x: Float
in k: Int
out ig: Float @ 1s
ig = window(x, 3s, integral)
""",
        lola="""input x: Float64
input k: Int64
output ig @ 1Hz := x.aggregate(over: 3s, using: integral)
""",
        periodic={"ig": 3.0},
        declared={"ig": "rtlola_integral_subsecond"},
    ),
]


def install_rtlola():
    exe = os.path.join(PEERS, "bin", "rtlola-cli")
    if os.path.exists(exe):
        return exe
    base = ["cargo", "install", "--root", PEERS, "rtlola-cli", "--version", RTLOLA_VERSION]
    print(f"installing rtlola-cli {RTLOLA_VERSION} into {PEERS} (builds from source)", flush=True)
    if subprocess.run(base[:2] + ["--locked"] + base[2:]).returncode != 0:
        print("cargo install --locked failed; retrying without --locked", flush=True)
        subprocess.run(base, check=True)
    return exe


def fmt(v, missing):
    if v is None:
        return missing
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def write_trace(path, case, missing):
    names = [n for n, _ in case.inputs]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time"] + names)
        for t, vals in case.rows:
            w.writerow([repr(t)] + [fmt(vals.get(n), missing) for n in names])


def parse_value(text):
    """A cell as None (no value), a bool, or a float."""
    text = text.strip()
    if text in ("", "#"):
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return text


def same(a, b):
    if a is None or b is None or isinstance(a, (bool, str)) or isinstance(b, (bool, str)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def vigil_steps(table, row_times):
    """vigil's output lines as ("row", k) or ("tick", time): a line per step, and at each time
    at most one tick, before the rows of that time."""
    count = {}
    for t in row_times:
        count[t] = count.get(t, 0) + 1
    by_time = {}
    for i, (t, _) in enumerate(table):
        by_time.setdefault(t, []).append(i)
    kinds = [None] * len(table)
    row_k = 0
    for t in sorted(by_time):
        idx = by_time[t]
        rows = count.get(t, 0)
        if len(idx) not in (rows, rows + 1):
            raise SystemExit(f"vigil printed {len(idx)} lines at time {t} for {rows} rows")
        order = (["tick"] if len(idx) == rows + 1 else []) + ["row"] * rows
        for i, kind in zip(idx, order):
            if kind == "row":
                kinds[i] = ("row", row_k)
                row_k += 1
            else:
                kinds[i] = ("tick", t)
    return kinds


def rtlola_steps(table, row_times, ticking):
    """RTLola's output lines as ("row", k) or ("tick", time): RTLola prints a line for a row
    only if some stream ran at it, and a line for a tick after the rows of its time; a line
    is a tick's if a periodic stream (or trigger) has a value in it. The cases' rows have
    distinct times, so a row's line is the row of its time."""
    index = {t: k for k, t in enumerate(row_times)}
    if len(index) != len(row_times):
        raise SystemExit("a case's rows must have distinct times")
    kinds = []
    for t, vals in table:
        if any(vals.get(s) is not None and vals.get(s) is not False for s in ticking):
            kinds.append(("tick", t))
        elif t in index:
            kinds.append(("row", index[t]))
        else:
            raise SystemExit(f"RTLola printed a line at {t} that is neither a row nor a tick")
    return kinds


def run_vigil(vigil, case, d):
    spec = os.path.join(d, f"{case.name}.dsrv")
    trace = os.path.join(d, f"{case.name}.csv")
    alerts = os.path.join(d, f"{case.name}.alerts.jsonl")
    with open(spec, "w") as f:
        f.write(case.dsrv)
    write_trace(trace, case, "")
    out = subprocess.run(
        [vigil, "run", spec, "--input", trace, "--time", "time", "--start", "0",
         "--output", "csv", "--alerts", alerts],
        capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"vigil failed on {case.name}: {out.stderr}")
    lines = list(csv.reader(out.stdout.splitlines()))
    header, body = lines[0], lines[1:]
    names = header[2:]
    table = [(float(r[1]), {n: parse_value(v) for n, v in zip(names, r[2:])}) for r in body]
    fired = {}
    with open(alerts) as f:
        for line in f:
            a = json.loads(line)
            fired.setdefault(a["step"], set()).add(a["trigger"])
    # vigil names unnamed triggers trigger_1, trigger_2, ... in declaration order.
    for i, (_, vals) in enumerate(table):
        for k in range(len(case.triggers)):
            vals[f"trigger_{k}"] = f"trigger_{k + 1}" in fired.get(i, set())
    return table


def run_rtlola(rtlola, case, d):
    spec = os.path.join(d, f"{case.name}.lola")
    trace = os.path.join(d, f"{case.name}.lola.csv")
    with open(spec, "w") as f:
        f.write(case.lola)
    write_trace(trace, case, "#")
    out = subprocess.run(
        [rtlola, "monitor", "--csv-in", trace, "--offline", "relative", "--output-format", "csv",
         "--verbosity", "outputs", spec],
        capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"rtlola-cli failed on {case.name}: {out.stderr}")
    lines = list(csv.reader(out.stdout.splitlines()))
    header, body = lines[0], lines[1:]
    names = header[1:]
    table = []
    for r in body:
        vals = {n: parse_value(v) for n, v in zip(names, r[1:])}
        for k in range(len(case.triggers)):
            vals[f"trigger_{k}"] = vals.get(f"trigger_{k}") is not None
        table.append((float(r[0]), vals))
    return table


def near(a, b):
    return abs(a - b) < 1e-9


def explained(case, stream, tick_time):
    """The documented differences that the trace explains for a stream's value at a tick."""
    row_times = [t for t, _ in case.rows]
    reach = case.periodic.get(stream)
    if stream.startswith("trigger_"):
        reads = case.triggers[int(stream.split("_")[1])][1]
        reach = case.periodic.get(reads)
    kinds = set()
    if any(near(r, tick_time) for r in row_times):
        kinds.add("tick_before_rows" if reach is None else "window_edge")
    if reach is not None and any(near(r, tick_time - reach) for r in row_times):
        kinds.add("window_edge")
    return kinds


def _trunc_avg(ours, theirs):
    return ours is not None and theirs is not None and math.trunc(ours) == theirs


def _within_sketch(ours, theirs):
    return ours is not None and theirs is not None and abs(ours - theirs) <= 0.01 * abs(theirs) * (1 + 1e-9)


# Documented differences whose values the script checks: RTLola's Int average is vigil's
# rounded toward zero; a time window's percentile is within the sketch's 1%.
CHECKS = {"int_avg": _trunc_avg, "percentile_sketch": _within_sketch}


def absent_at(case, k):
    """Whether an input is absent at the trace's row k."""
    return len(case.rows[k][1]) < len(case.inputs)


def explained_at_row(case, k, theirs, trigger):
    """The hold rule explains a row where an input is absent and RTLola's stream has no value
    (its trigger did not run)."""
    if absent_at(case, k) and (theirs is None or (trigger and theirs is False)):
        return {"hold_rule"}
    return set()


def why_offset(case, key):
    """An offset counts rows: it differs from RTLola's only after a row with an absent input."""
    return key[0] == "row" and any(absent_at(case, j) for j in range(key[1]))


def compare(case, ours, theirs):
    row_times = [t for t, _ in case.rows]
    periodic = set(case.periodic) | {
        f"trigger_{i}" for i, (kind, _) in enumerate(case.triggers) if kind == "tick"}
    our = {k: v for k, (_, v) in zip(vigil_steps(ours, row_times), ours)}
    their = {k: v for k, (_, v) in zip(rtlola_steps(theirs, row_times, periodic), theirs)}
    streams = [n for n in ours[0][1] if n in theirs[0][1]] if ours and theirs else []
    result = {"cells": 0, "agree": 0, "documented": {}, "documented_cells": 0, "unexpected": [],
              "details": []}

    def document(kind, detail):
        # A cell with two reasons counts once in the total and once under each reason.
        result["documented_cells"] += 1
        for k in kind.split("+"):
            result["documented"][k] = result["documented"].get(k, 0) + 1
        result["details"].append(f"  documented ({kind}): {detail}")

    for key in sorted(set(our) | set(their), key=lambda k: (k[1], k[0])):
        if key not in their:
            if key[0] == "tick" and near(key[1], 0.0):
                for s in streams:
                    if s in periodic:
                        result["cells"] += 1
                        document("origin_tick", f"{s} at the tick at 0 is vigil's only")
                continue
            if key[0] == "tick":
                result["unexpected"].append(f"{key} only in vigil's output")
                continue
            # No stream of RTLola's ran at this row.
            their[key] = {}
        if key not in our:
            result["unexpected"].append(f"{key} only in RTLola's output")
            continue
        for s in streams:
            if (s in periodic) != (key[0] == "tick"):
                continue
            a, b = our[key].get(s), their[key].get(s)
            result["cells"] += 1
            if same(a, b):
                result["agree"] += 1
                continue
            detail = f"{s} at {key[0]} {key[1]}: vigil {a}, RTLola {b}"
            if key[0] == "tick":
                why = explained(case, s, key[1])
            else:
                why = explained_at_row(case, key[1], b, s.startswith("trigger_"))
            for kind in case.declared.get(s, "").split("+"):
                if kind == "offset_rows" and not why_offset(case, key):
                    continue
                # A choice of alternatives: the first whose check the values pass.
                kind = next((k for k in kind.split("|") if CHECKS.get(k, lambda a, b: True)(a, b)), "")
                if kind:
                    why.add(kind)
            if why:
                document("+".join(sorted(why)), detail)
            else:
                result["unexpected"].append(detail)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--vigil", default=None)
    ap.add_argument("--rtlola", default=None)
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep", default=None)
    args = ap.parse_args()
    rtlola = args.rtlola or install_rtlola()
    vigil = args.vigil or os.path.join(REPO, "target", "debug", "vigil")
    if not args.vigil and not args.no_build:
        subprocess.run(["cargo", "build", "--quiet"], cwd=REPO, check=True)
    cases = [c for c in CASES if not args.case or c.name in args.case]
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        d = args.keep
    else:
        d = tempfile.mkdtemp(prefix="peer-rtlola-")
    rows, unexpected = [], 0
    try:
        for case in cases:
            r = compare(case, run_vigil(vigil, case, d), run_rtlola(rtlola, case, d))
            documented = r["documented_cells"]
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["documented"].items())) or "-"
            rows.append((case.name, r["cells"], r["agree"], documented, kinds, len(r["unexpected"])))
            unexpected += len(r["unexpected"])
            if args.verbose or r["unexpected"]:
                print(f"{case.name}: {case.about}")
                for line in r["details"] if args.verbose else []:
                    print(line)
                for line in r["unexpected"]:
                    print(f"  UNEXPECTED: {line}")
    finally:
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
    print()
    print("| case | cells | agree | documented differences | by kind (a cell may have two) | unexpected |")
    print("|---|---|---|---|---|---|")
    for name, cells, agree, documented, kinds, bad in rows:
        print(f"| {name} | {cells} | {agree} | {documented} | {kinds} | {bad} |")
    total = [sum(r[i] for r in rows) for i in (1, 2, 3, 5)]
    print(f"| all ({len(rows)} cases) | {total[0]} | {total[1]} | {total[2]} | | {total[3]} |")
    print()
    for key, text in DIFFERENCES.items():
        print(f"{key}: {text}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
