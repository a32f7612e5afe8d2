#!/usr/bin/env python3
"""Fails when modules of one crate import each other in a cycle.

Reads every crate under the given folders (default: host/ and guest-sdk/rust), maps each
source file to its module path, and draws an edge from a module to every module it names
through `crate::`, `super::`, `self::` or a child module's name, in `use` items and in
paths in code. Unit-test modules (`#[cfg(test)] mod`) are left out: a test may use anything.
A strongly connected component of more than one module is a cycle; each is printed with
the lines that close it, and the exit status is 1.

    scripts/module_cycles.py [folder ...]
"""

import re
import sys
from pathlib import Path

USE_ITEM = re.compile(r"\buse\s+([^;]+);", re.S)
PUB_OR_USE = re.compile(r"(pub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);", re.S)
PATH_IN_CODE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)
TEST_START = re.compile(r"^\s*#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", re.M)
TEST_MOD_DECL = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def crate_roots(folders):
    for folder in folders:
        for manifest in sorted(Path(folder).rglob("Cargo.toml")):
            if "target" in manifest.parts or "node_modules" in manifest.parts:
                continue
            src = manifest.parent / "src"
            for root in ("lib.rs", "main.rs"):
                if (src / root).exists():
                    yield src / root


def module_files(root):
    """Maps module paths (tuples) to files, following `mod x;` declarations."""
    modules = {}

    def visit(path, file, child_dir):
        modules[path] = file
        text = code_of(file)
        for name in MOD_DECL.findall(text):
            for candidate in (child_dir / f"{name}.rs", child_dir / name / "mod.rs"):
                if candidate.exists():
                    visit(path + (name,), candidate, child_dir / name)
                    break

    src = root.parent
    visit((), root, src)
    return modules


def code_of(file):
    text = file.read_text()
    text = COMMENT.sub("", text)
    text = TEST_MOD_DECL.sub("", text)
    test = TEST_START.search(text)
    return text[: test.start()] if test else text


def expand_use_tree(tree):
    """Expands `a::{b, c::{d, e}}` into ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix = tree[:brace]
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    paths = []
    for part in parts:
        if part:
            paths.extend(prefix + p for p in expand_use_tree(part))
    return paths


def resolve(module, segments, children):
    """Turns a path as written in `module` into an absolute path, or None if external."""
    if not segments:
        return None
    head = segments[0]
    if head == "crate":
        return tuple(segments[1:])
    if head == "self":
        return module + tuple(segments[1:])
    if head == "super":
        base = module
        while segments and segments[0] == "super":
            base = base[:-1]
            segments = segments[1:]
        return base + tuple(segments)
    if head in children:
        return module + tuple(segments)
    return None


def written_paths(module, modules):
    """Every path `module` writes, as (path, is a `pub use`), before resolution."""
    text = code_of(modules[module])
    children = {p[-1] for p in modules if p[:-1] == module and len(p) == len(module) + 1}
    written = []
    for visibility, tree in PUB_OR_USE.findall(text):
        written.extend((path, bool(visibility)) for path in expand_use_tree(tree))
    without_uses = USE_ITEM.sub("", text)
    written.extend((path, False) for path in PATH_IN_CODE.findall(without_uses))
    for child in children:
        pattern = rf"(?<![:\w]){child}(?:::[A-Za-z_]\w*)+"
        written.extend((path, False) for path in re.findall(pattern, without_uses))
    return [(path.split("::"), reexport, children) for path, reexport in written]


def edges_of(modules):
    """Edges from each module to the modules it uses, through re-exports.

    A module's use of its own ancestors (`super::Service` in a file of `impl Service`) is
    how Rust splits one type's code across files, not a dependency between peers, so it
    draws no edge.
    """
    resolved = {}
    reexports = {m: {} for m in modules}
    for module in modules:
        resolved[module] = []
        for segments, reexport, children in written_paths(module, modules):
            target = resolve(module, segments, children)
            if target is None:
                continue
            resolved[module].append(("::".join(segments), target))
            if reexport and target:
                reexports[module][target[-1]] = target

    def owner(target):
        seen = set()
        while target not in modules:
            parent, item = target[:-1], target[-1]
            if parent in modules and item in reexports[parent] and target not in seen:
                seen.add(target)
                target = reexports[parent][item]
            elif parent:
                target = parent
            else:
                return ()
        return target

    edges = {m: {} for m in modules}
    for module, paths in resolved.items():
        for path, target in paths:
            target = owner(target)
            if target == module or target == () or module[: len(target)] == target:
                continue
            edges[module].setdefault(target, path)
    return edges


def cycles(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            connect(v)
    return found


def name(crate, module):
    return "::".join((crate,) + module)


def main(folders):
    total = 0
    for root in crate_roots(folders):
        crate = root.parent.parent.name
        modules = module_files(root)
        edges = edges_of(modules)
        for component in cycles(edges):
            total += 1
            members = set(component)
            print(f"cycle in {crate} ({root.parent.parent}):")
            for module in component:
                for target, path in sorted(edges[module].items()):
                    if target in members:
                        print(f"  {name(crate, module)} -> {name(crate, target)}  (`{path}`)")
    if total:
        print(f"{total} import cycle(s): move what both sides need into a leaf module.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["host", "guest-sdk/rust"]))
