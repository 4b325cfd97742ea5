"""B6 workload suite: numbers (decimal, fractions, statistics, math)."""
import decimal
import fractions
import math
import random
import statistics
import unittest


class NumbersTest(unittest.TestCase):
    def test_decimal(self):
        decimal.getcontext().prec = 60
        s = sum(decimal.Decimal(1) / decimal.Decimal(k * k) for k in range(1, 3000))
        self.assertTrue(decimal.Decimal("1.644") < s < decimal.Decimal("1.645"))

    def test_fractions(self):
        h = sum(fractions.Fraction(1, k) for k in range(1, 300))
        self.assertGreater(h, 6)

    def test_statistics(self):
        rng = random.Random(9)
        xs = [rng.gauss(100, 15) for _ in range(5000)]
        self.assertAlmostEqual(statistics.mean(xs), 100, delta=1)
        self.assertAlmostEqual(statistics.stdev(xs), 15, delta=1)
        q = statistics.quantiles(xs, n=4)
        self.assertLess(q[0], q[2])

    def test_math(self):
        primes = [n for n in range(2, 5000) if all(n % p for p in range(2, math.isqrt(n) + 1))]
        self.assertEqual(len(primes), 669)


if __name__ == "__main__":
    unittest.main()
