#!/usr/bin/env python3
"""The userspace layers and what each may use; checked two ways.

  check_layers.py --includes USERSPACE_DIR
      every #include "<folder>/..." of a folder names a folder below it
  check_layers.py --archives NAME=LIB.a [NAME=LIB.a ...]
      no archive uses a symbol defined only in a layer above it (a reach upward:
      the build runs this after linking cordon and fails on one)

Exit status 1 with one line per violation.
"""
import os
import re
import subprocess
import sys

# Folder -> the folders it may include (besides itself). abi/ (the BPF ABI
# headers under bpf/) and the generated protobuf headers are leaves anyone uses.
LAYERS = {
    "util": set(),
    "sys": {"util"},
    "policy": {"util"},
    "loader": {"util", "sys", "policy"},
    "events": {"util", "sys", "policy"},
    "confine": {"util", "policy"},
    "dns": {"util", "policy"},
    "inspect": {"util", "sys", "policy", "events"},
    "ops": {"util", "sys", "policy", "loader", "events", "confine", "inspect", "dns"},
    "agent": {"util", "sys", "policy", "loader", "events", "confine", "inspect", "ops", "dns"},
    "cli": {"util", "sys", "policy", "loader", "events", "confine", "inspect", "ops", "agent", "dns"},
}
LEAVES = {"abi", "cordon"}  # bpf/abi headers; generated cordon/v1/*.pb.h


def closure(layer):
    out, todo = set(), [layer]
    while todo:
        for d in LAYERS[todo.pop()]:
            if d not in out:
                out.add(d)
                todo.append(d)
    return out


def check_includes(root):
    bad = []
    for folder in sorted(os.listdir(root)):
        path = os.path.join(root, folder)
        if not os.path.isdir(path) or folder == "proto":
            continue
        if folder not in LAYERS:
            bad.append(f"userspace/{folder}/: a folder that is no layer (add it to LAYERS in {sys.argv[0]})")
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith((".cc", ".h")):
                continue
            with open(os.path.join(path, name), encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
                    if not m:
                        continue
                    used = m.group(1)
                    if used == folder or used in LEAVES:
                        continue
                    if used not in LAYERS[folder]:
                        bad.append(f"userspace/{folder}/{name}:{lineno}: includes {used}/, "
                                   f"which {folder} may not use (allowed: {', '.join(sorted(LAYERS[folder])) or 'none'})")
    return bad


def symbols(archive):
    out = subprocess.run(["nm", "-C", "--defined-only", "-g", archive], check=True,
                         capture_output=True, text=True).stdout
    defined = set()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    out = subprocess.run(["nm", "-C", "-u", archive], check=True, capture_output=True, text=True).stdout
    undefined = set()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("U "):
            undefined.add(line[2:])
    return defined, undefined


def check_archives(pairs):
    libs = {}
    for p in pairs:
        name, _, path = p.partition("=")
        if name not in LAYERS:
            return [f"{name}: not a layer"]
        libs[name] = symbols(path)
    bad = []
    for layer, (_, undefined) in libs.items():
        own = closure(layer) | {layer}
        # Weak/inline definitions (templates, inline functions) appear in many
        # archives; a symbol counts as a reach upward only when no allowed
        # layer defines it.
        allowed_defs = set()
        for other in own:
            if other in libs:
                allowed_defs |= libs[other][0]
        for other, (defined, _) in libs.items():
            if other in own:
                continue
            for sym in sorted((undefined & defined) - allowed_defs):
                bad.append(f"layer {layer} uses {sym}, defined in {other} above it")
    return bad


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--includes":
        bad = check_includes(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--archives":
        bad = check_archives(sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
