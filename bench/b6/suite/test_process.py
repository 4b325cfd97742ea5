"""B6 workload suite: child processes (a shell pipeline, a second interpreter)."""
import os
import subprocess
import sys
import unittest


class ProcessTest(unittest.TestCase):
    def test_shell_pipeline(self):
        for i in range(5):
            out = subprocess.run(["/bin/sh", "-c", f"echo run {i} | tr a-z A-Z | wc -c"],
                                 capture_output=True, text=True, check=True).stdout
            self.assertEqual(int(out), len(f"RUN {i}\n"))

    def test_child_interpreter(self):
        out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", "a", "b"],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(out.strip(), '["a", "b"]')

    def test_environment(self):
        env = dict(os.environ, CORDON_B6="1")
        out = subprocess.run(["/bin/sh", "-c", "echo $CORDON_B6"], env=env, capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(out.strip(), "1")


if __name__ == "__main__":
    unittest.main()
