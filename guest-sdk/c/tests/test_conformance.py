"""The C SDK's packer against the SDK conformance suite (guest-sdk/conformance/),
built natively with the machine's C compiler (conformance.c reads the cases on stdin)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[1]
SUITE = SDK.parent / "conformance"
SOURCES = [SDK / "tests" / "conformance.c", SDK / "src" / "packing.c", SDK / "src" / "lists.c"]


def compiler():
    for name in (os.environ.get("CC"), "clang", "clang-14", "cc", "gcc"):
        if name and shutil.which(name):
            return name
    pytest.fail("No C compiler found: set CC, or install clang (scripts/setup.sh does).")


def build(out: Path, sources=SOURCES) -> Path:
    binary = out / "conformance"
    command = [compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{SDK / 'include'}", f"-I{SDK / 'src'}"]
    command += ["-o", str(binary)] + [str(s) for s in sources]
    subprocess.run(command, check=True)
    return binary


def word(value) -> str:
    """A key, value, topic or header as conformance.c reads it."""
    if value is None:
        return "-"
    raw = bytes.fromhex(value["hex"]) if isinstance(value, dict) else value.encode()
    return "x" + raw.hex()


def script(cases) -> str:
    lines = []
    for case in cases:
        lines.append("case")
        for record in case["records"]:
            headers = record.get("headers", [])
            parts = [
                "record",
                str(record["row"]),
                word(record.get("key")),
                word(record.get("value")),
                word(record.get("topic")),
                str(record["partition"]) if "partition" in record else "-",
                str(len(headers)),
            ]
            for name, value in headers:
                parts += [word(name), word(value)]
            lines.append(" ".join(parts))
        lines.append("end")
    return "\n".join(lines) + "\n"


def packing_failures(binary: Path):
    """Names of the packing cases the built packer gets wrong, with what it made."""
    cases = json.loads((SUITE / "packing.json").read_text())["cases"]
    output = subprocess.run([binary], input=script(cases), capture_output=True, text=True, check=True).stdout
    made_lines = output.splitlines()
    assert len(made_lines) == len(cases), output
    failures = []
    for case, line in zip(cases, made_lines):
        made = json.loads(line)
        for names in ("topics", "header_names"):
            made[names] = [bytes.fromhex(name).decode() for name in made[names]]
        if made != case["packed"]:
            failures.append(f"{case['name']}: made {made}")
    return failures


def test_the_packer_makes_the_packed_lists_of_every_case(tmp_path):
    assert packing_failures(build(tmp_path)) == []


def test_a_packer_that_always_sends_partitions_fails_the_suite(tmp_path):
    broken = tmp_path / "packing.c"
    text = (SDK / "src" / "packing.c").read_text()
    # Every record sets a partition as far as this packer knows.
    broken.write_text(text.replace("if (record->has_partition || p->partitions.len)", "if (1)"))
    assert broken.read_text() != text
    sources = [SOURCES[0], broken, SOURCES[2]]
    failures = packing_failures(build(tmp_path, sources))
    assert any(f.startswith("keys, values and tombstones") for f in failures), failures
