#!/usr/bin/env python3
"""Compare vigil with the Trustworthiness Checker on the checker's own examples and fixtures
(issue 40). Not run in CI: it needs the checker.

    python3 scripts/tc-compare.py CHECKER_DIR CHECKER_BIN [--vigil PATH] [--timeout S] [-v]

CHECKER_DIR is a checkout of the checker's repository and CHECKER_BIN its binary
(`trustworthiness_checker`), built as the checker's own README says; this script neither
fetches nor builds it, and copies nothing of it: the checker's files are read where they lie
(their licence is the checker's own), and every file the script writes goes to a temporary
directory removed at the end. --vigil defaults to target/release/vigil
($CARGO_TARGET_DIR/release/vigil when that is set); build it first (`cargo build --release`).

It runs three kinds of comparisons, each a pair of runs over the same files:

1. *examples*: every `examples/**/NAME.dsrv` that has a trace `NAME.input` beside it;
2. *fixtures*: every `tests/fixtures/NAME.dsrv` that has a trace `NAME.input` beside it;
3. *echo*: every `.input` trace under `examples/`, `tests/fixtures/` and `fixtures/` (traces
   without a specification of their own among them, such as the STL traces of JSON objects),
   under a specification generated for it: each name the trace assigns an untyped input,
   echoed by an output `echo_NAME = NAME`, so that the two readers' values are compared
   directly.

For each, the reference is the checker with `--runtime dataflow` (the synchronous runtime
whose semantics vigil follows):

    CHECKER_BIN SPEC --input-file TRACE --output-stdout --runtime dataflow
    VIGIL run SPEC --input TRACE

and the two standard outputs must be equal byte for byte. A trace the checker refuses (its
parser reads the whole file before it runs, so it prints no output) agrees when vigil refuses
it too (vigil prints the rows before the malformed one, then a located error). The checker's
default runtime (asynchronous) is run as well, and where its output differs from the
dataflow runtime's the script says so (`examples/past.dsrv`: the default runtime prints one
more step); the dataflow runtime stays the reference.

The last lines count the agreeing comparisons of each kind; the exit status is 1 if any
comparison disagrees, 2 on a usage error.
"""

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# A line of an `.input` trace that assigns a name: an optional step header, then `name =`.
ASSIGNMENT = re.compile(r"^\s*(?:\d+\s*:)?\s*([A-Za-z_][A-Za-z0-9_]*)\s*=")

# vigil's keywords, which cannot name a generated input (a trace assigning one is compared
# without it).
KEYWORDS = {"in", "out", "aux", "var", "trigger", "if", "then", "else", "true", "false"}


def run(cmd, timeout):
    """Runs cmd: (exit status or None on a timeout, stdout, stderr)."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s"
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    return p.returncode, out, err


def pairs(root, folder, recursive):
    """The (spec, trace) pairs under root/folder: NAME.dsrv with NAME.input beside it."""
    base = root / folder
    if not base.is_dir():
        return []
    specs = base.rglob("*.dsrv") if recursive else base.glob("*.dsrv")
    return [(s, s.with_suffix(".input")) for s in sorted(specs) if s.with_suffix(".input").is_file()]


def echo_spec(trace):
    """A specification echoing every name trace assigns, or None if it assigns none."""
    names = []
    try:
        text = trace.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        m = ASSIGNMENT.match(line)
        if m and m.group(1) not in names and m.group(1) not in KEYWORDS:
            names.append(m.group(1))
    if not names:
        return None
    taken = set(names)
    lines = [f"in {n}" for n in names]
    outs = []
    for n in names:
        out = f"echo_{n}"
        # An output name never collides with an input the trace also assigns.
        while out in taken:
            out = "echo_" + out
        taken.add(out)
        outs.append((out, n))
    lines += [f"out {o}" for o, _ in outs]
    lines += [f"{o} = {n}" for o, n in outs]
    return "\n".join(lines) + "\n"


def compare(label, spec, trace, args):
    """Runs both monitors on one pair; prints the verdict. Returns True if they agree."""
    checker = [args.checker_bin, str(spec), "--input-file", str(trace), "--output-stdout"]
    ref_status, ref_out, ref_err = run(checker + ["--runtime", "dataflow"], args.timeout)
    default_status, default_out, _ = run(checker, args.timeout)
    status, out, err = run([args.vigil, "run", str(spec), "--input", str(trace)], args.timeout)
    notes = []
    if default_status == 0 and ref_status == 0 and default_out != ref_out:
        notes.append(
            "the checker's default runtime differs from its dataflow runtime (the reference): "
            f"{len(default_out.splitlines())} lines against {len(ref_out.splitlines())}"
        )
    if ref_status is None:
        agree = False
        why = f"the checker timed out ({ref_err})"
    elif ref_status != 0:
        # The checker parses the whole trace before it runs, so a trace it refuses gives no
        # output; vigil streams, so it prints the rows before the bad one and then refuses.
        agree = status is not None and status != 0
        why = (
            "both refuse the trace"
            if agree
            else f"the checker refuses the trace (exit {ref_status}), vigil exits {status}"
        )
    elif status != 0:
        agree = False
        why = f"vigil exits {status}: {err.strip().splitlines()[-1] if err.strip() else ''}"
    else:
        agree = out == ref_out
        why = "" if agree else "the outputs differ"
    verdict = "agree " if agree else "DIFFER"
    print(f"{verdict} {label}" + (f" ({why})" if why and agree else ""))
    for n in notes:
        print(f"       note: {n}")
    if not agree:
        print(f"       {why}")
        if ref_status == 0 and status is not None:
            diff = difflib.unified_diff(
                ref_out.splitlines(), out.splitlines(), "checker (dataflow)", "vigil", lineterm=""
            )
            shown = list(diff)
            limit = None if args.verbose else 20
            for line in shown[:limit]:
                print(f"       {line}")
            if limit is not None and len(shown) > limit:
                print(f"       … {len(shown) - limit} more diff lines (-v shows all)")
        if args.verbose and ref_err.strip():
            print("       checker stderr: " + ref_err.strip().replace("\n", "\n       "))
    return agree


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checker_dir", type=Path, help="a checkout of the checker's repository")
    p.add_argument("checker_bin", help="the checker's binary (trustworthiness_checker)")
    target = os.environ.get("CARGO_TARGET_DIR", str(Path(__file__).resolve().parent.parent / "target"))
    p.add_argument("--vigil", default=str(Path(target) / "release" / "vigil"))
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per run (default 60)")
    p.add_argument("-v", "--verbose", action="store_true", help="whole diffs and the checker's errors")
    args = p.parse_args()
    root = args.checker_dir.resolve()
    for path, what in [(root / "examples", "the checker's examples/"), (Path(args.vigil), "vigil")]:
        if not path.exists():
            print(f"error: {what} not found at {path}", file=sys.stderr)
            return 2
    if not (os.access(args.checker_bin, os.X_OK) or Path(args.checker_bin).is_file()):
        print(f"error: the checker's binary not found at {args.checker_bin}", file=sys.stderr)
        return 2

    tallies = []
    for kind, folder, recursive in [("examples", "examples", True), ("fixtures", "tests/fixtures", False)]:
        found = pairs(root, folder, recursive)
        agreed = sum(
            compare(f"{kind}: {s.relative_to(root)} + {t.name}", s, t, args) for s, t in found
        )
        tallies.append((kind, agreed, len(found)))

    traces = sorted(
        t for folder in ["examples", "tests/fixtures", "fixtures"] if (root / folder).is_dir()
        for t in (root / folder).rglob("*.input")
    )
    agreed = total = 0
    with tempfile.TemporaryDirectory(prefix="tc-compare-") as tmp:
        for i, trace in enumerate(traces):
            spec_text = echo_spec(trace)
            if spec_text is None:
                print(f"skip   echo: {trace.relative_to(root)} (it assigns no name)")
                continue
            spec = Path(tmp) / f"echo{i}.dsrv"
            spec.write_text(spec_text)
            total += 1
            agreed += compare(f"echo: {trace.relative_to(root)}", spec, trace, args)
    tallies.append(("echo", agreed, total))

    print()
    for kind, agreed, total in tallies:
        print(f"{kind}: {agreed} of {total} agree")
    return 0 if all(a == t for _, a, t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
