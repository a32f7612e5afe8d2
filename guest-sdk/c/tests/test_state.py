"""The C SDK's state helpers (src/state.c) against the state conformance suite
(guest-sdk/conformance/state.json), built natively over a memory backend
(state_memory.c) with the machine's C compiler; state_conformance.c runs the steps."""

import json
import subprocess
from pathlib import Path

from test_conformance import SDK, SUITE, build, word

SOURCES = [SDK / "tests" / "state_conformance.c", SDK / "src" / "state.c", SDK / "tests" / "state_memory.c"]
CASES = json.loads((SUITE / "state.json").read_text())["cases"]


def step_line(op, args):
    if op in ("put", "put_str"):
        return f"{op} {word(args[0])} {word(args[1])}"
    if op in ("put_number", "add"):
        return f"{op} {word(args[0])} {args[1]}"
    if op == "get_many":
        return "get_many " + " ".join(word(k) for k in args[0])
    if op == "scan":
        return f"scan {word(args[0])} {word(args[1])} {args[2]}"
    return f"{op} {word(args[0])}"


def expected(op, returns):
    if returns is None:
        return "-"
    if op in ("add", "get_number"):
        return str(returns)
    if op == "get_many":
        return " ".join(word(v) for v in returns)
    if op == "scan":
        return " ".join(f"{word(k)} {word(v)}" for k, v in returns)
    return word(returns)


def run_suite(binary):
    """Names of the failing cases, with what went wrong."""
    lines, checks = [], []
    for case in CASES:
        lines.append("case")
        checks.append(None)
        for step in case["steps"]:
            op = next(k for k in step if k != "returns")
            lines.append(step_line(op, step[op]))
            checks.append((case["name"], f"{op} {step[op]}", expected(op, step["returns"]) if "returns" in step else "ok"))
        lines.append("entries")
        checks.append((case["name"], "the stored entries", " ".join(f"{word(k)} {word(v)}" for k, v in case["state"])))
    out = subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout
    failures = []
    for check, given in zip(checks, out.splitlines()):
        if check and given != check[2]:
            failures.append(f"{check[0]}: {check[1]} gave {given!r}, not {check[2]!r}")
    return failures


def test_the_state_helpers_pass_every_case_of_the_conformance_suite(tmp_path):
    assert run_suite(build(tmp_path, SOURCES)) == []


def test_a_counter_stored_otherwise_fails_the_suite(tmp_path):
    planted = tmp_path / "state.c"
    source = (SDK / "src" / "state.c").read_text()
    planted.write_text(source.replace('"%" PRId64', '"%" PRId64 ".0"').replace('#include "state_backend.h"', f'#include "{SDK / "src" / "state_backend.h"}"'))
    sources = [s if s.name != "state.c" else planted for s in SOURCES]
    assert run_suite(build(tmp_path, sources)) != []
