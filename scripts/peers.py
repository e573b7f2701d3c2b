#!/usr/bin/env python3
"""Time vigil against RTLola's CLI on the benchmark traces (issue 12 §4).

What it does, in order:

1. Installs rtlola-cli 0.1.2 (the CLI of rtlola-interpreter 0.11, the "RTLola 0.11 CLI" of
   /work/shared/perf/README.md) from crates.io into <repo>/target/peers (not on the PATH):
       cargo install --locked --root <repo>/target/peers rtlola-cli --version 0.1.2
   unless <repo>/target/peers/bin/rtlola-cli already exists (retried without --locked if that
   fails, saying so).
2. Builds vigil with `cargo build --release` (skip with --no-build).
3. Generates the traces with `python3 scripts/gen_traces.py ROWS DIR` (the shared generator's files
   exactly, and the sparse chain beside them; its first row is then made dense) unless they exist,
   and writes beside each S_ROWS.csv a copy S_ROWS.time.csv with a first column `time` = the
   row index in seconds (0, 1, 2, ...), which RTLola needs (its CSV reader takes the column
   named `time`; `--offline relative` reads it as seconds from the start).
4. Checks on the first --check-rows rows (default 1000) that RTLola's specifications in
   scripts/peers/S.lola give the same value for every output at every step as vigil on
   /work/shared/perf/S.dsrv (vigil `--output csv` against rtlola-cli `--output-format csv
   --verbosity outputs`); stops with an error if they differ.
5. Times each scenario (add, counter, chain), whole process, --runs times (default 5),
   the three commands interleaved run by run:
       vigil run S.dsrv --input DIR/S_ROWS.csv   > DIR/out/…   (text output)
       vigil run S.dsrv --input DIR/S_ROWS.input > DIR/out/…   (text output)
       rtlola-cli monitor --csv-in DIR/S_ROWS.time.csv --offline relative
           --output-format csv --verbosity outputs --output-file DIR/out/… S.lola
   Wall time is measured around the child process; max RSS is GNU time's %M
   (/usr/bin/time -f %M wraps each command).
   The outputs are overwritten by each run, checked for their line count after the last
   one, and then removed.
6. Prints a table of medians (and max RSS) with the ratio rtlola/vigil(csv), and the
   Trustworthiness Checker's *recorded* figures from /work/shared/perf/README.md (not measured
   here: it is not installed) with the ratio TC/vigil(.input).

Usage (from anywhere; Python 3.11, standard library only):
    python3 scripts/peers.py                      # 1,000,000 rows, 5 runs, all scenarios
    python3 scripts/peers.py --rows 100000 --runs 3 --scenarios add,chain --no-build
    python3 scripts/peers.py --json target/peers/figures.json
Options: --rows N, --runs N, --scenarios a,b, --dir DIR (default target/peers/traces),
--check-rows N, --no-build, --json FILE.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PERF = REPO.parent / "shared" / "perf"          # the specs, the generator and the peers' figures
LOLA = REPO / "scripts" / "peers"               # the RTLola specifications, one per scenario
PEERS = REPO / "target" / "peers"               # cargo install --root for rtlola-cli
RTLOLA = PEERS / "bin" / "rtlola-cli"
VIGIL = REPO / "target" / "release" / "vigil"
TIME = "/usr/bin/time"                          # GNU time, for the children's max RSS
RTLOLA_VERSION = "0.1.2"
SCENARIOS = ("add", "counter", "chain", "chain_sparse")
# The DSRV specification of each scenario: chain_sparse is chain over sparse rows (each row sets
# one of x, y and flag; scripts/gen_traces.py), with its first row made dense here
# (`densify_first_row`), so that every output has a value from the first step on and RTLola's
# `hold().defaults(…)` (scripts/peers/chain_sparse.lola) gives exactly vigil's hold rule.
SPEC = {"chain_sparse": "chain"}

# The Trustworthiness Checker's figures as recorded in /work/shared/perf/README.md (dataflow
# runtime, `.input` traces, 1,000,000 rows, whole process through its CLI, every output value
# written to a file, median of 5 runs on a 2-core machine). Not measured by this script.
TC_RECORDED = {"add": (4.61, 605), "counter": (4.25, 595), "chain": (21.5, 655)}  # s, MiB
# RTLola's figures recorded there too (0.11 CLI, all outputs as CSV), shown for comparison
# with what this script measures now.
RTLOLA_RECORDED = {"add": (4.09, 398), "counter": (4.56, 405), "chain": (9.11, 677)}


def die(msg):
    sys.exit(f"peers.py: error: {msg}")


def run_checked(cmd, **kw):
    """Run a command, echoing it; stop the script if it fails."""
    print("+", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        die(f"command failed with status {r.returncode}: {' '.join(map(str, cmd))}")
    return r


# ---------------------------------------------------------------- 1. install, 2. build

def install_rtlola():
    """cargo install rtlola-cli into target/peers unless it is there already."""
    if RTLOLA.exists():
        return
    base = ["cargo", "install", "--root", str(PEERS), "rtlola-cli", "--version", RTLOLA_VERSION]
    cmd = base[:2] + ["--locked"] + base[2:]
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd).returncode != 0:
        print("peers.py: note: `cargo install --locked` failed; retrying without --locked "
              "(dependency versions are then the newest compatible ones, not the crate's lock file)",
              flush=True)
        run_checked(base)
    if not RTLOLA.exists():
        die(f"cargo install did not produce {RTLOLA}")


def build_vigil():
    run_checked(["cargo", "build", "--release"], cwd=REPO)


# ---------------------------------------------------------------- 3. traces

def trace(dir_, s, rows, ext):
    return dir_ / f"{s}_{rows}.{ext}"


def ensure_traces(dir_, rows):
    """The generator's files (reused if present) and a `time` copy of each CSV.

    The project's generator (scripts/gen_traces.py) writes the shared generator's files exactly,
    and the sparse chain beside them."""
    if not all(trace(dir_, s, rows, e).exists() for s in SCENARIOS for e in ("csv", "input")):
        run_checked([sys.executable, str(REPO / "scripts" / "gen_traces.py"), str(rows),
                     str(dir_)])
    densify_first_row(dir_, rows)
    for s in SCENARIOS:
        add_time_column(trace(dir_, s, rows, "csv"), trace(dir_, s, rows, "time.csv"))


def densify_first_row(dir_, rows):
    """Give the sparse chain's first row every input, from the dense chain's first row.

    In place, once (a trace whose first row is dense already is left alone): its CSV's first
    data line and its `.input` trace's first step."""
    dense_csv = trace(dir_, "chain", rows, "csv")
    sparse_csv = trace(dir_, "chain_sparse", rows, "csv")
    with open(dense_csv) as f:
        f.readline()
        first = f.readline()
    x, y, flag = first.rstrip("\n").split(",")
    lines = open(sparse_csv).read().split("\n")
    if "" not in lines[1].split(","):
        return
    lines[1] = first.rstrip("\n")
    open(sparse_csv, "w").write("\n".join(lines))
    sparse_input = trace(dir_, "chain_sparse", rows, "input")
    steps = open(sparse_input).read().split("\n")
    if not steps[0].startswith("0: "):
        die(f"{sparse_input}: the first step is not step 0")
    steps[0] = f"0: x = {x}\n   y = {y}\n   flag = {flag}"
    open(sparse_input, "w").write("\n".join(steps))


def add_time_column(src, dst, limit=None):
    """Copy CSV `src` to `dst` with a first column `time` = row index (seconds).

    An empty cell (an input absent from that row) becomes `#`, RTLola's "no event of this
    input". Reuses `dst` if it is newer than `src`. With `limit`, copies only the first `limit`
    rows (and always rewrites `dst`)."""
    if limit is None and dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return
    tmp = dst.with_suffix(".tmp")
    with open(src) as fin, open(tmp, "w") as fout:
        fout.write("time," + fin.readline())
        for i, line in enumerate(fin):
            if limit is not None and i >= limit:
                break
            cells = line.rstrip("\n").split(",")
            fout.write(f"{i}," + ",".join(c or "#" for c in cells) + "\n")
    tmp.replace(dst)


def head(src, dst, rows):
    """The header and the first `rows` rows of CSV `src` into `dst`."""
    with open(src) as fin, open(dst, "w") as fout:
        fout.write(fin.readline())
        for i, line in enumerate(fin):
            if i >= rows:
                break
            fout.write(line)


# ---------------------------------------------------------------- commands

def vigil_cmd(s, input_, output_format=None):
    cmd = [str(VIGIL), "run", str(PERF / f"{SPEC.get(s, s)}.dsrv"), "--input", str(input_)]
    if output_format:
        cmd += ["--output", output_format]
    return cmd


def rtlola_cmd(s, input_, out_file):
    # --offline relative: timestamps from the `time` column, float seconds from the start.
    # --verbosity outputs: every output stream (the default, `public`, prints none of them,
    # since no stream is tagged public). --output-format csv: header `time,<outputs…>`, one row
    # per event. --output-file: rtlola's own file output (a BufWriter, flushed after each row).
    return [str(RTLOLA), "monitor", "--csv-in", str(input_), "--offline", "relative",
            "--output-format", "csv", "--verbosity", "outputs",
            "--output-file", str(out_file), str(LOLA / f"{s}.lola")]


# ---------------------------------------------------------------- 4. equivalence

def parse_cell(v):
    """An output value as a comparable Python value: Int → int, Bool → bool, else the text."""
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        return v


def check_equivalence(dir_, rows, check_rows, scenarios):
    """Stop unless rtlola and vigil agree on every output at every step of a prefix."""
    n = min(rows, check_rows)
    cdir = dir_ / "check"
    cdir.mkdir(parents=True, exist_ok=True)
    for s in scenarios:
        full = trace(dir_, s, rows, "csv")
        plain, timed = cdir / f"{s}_{n}.csv", cdir / f"{s}_{n}.time.csv"
        head(full, plain, n)
        add_time_column(full, timed, limit=n)
        vout, rout = cdir / f"{s}.vigil.csv", cdir / f"{s}.rtlola.csv"
        with open(vout, "w") as f:
            run_checked(vigil_cmd(s, plain, "csv"), stdout=f)
        run_checked(rtlola_cmd(s, timed, rout))
        with open(vout, newline="") as f:
            v = list(csv.reader(f))
        with open(rout, newline="") as f:
            r = list(csv.reader(f))
        # vigil: `step,<outputs…>`; rtlola: `time,<outputs…>`, same outputs in spec order.
        if v[0][1:] != r[0][1:]:
            die(f"{s}: the outputs differ: vigil {v[0][1:]} vs rtlola {r[0][1:]}")
        if len(v) != n + 1 or len(r) != n + 1:
            die(f"{s}: expected {n} rows, vigil wrote {len(v) - 1} and rtlola {len(r) - 1}")
        for i in range(1, n + 1):
            vs, rs = v[i], r[i]
            if int(vs[0]) != i - 1 or float(rs[0]) != i - 1:
                die(f"{s}: row {i}: step/time {vs[0]} / {rs[0]}, expected {i - 1}")
            for name, a, b in zip(v[0][1:], vs[1:], rs[1:]):
                if parse_cell(a) != parse_cell(b):
                    die(f"{s}: step {i - 1}: {name} = {a} in vigil but {b} in rtlola "
                        f"(see {vout} and {rout}); the specifications must be equivalent "
                        "for the timing to mean anything")
        print(f"equivalence: {s}: {n} steps × {len(v[0]) - 1} outputs agree", flush=True)
    shutil.rmtree(cdir)


# ---------------------------------------------------------------- 5. timing

def timed_run(cmd, stdout_path, work):
    """Run `cmd` once; return (wall seconds, max RSS in MiB). Stops the script on failure.

    Standard output goes to `stdout_path` (or nowhere if None), standard error to a file in
    `work` (not a pipe, so a chatty child never blocks). The wall time is taken here around
    the whole process; the max RSS is GNU time's %M. (Not this process's wait4 rusage: Linux
    keeps a process's RSS high-water mark across exec, so a child forked from Python starts
    out with Python's ~15 MiB, which would hide a small tool's real figure.)"""
    rss_file, err_file = work / "maxrss", work / "stderr"
    full = [TIME, "-f", "%M", "-o", str(rss_file)] + cmd
    # The previous command's output is written back to disk by the kernel
    # after it exits; without this, that writeback competes with (and is
    # charged to) whichever command runs next.
    os.sync()
    with (open(stdout_path, "wb") if stdout_path else open(os.devnull, "wb")) as out, \
         open(err_file, "wb") as err:
        t0 = time.perf_counter()
        status = subprocess.run(full, stdout=out, stderr=err).returncode
        wall = time.perf_counter() - t0
    if status != 0:
        die(f"status {status}: {' '.join(cmd)}\n{err_file.read_text(errors='replace')}")
    rss_kib = int(rss_file.read_text().split()[-1])
    rss_file.unlink()
    err_file.unlink()
    return wall, rss_kib / 1024


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def n_outputs(s):
    return sum(1 for line in open(PERF / f"{SPEC.get(s, s)}.dsrv") if line.startswith("out "))


def time_scenario(dir_, rows, runs, s):
    odir = dir_ / "out"
    odir.mkdir(parents=True, exist_ok=True)
    inputs = {"csv": trace(dir_, s, rows, "csv"), "input": trace(dir_, s, rows, "input"),
              "time.csv": trace(dir_, s, rows, "time.csv")}
    for path in inputs.values():          # into the page cache, so no run pays the first read
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    outs = {"vigil_csv": odir / f"{s}.vigil_csv.txt", "vigil_input": odir / f"{s}.vigil_input.txt",
            "rtlola": odir / f"{s}.rtlola.csv"}
    cmds = {"vigil_csv": vigil_cmd(s, inputs["csv"]), "vigil_input": vigil_cmd(s, inputs["input"]),
            "rtlola": rtlola_cmd(s, inputs["time.csv"], outs["rtlola"])}
    res = {k: {"wall_s": [], "max_rss_mib": []} for k in cmds}
    for i in range(runs):                 # interleaved, so drift hits every tool alike
        for k, cmd in cmds.items():
            wall, rss = timed_run(cmd, None if k == "rtlola" else outs[k], odir)
            res[k]["wall_s"].append(round(wall, 4))
            res[k]["max_rss_mib"].append(round(rss, 1))
        print(f"  {s} run {i + 1}/{runs}: " + ", ".join(
            f"{k} {res[k]['wall_s'][-1]:.2f} s" for k in cmds), flush=True)
    # Sanity: every output value was written (vigil text: one line per output per step, NoVal
    # is never produced here; rtlola CSV: a header and one row per step).
    k = n_outputs(s)
    for name, want in (("vigil_csv", rows * k), ("vigil_input", rows * k), ("rtlola", rows + 1)):
        got = count_lines(outs[name])
        if got != want:
            die(f"{s}: {outs[name]} has {got} lines, expected {want}")
        outs[name].unlink()
    odir.rmdir()                          # empty now
    for v in res.values():
        v["median_s"] = statistics.median(v["wall_s"])
        v["max_rss_mib_max"] = max(v["max_rss_mib"])
    res["commands"] = {k: " ".join(c) + ("" if k == "rtlola" else f" > {outs[k]}")
                       for k, c in cmds.items()}
    return res


# ---------------------------------------------------------------- 6. report

def print_table(results, rows, runs):
    print()
    print(f"Whole process, {rows:,} rows, median of {runs} runs (max RSS of any run), "
          "every output value written to a file:")
    head_ = (f"{'scenario':<9} {'vigil csv':>18} {'vigil .input':>18} {'rtlola (csv+time)':>19} "
             f"{'rtlola/vigil(csv)':>18}")
    print(head_)
    print("-" * len(head_))
    for s, r in results.items():
        cell = lambda k: f"{r[k]['median_s']:.3f} s {r[k]['max_rss_mib_max']:>5.0f} MiB"
        ratio = r["rtlola"]["median_s"] / r["vigil_csv"]["median_s"]
        print(f"{s:<9} {cell('vigil_csv'):>18} {cell('vigil_input'):>18} {cell('rtlola'):>19} "
              f"{ratio:>17.1f}×")
    print()
    print("Recorded figures, NOT measured now (/work/shared/perf/README.md, 1,000,000 rows, "
          "median of 5 runs on a 2-core machine):")
    head2 = (f"{'scenario':<9} {'TC dataflow (.input)':>22} {'TC/vigil(.input)':>17} "
             f"{'RTLola 0.11 recorded':>22}")
    print(head2)
    print("-" * len(head2))
    for s, r in results.items():
        if s not in TC_RECORDED:
            print(f"{s:<9} {'not recorded':>22}")
            continue
        tc_s, tc_m = TC_RECORDED[s]
        rl_s, rl_m = RTLOLA_RECORDED[s]
        ratio = tc_s / r["vigil_input"]["median_s"]
        note = "" if rows == 1_000_000 else "  (rows differ: ratio not comparable)"
        print(f"{s:<9} {f'{tc_s:.2f} s {tc_m} MiB':>22} {ratio:>16.1f}× "
              f"{f'{rl_s:.2f} s {rl_m} MiB':>22}{note}")


def version(cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows per trace (1000000)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per command (5)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset")
    ap.add_argument("--dir", type=Path, default=PEERS / "traces",
                    help="traces and outputs (default target/peers/traces)")
    ap.add_argument("--check-rows", type=int, default=1000,
                    help="rows of the equivalence check (1000)")
    ap.add_argument("--no-build", action="store_true", help="use target/release/vigil as it is")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the figures as JSON")
    a = ap.parse_args()
    scenarios = [s for s in a.scenarios.split(",") if s]
    if bad := [s for s in scenarios if s not in SCENARIOS]:
        die(f"unknown scenario(s) {bad}; known: {', '.join(SCENARIOS)}")
    if a.rows < 1 or a.runs < 1 or a.check_rows < 1:
        die("--rows, --runs and --check-rows must be positive")
    dir_ = a.dir.resolve()
    dir_.mkdir(parents=True, exist_ok=True)

    if not os.access(TIME, os.X_OK):
        die(f"{TIME} (GNU time) is needed for the max RSS figures")
    install_rtlola()
    if not a.no_build:
        build_vigil()
    if not VIGIL.exists():
        die(f"{VIGIL} does not exist (run without --no-build)")
    ensure_traces(dir_, a.rows)
    check_equivalence(dir_, a.rows, a.check_rows, scenarios)

    results = {}
    for s in scenarios:
        print(f"timing {s} ({a.runs} runs)", flush=True)
        results[s] = time_scenario(dir_, a.rows, a.runs, s)
    print_table(results, a.rows, a.runs)

    if a.json:
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "rows": a.rows, "runs": a.runs, "cpus": os.cpu_count(),
            "machine": platform.platform(),
            "vigil": version([str(VIGIL), "--version"]),
            "vigil_commit": version(["git", "-C", str(REPO), "rev-parse", "HEAD"]),
            "vigil_worktree_dirty": bool(version(["git", "-C", str(REPO), "status", "--porcelain",
                                                  "--untracked-files=no"])),
            "rtlola": version([str(RTLOLA), "--version"]),
            "method": "whole process, wall time around the child, max RSS from /usr/bin/time %M; "
                      "median of runs; outputs written to files in --dir",
            "scenarios": {s: {**r, "ratio_rtlola_over_vigil_csv":
                              r["rtlola"]["median_s"] / r["vigil_csv"]["median_s"]}
                          for s, r in results.items()},
            "recorded_not_measured": {
                "source": str(PERF / "README.md"),
                "trustworthiness_checker_dataflow_input": {
                    s: {"median_s": TC_RECORDED[s][0], "max_rss_mib": TC_RECORDED[s][1],
                        "ratio_over_vigil_input":
                            TC_RECORDED[s][0] / results[s]["vigil_input"]["median_s"]}
                    for s in results if s in TC_RECORDED},
                "rtlola_0_11_csv": {s: {"median_s": RTLOLA_RECORDED[s][0],
                                        "max_rss_mib": RTLOLA_RECORDED[s][1]}
                                    for s in results if s in RTLOLA_RECORDED},
            },
        }
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
