"""B6 workload suite: text processing (re, textwrap, difflib, unicodedata)."""
import difflib
import random
import re
import string
import textwrap
import unicodedata
import unittest

WORDS = ["sandbox", "policy", "egress", "cgroup", "kernel", "program", "decision", "inode",
         "dentry", "mount", "socket", "verdict", "ring", "buffer", "event", "path"]


def paragraph(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


class TextTest(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(6)

    def test_wrap_roundtrip(self):
        for _ in range(100):
            p = paragraph(self.rng, 120)
            lines = textwrap.wrap(p, width=self.rng.randint(20, 90))
            self.assertEqual(" ".join(lines), p)
            self.assertTrue(all(len(l) <= 90 for l in lines))

    def test_regex(self):
        text = "\n".join(f"{self.rng.randint(1, 223)}.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}."
                         f"{self.rng.randint(0, 255)}/{self.rng.choice([8, 16, 24, 32])} port "
                         f"{self.rng.randint(1, 65535)}" for _ in range(2000))
        pat = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d+) port (\d+)$", re.M)
        found = pat.findall(text)
        self.assertEqual(len(found), 2000)
        self.assertTrue(all(0 < int(m[5]) <= 65535 for m in found))

    def test_difflib(self):
        a = [paragraph(self.rng, 8) for _ in range(400)]
        b = list(a)
        for _ in range(40):
            b[self.rng.randrange(len(b))] = paragraph(self.rng, 8)
        diff = list(difflib.unified_diff(a, b, lineterm=""))
        self.assertTrue(any(l.startswith("+") for l in diff))
        ratio = difflib.SequenceMatcher(None, a, b).ratio()
        self.assertGreater(ratio, 0.8)

    def test_unicode(self):
        s = "".join(self.rng.choice(string.ascii_letters + "éèàüßçñ") for _ in range(10000))
        nfd = unicodedata.normalize("NFD", s)
        self.assertEqual(unicodedata.normalize("NFC", nfd), s)
        self.assertEqual(s.upper().casefold(), s.casefold())


if __name__ == "__main__":
    unittest.main()
