"""The state helpers against the conformance suite (guest-sdk/conformance/state.json),
in the dict the SDK keeps outside a module."""

import json
import unittest
from pathlib import Path

from sluice_transform import state

SUITE = json.loads((Path(__file__).resolve().parents[2] / "conformance/state.json").read_text())


def as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes.fromhex(value["hex"])


def maybe(value):
    return None if value is None else as_bytes(value)


def run_step(op, args):
    key = args[0]
    if op == "put":
        return state.put(as_bytes(key), as_bytes(args[1]))
    if op == "put_str":
        return state.put_str(key, args[1])
    if op == "put_number":
        return state.put_int(key, args[1])
    if op == "add":
        return state.add(key, args[1])
    if op == "delete":
        return state.delete(as_bytes(key))
    if op == "get":
        return state.get(as_bytes(key))
    if op == "get_str":
        return state.get_str(key)
    if op == "get_number":
        return state.get_int(key)
    if op == "get_many":
        return state.get_many([as_bytes(k) for k in key])
    if op == "scan":
        return state.scan(as_bytes(key), maybe(args[1]), args[2])
    raise ValueError(f"unknown step {op}")


def expected(op, returns):
    if op == "get":
        return maybe(returns)
    if op == "get_many":
        return [maybe(v) for v in returns]
    if op == "scan":
        return [(as_bytes(k), as_bytes(v)) for k, v in returns]
    return returns


def failures():
    failed = []
    for case in SUITE["cases"]:
        state.clear()
        try:
            for step in case["steps"]:
                op = next(k for k in step if k != "returns")
                given = run_step(op, step[op])
                if "returns" in step:
                    want = expected(op, step["returns"])
                    assert given == want, f"{op} {step[op]}: {given!r} != {want!r}"
            stored = list(state.entries())
            want = [(as_bytes(k), as_bytes(v)) for k, v in case["state"]]
            assert stored == want, f"the stored entries: {stored!r} != {want!r}"
        except AssertionError as error:
            failed.append(f"{case['name']}: {error}")
    return failed


class StateTest(unittest.TestCase):
    def test_the_helpers_pass_every_case_of_the_conformance_suite(self):
        self.assertEqual(failures(), [])

    def test_a_counter_stored_otherwise_fails_the_suite(self):
        original = state.put_int
        state.put_int = lambda key, value: state.put_str(key, f"{value}.0")
        try:
            self.assertNotEqual(failures(), [])
        finally:
            state.put_int = original

    def test_json_and_floats_round_trip(self):
        state.clear()
        state.put_json("deal/1", {"stage": "won", "amount": 5})
        self.assertEqual(state.get_json("deal/1"), {"stage": "won", "amount": 5})
        self.assertEqual(state.get_str("deal/1"), '{"stage":"won","amount":5}')
        state.put_float("sum", 12.5)
        self.assertEqual(state.get_float("sum"), 12.5)
        self.assertEqual(state.get_str("sum"), "12.5")
        with self.assertRaises(TypeError):
            state.put(1, "x")
        state.clear()
        self.assertEqual(list(state.entries()), [])


if __name__ == "__main__":
    unittest.main()
