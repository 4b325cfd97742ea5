#!/usr/bin/env python3
"""Kernel memory per attached sandbox (docs/fleet.md, issue #22 item 4).

Root. Attaches N sandboxes (one empty cgroup each under a parent cgroup of
its own, a deny-all policy, `cordon attach` without an agent, as a platform
would), then detaches them, and reports what the kernel holds for them:

- BPF maps and programs: the sum of `bytes_memlock` over every map and
  program the kernel lists (`bpftool -j map show`, `prog show`), before, with
  the N sandboxes, and after detaching; per sandbox = (with - before) / N.
  bytes_memlock is the kernel's own charge for the object (pages of its
  values, keys and overhead, or of the program's image), as fdinfo shows it.
- /proc/meminfo: Slab, KernelStack, PageTables, Percpu and MemAvailable at the
  same three points, a cross-check that also sees what bytes_memlock leaves
  out (link objects, cgroup bpf arrays, pins); noisy on a shared machine.

Nothing is asserted. Prints a Markdown table and writes JSON with --out.

  bench/sandbox_memory.py --cordon build/cordon --sandboxes 200 [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time

MEMINFO_KEYS = ("MemAvailable", "Slab", "SUnreclaim", "KernelStack", "PageTables", "Percpu")

POLICY = """apiVersion: cordon/v1
kind: SandboxPolicy
metadata: {name: bench-memory}
spec: {}
"""


def cgroup2_mount():
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[2] == "cgroup2":
                return parts[1]
    sys.exit("sandbox_memory: no cgroup2 mount")


def memlock(kind):
    out = subprocess.run(["bpftool", "-j", kind, "show"], check=True, capture_output=True, text=True).stdout
    objects = json.loads(out or "[]")
    return sum(o.get("bytes_memlock", 0) for o in objects), len(objects)


def meminfo():
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, rest = line.split(":", 1)
            if key in MEMINFO_KEYS:
                values[key] = int(rest.split()[0]) * 1024
    return values


def snapshot():
    time.sleep(1.0)  # RCU-freed objects and deferred work settle
    maps, nmaps = memlock("map")
    progs, nprogs = memlock("prog")
    return {"maps_bytes": maps, "maps": nmaps, "progs_bytes": progs, "progs": nprogs, "meminfo": meminfo()}


def cordon(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cordon {' '.join(args)}: status {r.returncode}: {r.stderr.strip()}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cordon", default="build/cordon")
    ap.add_argument("--sandboxes", type=int, default=200)
    ap.add_argument("--out")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("sandbox_memory: needs root")
    if a.sandboxes < 1:
        sys.exit("sandbox_memory: --sandboxes must be at least 1")
    binary = os.path.abspath(a.cordon)
    root = cgroup2_mount()
    parent = os.path.join(root, f"cordon-bench-memory-{os.getpid()}")
    policy = f"/tmp/cordon-bench-memory-{os.getpid()}.yaml"
    with open(policy, "w") as f:
        f.write(POLICY)
    os.mkdir(parent)
    groups = []
    attached = []
    try:
        # A keeper sandbox first, so that host-wide objects (the detect
        # object, the BPF LSM object) are loaded before the baseline.
        keeper = os.path.join(parent, "keeper")
        os.mkdir(keeper)
        groups.append(keeper)
        cordon(binary, "attach", "--cgroup", keeper, "--policy", policy, "--allow-degraded")
        attached.append(keeper)
        before = snapshot()
        for i in range(a.sandboxes):
            g = os.path.join(parent, f"s{i}")
            os.mkdir(g)
            groups.append(g)
            cordon(binary, "attach", "--cgroup", g, "--policy", policy, "--allow-degraded")
            attached.append(g)
        during = snapshot()
        for g in attached[1:]:
            cordon(binary, "detach", "--cgroup", g)
        attached = attached[:1]
        after = snapshot()
    finally:
        for g in reversed(attached):
            subprocess.run([binary, "detach", "--cgroup", g], capture_output=True)
        for g in reversed(groups):
            try:
                os.rmdir(g)
            except OSError as e:
                print(f"sandbox_memory: rmdir {g}: {e}", file=sys.stderr)
        try:
            os.rmdir(parent)
        except OSError as e:
            print(f"sandbox_memory: rmdir {parent}: {e}", file=sys.stderr)
        os.unlink(policy)

    n = a.sandboxes
    per = lambda key: (during[key] - before[key]) / n
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
        "sandboxes": n,
        "before": before,
        "during": during,
        "after_detach": after,
        "per_sandbox": {
            "maps_bytes": per("maps_bytes"),
            "progs_bytes": per("progs_bytes"),
            "maps": per("maps"),
            "progs": per("progs"),
            "meminfo": {k: (during["meminfo"][k] - before["meminfo"][k]) / n for k in MEMINFO_KEYS},
        },
        "left_after_detach": {
            "maps_bytes": after["maps_bytes"] - before["maps_bytes"],
            "progs_bytes": after["progs_bytes"] - before["progs_bytes"],
        },
    }
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    p = result["per_sandbox"]
    kib = lambda b: f"{b / 1024:,.1f} KiB"
    print(f"{n} sandboxes, kernel {result['kernel']}, {result['date']}")
    print("| per attached sandbox | measured |")
    print("|---|---|")
    print(f"| BPF maps (bytes_memlock) | {kib(p['maps_bytes'])} in {p['maps']:.1f} maps |")
    print(f"| BPF programs (bytes_memlock) | {kib(p['progs_bytes'])} in {p['progs']:.1f} programs |")
    print(f"| /proc/meminfo MemAvailable | {kib(-p['meminfo']['MemAvailable'])} less |")
    print(f"| /proc/meminfo Slab / Percpu | {kib(p['meminfo']['Slab'])} / {kib(p['meminfo']['Percpu'])} |")
    left = result["left_after_detach"]
    print(f"| left after detaching all | maps {kib(left['maps_bytes'])}, programs {kib(left['progs_bytes'])} |")


if __name__ == "__main__":
    main()
