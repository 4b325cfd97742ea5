"""B6 workload suite: serialization and compression, with files in TMPDIR."""
import base64
import bz2
import csv
import gzip
import hashlib
import json
import lzma
import os
import pickle
import random
import struct
import tempfile
import unittest
import zlib


def record(rng, i):
    return {"id": i, "name": f"sandbox-{i}", "rules": [rng.randint(0, 1 << 32) for _ in range(8)],
            "mode": rng.choice(["enforce", "audit"]), "ratio": rng.random(), "tags": {"k": str(i)}}


class DataTest(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(7)
        self.records = [record(self.rng, i) for i in range(400)]

    def test_json(self):
        text = json.dumps(self.records, sort_keys=True, indent=1)
        self.assertEqual(json.loads(text), self.records)

    def test_pickle_struct_base64(self):
        blob = pickle.dumps(self.records, protocol=pickle.HIGHEST_PROTOCOL)
        self.assertEqual(pickle.loads(blob), self.records)
        packed = b"".join(struct.pack("<QId", r["id"], len(r["name"]), r["ratio"]) for r in self.records)
        self.assertEqual(base64.b64decode(base64.b64encode(packed)), packed)
        self.assertEqual(len(hashlib.sha256(packed).hexdigest()), 64)

    def test_compression(self):
        data = json.dumps(self.records).encode()
        for mod in (zlib, bz2, lzma):
            self.assertEqual(mod.decompress(mod.compress(data)), data)

    def test_files(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "records.csv")
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                for r in self.records:
                    w.writerow([r["id"], r["name"], r["mode"], r["ratio"]])
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            self.assertEqual(len(rows), len(self.records))
            gz = os.path.join(d, "records.json.gz")
            with gzip.open(gz, "wt") as f:
                json.dump(self.records, f)
            with gzip.open(gz, "rt") as f:
                self.assertEqual(json.load(f), self.records)
            for i in range(200):
                with open(os.path.join(d, f"small-{i}.txt"), "w") as f:
                    f.write(f"{i}\n" * 10)
            self.assertEqual(len(os.listdir(d)), 202)


if __name__ == "__main__":
    unittest.main()
