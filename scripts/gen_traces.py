#!/usr/bin/env python3
"""The project's copy of ../shared/perf/gen_traces.py, with sparse traces beside the dense ones.

usage: gen_traces.py N OUTDIR
Writes OUTDIR/{add,counter,chain}_N.{csv,input} exactly as the shared script does (x and y uniform
in [-20, 20], flag a pseudo-random Bool, from one fixed 64-bit LCG), and OUTDIR/chain_sparse_N
.{csv,input,jsonl}: the same values, but each row sets only one of x, y and flag (chosen by a second
LCG), as sparse telemetry does (a few sensors per event).
"""
import os, sys

M = (1 << 64) - 1

def lcg(state):
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) & M
        yield state >> 33

def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    draw = lcg(12345)
    xs, ys, fs = [], [], []
    for _ in range(n):
        xs.append(next(draw) % 41 - 20)
        ys.append(next(draw) % 41 - 20)
        fs.append(next(draw) % 2 == 0)
    b = lambda v: "true" if v else "false"
    with open(f"{out}/add_{n}.input", "w") as f:
        f.write("".join(f"{i}: x = {xs[i]}\n   y = {ys[i]}\n" for i in range(n)))
    with open(f"{out}/add_{n}.csv", "w") as f:
        f.write("x,y\n" + "".join(f"{xs[i]},{ys[i]}\n" for i in range(n)))
    with open(f"{out}/counter_{n}.input", "w") as f:
        f.write("".join(f"{i}: x = {xs[i]}\n" for i in range(n)))
    with open(f"{out}/counter_{n}.csv", "w") as f:
        f.write("x\n" + "".join(f"{xs[i]}\n" for i in range(n)))
    with open(f"{out}/chain_{n}.input", "w") as f:
        f.write("".join(f"{i}: x = {xs[i]}\n   y = {ys[i]}\n   flag = {b(fs[i])}\n" for i in range(n)))
    with open(f"{out}/chain_{n}.csv", "w") as f:
        f.write("x,y,flag\n" + "".join(f"{xs[i]},{ys[i]},{b(fs[i])}\n" for i in range(n)))
    # Sparse chain: row i sets only input picks[i] (0 = x, 1 = y, 2 = flag).
    pick = lcg(67890)
    picks = [next(pick) % 3 for _ in range(n)]
    cells = [(f"x", str(xs[i])) if p == 0 else ("y", str(ys[i])) if p == 1 else ("flag", b(fs[i]))
             for i, p in enumerate(picks)]
    with open(f"{out}/chain_sparse_{n}.input", "w") as f:
        f.write("".join(f"{i}: {k} = {v}\n" for i, (k, v) in enumerate(cells)))
    with open(f"{out}/chain_sparse_{n}.jsonl", "w") as f:
        f.write("".join(f'{{"{k}": {v}}}\n' for k, v in cells))
    with open(f"{out}/chain_sparse_{n}.csv", "w") as f:
        col = {"x": 0, "y": 1, "flag": 2}
        lines = []
        for k, v in cells:
            row = ["", "", ""]
            row[col[k]] = v
            lines.append(",".join(row) + "\n")
        f.write("x,y,flag\n" + "".join(lines))

if __name__ == "__main__":
    main()
