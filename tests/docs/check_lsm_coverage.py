#!/usr/bin/env python3
"""Checks docs/lsm-coverage.md against the BPF LSM sources and the tests.

- every row whose status is `hooked` names a program that exists as
  SEC("lsm/<hook>") (or lsm.s/) in bpf/lsm/*.bpf.c, and every such program
  has a `hooked` row; likewise rows `fexit/<function>` and the SEC("fexit/...")
  programs there (the directory cache's invalidation);
- every `hooked` row names at least one test (Suite.Name) that exists as
  TEST/TEST_F/TEST_P(Suite, Name) somewhere under tests/;
- rows whose status is exactly `hooked (bpf/lsm/host.bpf.c, in progress)` must
  name the test `TBD`; their programs may or may not exist yet;
- a `not hooked` row gives a reason; no hook has two rows.

Usage: check_lsm_coverage.py SOURCE_DIR. Exit 0 when consistent, 1 otherwise.
"""
import glob
import os
import re
import sys

IN_PROGRESS = "hooked (bpf/lsm/host.bpf.c, in progress)"


def main(root):
    doc_path = os.path.join(root, "docs", "lsm-coverage.md")
    errors = []
    rows = {}
    with open(doc_path, encoding="utf-8") as doc:
        for n, line in enumerate(doc, 1):
            # | `hook` | kernels | status | control | test(s) | notes |
            if not line.startswith("| `"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 6:
                errors.append(f"{doc_path}:{n}: expected 6 columns, got {len(cells)}")
                continue
            hook = cells[0].strip("`")
            if hook in rows:
                errors.append(f"{doc_path}:{n}: second row for {hook}")
            rows[hook] = (n, cells)
    if not rows:
        errors.append(f"{doc_path}: no hook rows found")

    programs = {}
    for src in sorted(glob.glob(os.path.join(root, "bpf", "lsm", "*.bpf.c"))):
        with open(src, encoding="utf-8") as f:
            text = f.read()
            for m in re.finditer(r'SEC\("lsm(?:\.s)?/([a-z0-9_]+)"\)', text):
                programs.setdefault(m.group(1), os.path.relpath(src, root))
            # The directory cache's invalidation programs: rows `fexit/<function>`.
            for m in re.finditer(r'SEC\("(fexit/[A-Za-z0-9_]+)"\)', text):
                programs.setdefault(m.group(1), os.path.relpath(src, root))

    tests = set()
    for src in glob.glob(os.path.join(root, "tests", "**", "*.cc"), recursive=True):
        with open(src, encoding="utf-8", errors="replace") as f:
            for m in re.finditer(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", f.read()):
                tests.add(f"{m.group(1)}.{m.group(2)}")

    for hook, (n, cells) in rows.items():
        status, test_cell = cells[2], cells[4]
        names = [t.strip().strip("`") for t in test_cell.split(",") if t.strip()]
        if status == "hooked":
            if hook not in programs:
                errors.append(f"{doc_path}:{n}: {hook} is marked hooked but no SEC(\"lsm/{hook}\") is in bpf/lsm/")
            if not names or names == ["TBD"]:
                errors.append(f"{doc_path}:{n}: hooked {hook} names no test")
            for t in names:
                if t != "TBD" and t not in tests:
                    errors.append(f"{doc_path}:{n}: {hook}: test {t} does not exist under tests/")
        elif status == IN_PROGRESS:
            if names != ["TBD"]:
                errors.append(f"{doc_path}:{n}: {hook} is in progress: its test must read TBD")
        elif status == "not hooked":
            if not cells[5] or cells[5] in ("-", "—"):
                errors.append(f"{doc_path}:{n}: not hooked {hook} gives no reason")
        else:
            errors.append(f"{doc_path}:{n}: {hook}: unknown status {status!r}")

    for hook, src in sorted(programs.items()):
        if hook not in rows:
            errors.append(f"{src}: lsm/{hook} has no row in docs/lsm-coverage.md")
        elif rows[hook][1][2] not in ("hooked", IN_PROGRESS):
            errors.append(f"{src}: lsm/{hook} exists but its row says {rows[hook][1][2]!r}")

    for e in errors:
        print(e, file=sys.stderr)
    print(f"lsm-coverage: {len(rows)} rows, {len(programs)} lsm programs, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
