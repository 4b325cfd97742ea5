"""B6 workload suite: an on-disk sqlite3 database in TMPDIR."""
import os
import random
import sqlite3
import tempfile
import unittest


class SqliteTest(unittest.TestCase):
    def test_queries(self):
        rng = random.Random(8)
        with tempfile.TemporaryDirectory() as d:
            db = sqlite3.connect(os.path.join(d, "bench.db"))
            db.execute("CREATE TABLE rules (id INTEGER PRIMARY KEY, cidr TEXT, port INTEGER, sandbox INTEGER)")
            rows = [(i, f"10.{i // 256 % 256}.{i % 256}.0/24", rng.randint(1, 65535), rng.randint(1, 50))
                    for i in range(2000)]
            with db:
                db.executemany("INSERT INTO rules VALUES (?, ?, ?, ?)", rows)
            db.execute("CREATE INDEX by_sandbox ON rules (sandbox)")
            total = 0
            for sb in range(1, 51):
                (n,) = db.execute("SELECT COUNT(*) FROM rules WHERE sandbox = ?", (sb,)).fetchone()
                total += n
            self.assertEqual(total, 2000)
            top = db.execute("SELECT sandbox, MAX(port) FROM rules GROUP BY sandbox ORDER BY sandbox").fetchall()
            self.assertEqual(len(top), 50)
            db.close()


if __name__ == "__main__":
    unittest.main()
