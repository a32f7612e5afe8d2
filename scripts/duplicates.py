#!/usr/bin/env python3
"""Checks that `sluice` is built with one version of each crate, except the ones
listed here, which its dependencies hold at two versions (each with the reason).

Every version compiled is build time on a user's machine (`cargo install`, the demo's
first run), so a `cargo update` that brings back a second version fails the test
command. A listed crate that stops being duplicated fails too: remove it here.

Usage: scripts/duplicates.py [--list]   (--list prints the versions and exits)
"""

import re
import subprocess
import sys
from collections import defaultdict

# Crate -> why two versions of it are built. Each names the dependents that disagree.
ALLOWED = {
    "base64": "object_store 0.13 and prost-reflect ask 0.22; arrow 59.3 and hyper-util 0.23",
    "cpufeatures": "sha2 0.10 (cranelift, ours) asks 0.2; chacha20 (rand 0.10) 0.3",
    "getrandom": "ring asks 0.2, rand 0.9 (delta_kernel) 0.3, rand 0.10 (object_store, wasmtime-wasi) 0.4",
    "hashbrown": "gimli (wasmtime) asks 0.16; indexmap and the rest 0.17",
    "io-lifetimes": "cap-primitives 4 asks 3; its fs-set-times 0.20 asks 2",
    "rand": "delta_kernel asks 0.9; object_store 0.13, uuid and wasmtime-wasi 0.10",
    "rand_core": "follows rand",
    "reqwest": "delta_kernel's default engine asks 0.13; object_store 0.13 (arrow 59) asks 0.12",
    "unicode-width": "miette (protox) asks 0.1; indicatif 0.2",
}

LINE = re.compile(r"^([A-Za-z0-9_-]+) v(\S+)")


def versions() -> dict[str, set[str]]:
    """Crate -> the versions `cargo tree` builds for `sluice` (runtime and build)."""
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-p", "sluice", "-e", "normal,build",
         "--duplicates", "--depth", "0"],
        check=True, capture_output=True, text=True,
    ).stdout
    found: dict[str, set[str]] = defaultdict(set)
    for line in out.splitlines():
        match = LINE.match(line)
        if match:
            found[match.group(1)].add(match.group(2))
    # The same version listed twice is one crate built with two feature sets.
    return {name: v for name, v in found.items() if len(v) > 1}


def main() -> int:
    found = versions()
    if "--list" in sys.argv:
        for name in sorted(found):
            print(name, " ".join(sorted(found[name])))
        return 0
    new = sorted(set(found) - set(ALLOWED))
    gone = sorted(set(ALLOWED) - set(found))
    for name in new:
        print(f"sluice builds {name} at {', '.join(sorted(found[name]))}: align its "
              "dependents on one version (cargo tree -i), or list it in "
              "scripts/duplicates.py with the reason.", file=sys.stderr)
    for name in gone:
        print(f"{name} is built at one version now: remove it from ALLOWED in "
              "scripts/duplicates.py.", file=sys.stderr)
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
