#!/usr/bin/env python3
"""The verdict of one GoogleTest run in a test VM, from its XML report.

GoogleTest exits 0 when no test ran and counts GTEST_SKIP as a pass, so a suite
whose fixtures all skip inside a BPF LSM VM would pass on its exit status
alone. This fails the run when
  - the report is missing or unreadable (the binary crashed or never ran),
  - no test ran,
  - a test was skipped that tests/vm/expected-skips does not list for this
    kernel and BPF LSM setting (each listed skip says why it is expected),
  - a test failed (also visible in the exit status; repeated here so the
    verdict is complete on its own).

  verdict.py REPORT.xml KERNEL EXPECT_LSM [EXPECTED_SKIPS_FILE]

Exit status 0 when the run counts, 1 otherwise; the reason is printed.
"""
import fnmatch
import os
import sys
import xml.etree.ElementTree as ET


def load_expected(path, kernel, expect_lsm):
    """Patterns of tests allowed to skip here: lines 'KERNEL LSM PATTERN REASON...'."""
    allowed = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(None, 3)
            if len(fields) < 4:
                raise ValueError(f"{path}:{lineno}: want 'KERNEL LSM PATTERN REASON', got {line!r}")
            k, lsm, pattern, reason = fields
            if lsm not in ("0", "1", "*"):
                raise ValueError(f"{path}:{lineno}: LSM must be 0, 1 or *, got {lsm!r}")
            if fnmatch.fnmatchcase(kernel, k) and lsm in ("*", expect_lsm):
                allowed.append((pattern, reason))
    return allowed


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    report, kernel, expect_lsm = argv[1], argv[2], argv[3]
    skips_file = argv[4] if len(argv) == 5 else os.path.join(os.path.dirname(__file__), "expected-skips")
    try:
        allowed = load_expected(skips_file, kernel, expect_lsm)
    except (OSError, ValueError) as e:
        print(f"verdict: {e}", file=sys.stderr)
        return 1
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"verdict: FAIL: no readable test report ({e}): the test binary crashed or never ran", file=sys.stderr)
        return 1

    ran, failed, bad_skips, ok_skips = 0, [], [], []
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        if case.get("status") != "run":
            continue  # DISABLED_ or filtered out
        skipped = case.get("result") == "skipped" or case.find("skipped") is not None
        if skipped:
            node = case.find("skipped")
            message = (node.get("message") if node is not None else "") or ""
            message = message.strip().splitlines()[-1] if message.strip() else "(no message)"
            reason = next((r for p, r in allowed if fnmatch.fnmatchcase(name, p)), None)
            (ok_skips if reason else bad_skips).append((name, message, reason))
            continue
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)

    for name, message, reason in ok_skips:
        print(f"verdict: expected skip {name}: {reason}")
    verdict = 0
    if ran == 0:
        print(f"verdict: FAIL: no test ran ({len(ok_skips) + len(bad_skips)} skipped)", file=sys.stderr)
        verdict = 1
    for name, message, _ in bad_skips:
        print(f"verdict: FAIL: {name} was skipped ({message}); it is not an expected skip on "
              f"{kernel} with BPF LSM {expect_lsm} (tests/vm/expected-skips)", file=sys.stderr)
        verdict = 1
    for name in failed:
        print(f"verdict: FAIL: {name} failed", file=sys.stderr)
        verdict = 1
    print(f"verdict: {'PASS' if verdict == 0 else 'FAIL'}: {ran} ran, {len(failed)} failed, "
          f"{len(ok_skips)} expected skips, {len(bad_skips)} unexpected skips")
    return verdict


if __name__ == "__main__":
    sys.exit(main(sys.argv))
