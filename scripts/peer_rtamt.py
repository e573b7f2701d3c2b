#!/usr/bin/env python3
"""Cross-check vigil's STL properties against RTAMT, value by value (issue 39's second opinion).

Not part of CI: it installs RTAMT from PyPI. The Trustworthiness Checker's `mstlo` crate is
vigil's oracle (tests/it/stl.rs); RTAMT, the Python STL library, is a second one, compared
where the two define the same thing: discrete-time robustness of bounded future formulas over
signals sampled together at a fixed period. What it does, in order:

1. Makes a virtual environment in <repo>/target/peers/rtamt-venv (target/ is ignored by git)
   and installs RTAMT 0.4.10 there, unless it is installed already:
       python3 -m venv <repo>/target/peers/rtamt-venv
       <venv>/bin/pip install rtamt==0.4.10
2. Builds vigil with `cargo build` (skip with --no-build; another binary with --vigil PATH).
3. Generates --cases random cases (seeded by --seed): one to three signals sampled together
   every second for 20 to 60 s, values from -10 to 10 with two decimals, and one to four
   properties of nesting depth up to 3 over comparisons (`x > c`, `x < c`, `x >= c`,
   `x <= c`), `!`, `&&`, `||`, `G[a,b]`, `F[a,b]` and `U[0,b]`, with integer bounds up to 5.
4. Runs, per case,
       vigil run props.mstlo --input trace.input --semantics delayed-quantitative --output csv
       vigil run props.mstlo --input trace.input --semantics delayed-qualitative --output csv
   and RTAMT's offline discrete-time evaluation of each property (sampling period 1 s):
       spec = rtamt.StlDiscreteTimeSpecification(); spec.spec = 'out = ...'; spec.evaluate(data)
5. Compares every verdict vigil gives with RTAMT's at the same time: robustness within 1e-9,
   and a Bool verdict with the sign of RTAMT's robustness (where it is not 0, the boundary
   the two libraries' qualitative readings may place differently). RTAMT also evaluates the
   last samples, whose windows run past the trace, over the samples there are; vigil (as the
   checker) gives no verdict until a window's samples have come, so those times are not
   compared. Prints a table (semantics, verdicts compared, agreements, differences) and,
   with --verbose, every difference with its case. Exits 1 if any verdict differs outside the
   documented kinds (KINDS).
6. Writes each case's formulas as `stl_rob(…)` outputs of one DSRV specification (past time:
   docs/language.md, "STL inside a specification"; a `U` read in the past is a since,
   generated there as `S[a, b]` with any near end) over the samples as CSV rows,
       vigil run spec.dsrv --input trace.csv --time ts --output csv
   and compares every step's value with RTAMT's past-time reading of the formula
   (`historically[a:b]`, `once[a:b]`, `since[a:b]`); every value must agree.

ONE_PROPERTY_A_RUN: each property runs alone, over the samples of the signals it reads. In a
run with other signals, mstlo 0.1.1 (the checker's engine, and so vigil, which gives its output)
gives a property's delayed verdict for time t once any signal's sample reaches t plus its
horizon; samples of one time are taken in order of signal name, so a property over `y` alone, in
a run that also samples `x`, gives its verdict when `x`'s sample at the window's end comes, before
`y`'s of that time: the window misses its last sample. That is the checker's reading, kept
(docs/language.md, "STL properties"); RTAMT evaluates a formula over its own signals only.

`U[a,b]` is generated with a = 0 only: mstlo 0.1.1 (and so vigil) ignores `a` (docs/language.md,
"STL properties"), where RTAMT requires the right operand within [t+a, t+b].

Usage (from anywhere; Python 3.11):
    python3 scripts/peer_rtamt.py                  # install, build, 200 cases
    python3 scripts/peer_rtamt.py --no-build --cases 50 --seed 7 --verbose
Options: --no-build, --vigil PATH, --cases N, --seed S, --verbose, --keep DIR.
"""

import argparse
import csv
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(REPO, "target", "peers")
VENV = os.path.join(PEERS, "rtamt-venv")
RTAMT_VERSION = "0.4.10"

# Evaluated by the venv's Python: reads cases as JSON on stdin, prints each property's
# robustness at every sample as JSON.
RTAMT_RUNNER = r"""
import json, sys
import rtamt
out = []
for case in json.load(sys.stdin):
    data = {"time": case["times"]}
    data.update(case["signals"])
    results = {}
    for name, formula in case["properties"]:
        if not formula:
            continue
        spec = rtamt.StlDiscreteTimeSpecification()
        for s in case["signals"]:
            spec.declare_var(s, "float")
        spec.declare_var("out", "float")
        spec.spec = "out = " + formula
        spec.parse()
        results[name] = spec.evaluate(data)
    out.append(results)
json.dump(out, sys.stdout)
"""


def install_rtamt():
    python = os.path.join(VENV, "bin", "python")
    probe = [python, "-c", "import rtamt"]
    if os.path.exists(python) and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"installing RTAMT {RTAMT_VERSION} into {VENV}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    pip = [os.path.join(VENV, "bin", "pip"), "install", "--quiet", f"rtamt=={RTAMT_VERSION}"]
    subprocess.run(pip, check=True)
    return python


class Formula:
    """A generated formula, written both ways, and both ways again read in the past: as in a
    specification's `stl_rob(…)` and as RTAMT's past-time operators (`historically`, `once`)."""

    def __init__(self, vigil, rtamt, spec=None, past=None, parts=()):
        self.vigil = vigil
        self.rtamt = rtamt
        self.spec = vigil if spec is None else spec
        self.past = rtamt if past is None else past
        # A formula with a part that has no form in a specification (`U`) has none either.
        if any(not p.spec for p in parts):
            self.spec = self.past = ""


def gen_formula(rng, signals, depth):
    if depth == 0 or rng.random() < 0.25:
        s = rng.choice(signals)
        c = round(rng.uniform(-6, 6), 1)
        op = rng.choice([">", "<", ">=", "<="])
        text = f"{s} {op} {c}"
        return Formula(text, text)
    kind = rng.choice(["not", "and", "or", "G", "F", "U", "G", "F"])
    if kind == "not":
        f = gen_formula(rng, signals, depth - 1)
        return Formula(
            f"!({f.vigil})", f"not({f.rtamt})", f"!({f.spec})", f"not({f.past})", (f,)
        )
    if kind in ("and", "or"):
        a = gen_formula(rng, signals, depth - 1)
        b = gen_formula(rng, signals, depth - 1)
        op_v, op_r = ("&&", "and") if kind == "and" else ("||", "or")
        return Formula(
            f"({a.vigil}) {op_v} ({b.vigil})",
            f"({a.rtamt}) {op_r} ({b.rtamt})",
            f"({a.spec}) {op_v} ({b.spec})",
            f"({a.past}) {op_r} ({b.past})",
            (a, b),
        )
    lo = rng.randint(0, 3)
    hi = lo + rng.randint(0, 3)
    if kind == "U":
        a = gen_formula(rng, signals, depth - 1)
        b = gen_formula(rng, signals, depth - 1)
        # Read in the past (a specification's formulas), an until is a since: `S[a, b]`, with
        # any near end (RTAMT's `since[a:b]` takes it, as vigil's since does).
        near = rng.randint(0, hi)
        return Formula(
            f"({a.vigil}) U[0,{hi}] ({b.vigil})",
            f"({a.rtamt}) until[0:{hi}] ({b.rtamt})",
            f"({a.spec}) S[{near}s, {hi}s] ({b.spec})",
            f"({a.past}) since[{near}:{hi}] ({b.past})",
            (a, b),
        )
    f = gen_formula(rng, signals, depth - 1)
    word = "always" if kind == "G" else "eventually"
    past = "historically" if kind == "G" else "once"
    return Formula(
        f"{kind}[{lo},{hi}]({f.vigil})",
        f"{word}[{lo}:{hi}]({f.rtamt})",
        f"{kind}[{lo}s, {hi}s]({f.spec})",
        f"{past}[{lo}:{hi}]({f.past})",
        (f,),
    )


def gen_case(rng):
    signals = ["x", "y", "z"][: rng.randint(1, 3)]
    n = rng.randint(20, 60)
    values = {s: [round(rng.uniform(-10, 10), 2) for _ in range(n)] for s in signals}
    props = []
    for i in range(rng.randint(1, 4)):
        f = gen_formula(rng, signals, rng.randint(1, 3))
        props.append((f"p{i}", f))
    return {"signals": signals, "n": n, "values": values, "props": props}


def write_property(case, name, formula, folder):
    """One property's files: the property, and the samples of the signals it reads only (see
    ONE_PROPERTY_A_RUN)."""
    with open(os.path.join(folder, "props.mstlo"), "w") as f:
        f.write(f"{name}: {formula.vigil}\n")
    reads = [s for s in case["signals"] if re.search(rf"\b{s}\b", formula.vigil)]
    with open(os.path.join(folder, "trace.input"), "w") as f:
        for i in range(case["n"]):
            for j, s in enumerate(reads):
                head = f"{i}: " if j == 0 else ""
                v = case["values"][s][i]
                f.write(f'{head}{s} = {{"time": {i * 1000}, "value": {v}}}\n')


def write_spec(case, props, folder, vigil=None):
    """A specification of `props` as `stl_rob(…)` outputs over the case's signals, run over its
    samples as rows (`--time ts`); each step's output values, by property."""
    vigil = vigil or VIGIL[0]
    lines = [f"in {s}: Float" for s in case["signals"]] + ["in ts: Int"]
    for name, f in props:
        lines += [f"out {name}: Float", f"{name} = stl_rob({f.spec})"]
    spec = os.path.join(folder, "spec.dsrv")
    with open(spec, "w") as out:
        out.write("\n".join(lines) + "\n")
    trace = os.path.join(folder, "trace.csv")
    with open(trace, "w") as out:
        out.write(",".join(case["signals"] + ["ts"]) + "\n")
        for i in range(case["n"]):
            row = [str(case["values"][s][i]) for s in case["signals"]] + [str(i)]
            out.write(",".join(row) + "\n")
    cmd = [vigil, "run", spec, "--input", trace, "--time", "ts", "--output", "csv"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"vigil failed on {spec}: {done.stderr}")
    return [
        {name: row[name] for name, _ in props}
        for row in csv.DictReader(io.StringIO(done.stdout))
    ]


# The vigil binary the runs use (set from --vigil).
VIGIL = [None]


def run_vigil(vigil, folder, semantics):
    cmd = [
        vigil, "run", os.path.join(folder, "props.mstlo"),
        "--input", os.path.join(folder, "trace.input"),
        "--semantics", semantics, "--output", "csv",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"vigil failed on {folder}: {done.stderr}")
    verdicts = []
    for row in csv.DictReader(io.StringIO(done.stdout)):
        verdicts.append((row["property"], int(row["time"]) // 1000, row["value"]))
    return verdicts


# The kinds of property compared apart, and why vigil (as the checker's mstlo 0.1.1) differs
# from RTAMT on the kinds it does (empty: every verdict must agree).
KINDS = {
    "one signal": "",
    "several signals": "formulas over several signals sampled together: mstlo 0.1.1 synchronizes "
    "them (zero-order hold) into one sample per signal at each time, taken in signal-name order, "
    "and its temporal operators read those synchronized samples, so a window's verdict can be "
    "given before the samples of its last time have all come (a G/F over a point interval "
    "then holds no value: +inf/-inf). vigil gives the checker's output (tests/it/stl.rs compares "
    "it with mstlo on generated formulas; the differences run through mstlo by hand were "
    "mstlo's own); RTAMT evaluates every signal at every time",
    "until": "mstlo 0.1.1 pairs U's operands by position and ignores a (docs/language.md, "
    "'STL properties'); RTAMT takes the standard max over t' in [t+a, t+b] of "
    "min(psi(t'), min phi over [t, t'])",
}


def kind_of(formula):
    """Which of KINDS a property is."""
    if " U[" in formula:
        return "until"
    if len(set(re.findall(r"\b[xyz]\b", formula))) > 1:
        return "several signals"
    return "one signal"


def compare(semantics, value, want):
    """Whether vigil's verdict `value` agrees with RTAMT's robustness `want` (None: RTAMT has
    none at that time, a difference), or None for a Bool at robustness 0 (not compared)."""
    if want is None:
        return False
    if semantics == "delayed-qualitative":
        if abs(want) < 1e-9:
            return None
        return (value == "true") == (want > 0)
    got = float(value)
    # Equal infinities (an empty interval's vacuous verdict) agree; their difference is NaN.
    return got == want or abs(got - want) <= 1e-9 * max(1.0, abs(want))


def run_rtamt(python, cases, form):
    """RTAMT's robustness of each case's properties, written by `form`, at every sample."""
    payload = [
        {
            "times": list(range(c["n"])),
            "signals": c["values"],
            "properties": [(name, form(f)) for name, f in c["props"]],
        }
        for c in cases
    ]
    done = subprocess.run(
        [python, "-c", RTAMT_RUNNER], input=json.dumps(payload), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"RTAMT failed: {done.stderr}")
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--vigil", default=os.path.join(REPO, "target", "debug", "vigil"))
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep")
    args = ap.parse_args()

    VIGIL[0] = args.vigil
    python = install_rtamt()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--quiet"], cwd=REPO, check=True)
    rng = random.Random(args.seed)
    cases = [gen_case(rng) for _ in range(args.cases)]
    root = args.keep or tempfile.mkdtemp(prefix="vigil-rtamt-")
    os.makedirs(root, exist_ok=True)

    # Each property's robustness at every sample: future time, and past time.
    rtamt = run_rtamt(python, cases, lambda f: f.rtamt)
    past = run_rtamt(python, cases, lambda f: f.past)

    # Per kind of property (KINDS) and semantics: verdicts compared, agreements, differences.
    tally = {
        (kind, s): [0, 0, 0]
        for kind in KINDS
        for s in ("delayed-quantitative", "delayed-qualitative")
    }
    boundary = 0
    differences = []
    for k, case in enumerate(cases):
        robust = {name: {int(t): r for t, r in rows} for name, rows in rtamt[k].items()}
        for name, formula in case["props"]:
            folder = os.path.join(root, f"case{k:03}-{name}")
            os.makedirs(folder, exist_ok=True)
            write_property(case, name, formula, folder)
            kind = kind_of(formula.vigil)
            for semantics in ("delayed-quantitative", "delayed-qualitative"):
                entry = tally[(kind, semantics)]
                for _, t, value in run_vigil(args.vigil, folder, semantics):
                    verdict = compare(semantics, value, robust[name].get(t))
                    if verdict is None:
                        boundary += 1
                        continue
                    entry[0] += 1
                    entry[1 if verdict else 2] += 1
                    if not verdict:
                        want = robust[name].get(t)
                        differences.append((kind, folder, semantics, name, t, value, want))

    # Formulas inside a specification (`stl_rob`, past time) against RTAMT's past-time operators:
    # those without a since, and those with one.
    in_spec = [0, 0, 0]
    in_spec_since = [0, 0, 0]
    for k, case in enumerate(cases):
        props = [(name, f) for name, f in case["props"] if f.spec]
        if not props:
            continue
        folder = os.path.join(root, f"case{k:03}-spec")
        os.makedirs(folder, exist_ok=True)
        columns = write_spec(case, props, folder)
        since = {name for name, f in props if " S[" in f.spec}
        for step, values in enumerate(columns):
            for name, value in values.items():
                want = past[k][name][step][1]
                ok = compare("delayed-quantitative", value, want)
                tally_spec = in_spec_since if name in since else in_spec
                tally_spec[0] += 1
                tally_spec[1 if ok else 2] += 1
                if not ok:
                    differences.append(("in a specification", folder, "stl_rob", name, step, value, want))

    print(f"{args.cases} cases (seed {args.seed}), files in {root}")
    print("| properties | semantics | verdicts compared | agree | differ |")
    print("|---|---|---|---|---|")
    for (kind, semantics), (n, ok, bad) in tally.items():
        print(f"| {kind} | {semantics} | {n} | {ok} | {bad} |")
    print(f"| in a specification, `stl_rob` (past time) | RTAMT's `historically`/`once` | {in_spec[0]} | {in_spec[1]} | {in_spec[2]} |")
    print(f"| in a specification, with a since `S[a, b]` | RTAMT's `since[a:b]` | {in_spec_since[0]} | {in_spec_since[1]} | {in_spec_since[2]} |")
    print(f"(qualitative verdicts at robustness 0, not compared: {boundary})")
    for kind, why in KINDS.items():
        if why:
            print(f"{kind}: {why}")
    formulas = {}
    for k, case in enumerate(cases):
        for name, f in case["props"]:
            formulas[(os.path.join(root, f"case{k:03}-{name}"), name)] = f
    unexpected = [d for d in differences if not KINDS.get(d[0], "")]
    shown = differences if args.verbose else unexpected
    for kind, folder, semantics, name, t, value, want in shown:
        f = formulas.get((folder, name))
        text = f.vigil if f else name
        print(f"{kind} {folder} {semantics} {name} = {text} at {t} s: vigil {value}, RTAMT {want}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if unexpected else 0)


if __name__ == "__main__":
    main()
