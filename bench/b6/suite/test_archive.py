"""B6 workload suite: archives and directory trees (zipfile, tarfile, shutil, pathlib)."""
import os
import pathlib
import shutil
import tarfile
import tempfile
import unittest
import zipfile


class ArchiveTest(unittest.TestCase):
    def make_tree(self, root, dirs=6, files=10):
        for d in range(dirs):
            p = pathlib.Path(root, f"pkg{d}", "sub")
            p.mkdir(parents=True)
            for f in range(files):
                (p / f"mod{f}.py").write_text(f"VALUE = {d * 100 + f}\n" * 20)

    def test_zip_roundtrip(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            self.make_tree(src)
            z = os.path.join(d, "a.zip")
            with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
                for p in sorted(pathlib.Path(src).rglob("*.py")):
                    zf.write(p, p.relative_to(src))
            out = os.path.join(d, "out")
            with zipfile.ZipFile(z) as zf:
                zf.extractall(out)
            self.assertEqual(len(list(pathlib.Path(out).rglob("*.py"))), 6 * 10)

    def test_tar_roundtrip(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            self.make_tree(src)
            t = os.path.join(d, "a.tar.gz")
            with tarfile.open(t, "w:gz") as tf:
                tf.add(src, arcname="src")
            out = os.path.join(d, "out")
            with tarfile.open(t) as tf:
                if hasattr(tarfile, "data_filter"):  # 3.11.4 and later
                    tf.extractall(out, filter="data")
                else:
                    tf.extractall(out)
            self.assertEqual(len(list(pathlib.Path(out).rglob("*.py"))), 6 * 10)

    def test_copytree_walk(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            self.make_tree(src)
            dst = os.path.join(d, "dst")
            shutil.copytree(src, dst)
            n = sum(len(files) for _, _, files in os.walk(dst))
            self.assertEqual(n, 6 * 10)
            shutil.rmtree(dst)
            self.assertFalse(os.path.exists(dst))


if __name__ == "__main__":
    unittest.main()
