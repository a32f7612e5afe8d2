"""Unit tests of samples.py: python3 -m unittest bench/e2e/test_samples.py"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from samples import rounds, speed_ratio, spread  # noqa: E402


class SamplesTest(unittest.TestCase):
    def test_rounds_interleave_and_rotate(self):
        order = rounds(["eos", "native", "raw"], 3)
        self.assertEqual([name for _, name in order[:3]], ["eos", "native", "raw"])
        self.assertEqual([name for _, name in order[3:6]], ["native", "raw", "eos"])
        self.assertEqual(sorted({i for i, _ in order}), [0, 1, 2])
        self.assertEqual(len(order), 9)

    def test_a_ratio_is_an_interval_that_holds_the_spread(self):
        fast = [1.0, 1.1, 0.9, 1.0, 1.05]
        slow = [2.0, 2.2, 1.8, 2.1, 1.9]
        low, middle, high = speed_ratio(slow, fast)
        self.assertLess(low, middle)
        self.assertLess(middle, high)
        self.assertAlmostEqual(middle, 0.5, delta=0.05)
        self.assertGreater(low, 0.4)
        self.assertLess(high, 0.6)

    def test_one_slow_baseline_sample_widens_the_interval_instead_of_moving_it(self):
        contestant = [1.0, 1.0, 1.0, 1.0, 1.0]
        baseline = [1.0, 1.0, 1.0, 1.0, 3.0]
        low, middle, _ = speed_ratio(contestant, baseline)
        self.assertAlmostEqual(middle, 1.0)
        self.assertAlmostEqual(low, 1.0)

    def test_one_sample_a_side_is_that_ratio(self):
        self.assertEqual(speed_ratio([2.0], [1.0]), (0.5, 0.5, 0.5))

    def test_spread(self):
        self.assertEqual(spread([3.0, 1.0, 2.0]), (2.0, 1.0, 3.0))


if __name__ == "__main__":
    unittest.main()
