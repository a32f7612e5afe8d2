"""Tests of module_cycles.py on small crates written for each case."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("module_cycles.py")


def crate(tmp_path, files):
    root = tmp_path / "k"
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text('[package]\nname = "k"\n')
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )


def test_two_modules_that_import_each_other_are_a_cycle(tmp_path):
    run = crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A(B);\n",
            "b.rs": "pub struct B;\npub fn f() { let _ = crate::a::A; }\n",
        },
    )
    assert run.returncode == 1
    assert "k::a -> k::b  (`crate::b::B`)" in run.stdout
    assert "k::b -> k::a  (`crate::a::A`)" in run.stdout


def test_a_cycle_through_a_re_export_and_a_use_group_is_found(tmp_path):
    run = crate(
        tmp_path,
        {
            "lib.rs": "mod config;\nmod log;\npub use log::Topic;\n",
            "config.rs": "use crate::{Topic as T};\npub struct Config(T);\n",
            "log.rs": "use crate::config::Config;\npub struct Topic;\npub struct Log(Config);\n",
        },
    )
    assert run.returncode == 1
    assert "k::config -> k::log" in run.stdout


def test_a_leaf_both_use_a_child_using_its_parent_and_tests_are_no_cycle(tmp_path):
    run = crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\nmod leaf;\nmod service;\n",
            "a.rs": "use crate::leaf::L;\n#[cfg(test)]\nmod tests {\n    use crate::b::f;\n}\n",
            "b.rs": "use crate::leaf::L;\nuse crate::a;\npub fn f() {}\n",
            "leaf.rs": "pub struct L;\n",
            "service.rs": "mod part;\npub struct Service;\nfn g() { part::h(); }\n",
            "service/part.rs": "use super::Service;\npub fn h() {}\n",
        },
    )
    assert run.returncode == 0, run.stdout
    assert run.stdout == ""
