#!/usr/bin/python3
"""B6: a real workload under `cordon run` against unconfined (see bench/README.md).

Meant for a kernel where BPF LSM works (bench/run.sh runs it in the 6.12 VM of
tests/vm, with --strict); bench/run.sh also runs it on the host, where BPF LSM
is unusable and `cordon run` confines with Landlock, seccomp and the detect
object instead (natively, without TCG's distortions). As root, with Debian's
/usr/bin/python3 (the interpreter the python3 profile names). The job (bench/b6/job.sh) byte-compiles a copy of part of the standard
library and runs a small unittest suite (bench/b6/suite), as ONE command:

  unconfined        sh job.sh DIR, nothing of cordon loaded (the baseline)
  unconfined-aa     the same again (A/A control)
  unconfined-loaded sh job.sh DIR while cordon's host-wide object (BPF LSM, or
                    detect) is loaded (a keeper sandbox elsewhere): what a process outside
                    every sandbox pays on a host that uses cordon
  cordon            cordon run --policy P -- sh job.sh DIR, on that host: the
                    default-deny policy with the runtime-minimal, shell and
                    python3 profiles, writable: the job's directory

Each round runs three blocks: the baseline alone, the two "loaded"
configurations (keeper attached, in a shuffled order), then the A/A control
alone, so that the A/A control is separated from the baseline by the same block
boundary (keeper attach and detach, elapsed time) as cordon is; every other
round runs them in the reverse order. Per round every configuration's wall time is divided by the
same round's unconfined one; the report gives medians. `cordon run -- /bin/true`
measures cordon run's fixed cost (warm: every round; cold, nothing of cordon
loaded before: at the start and at the end).

Writes raw JSON (--out); bench/report.py computes the medians and ratios.
"""
import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STDLIB = "/usr/lib/python3.11"
# Packages of the standard library copied and byte-compiled by the job.
PACKAGES = ["email", "http", "json", "logging", "xml", "urllib", "html", "concurrent", "importlib"]
POLICY = """apiVersion: cordon/v1
kind: SandboxPolicy
metadata:
  name: b6-job
spec:
  mode: enforce
  network:
    families: [unix]
    egress: []
  files:
    include: [runtime-minimal, shell, python3]
    write: [{work}]
"""
LSM_DIR = "/sys/fs/bpf/cordon/v4/lsm"
DETECT_DIR = "/sys/fs/bpf/cordon/v4/detect"  # where BPF LSM is unusable: the detect object instead


def log(msg):
    print(f"b6_bench: {msg}", file=sys.stderr, flush=True)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    raise SystemExit("b6_bench: no cgroup2 mount")


class Bench:
    def __init__(self, args):
        self.args = args
        self.cordon = os.path.abspath(args.cordon)
        self.work = args.work
        self.keeper_cg = os.path.join(cgroup2_mount(), f"cordon-b6-keeper-{os.getpid()}")
        self.keeper_on = False
        self.runs = []
        self.fixed = []
        self.keeper = []
        self.seq = 0
        self.enforcement = ""

    def prepare(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(os.path.join(self.work, "runs"))
        src = os.path.join(self.work, "src")
        for p in PACKAGES:
            shutil.copytree(os.path.join(STDLIB, p), os.path.join(src, p),
                            ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(os.path.join(HERE, "suite"), os.path.join(self.work, "suite"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        # Inside the policy's writable directory: the sandboxed shell must read it.
        shutil.copy(os.path.join(HERE, "job.sh"), os.path.join(self.work, "runs", "job.sh"))
        self.policy = os.path.join(self.work, "policy.yaml")
        with open(self.policy, "w") as f:
            f.write(POLICY.format(work=os.path.join(self.work, "runs")))
        self.n_py = sum(1 for _, _, fs in os.walk(src) for n in fs if n.endswith(".py"))
        self.src_bytes = sum(os.path.getsize(os.path.join(d, n)) for d, _, fs in os.walk(src) for n in fs)
        os.makedirs(self.keeper_cg, exist_ok=True)  # removed (rmdir) at the end

    def cordon_loaded(self):
        return any(os.path.exists(os.path.join(d, "lsm_sandboxes")) for d in (LSM_DIR, DETECT_DIR))

    def set_keeper(self, on):
        if on == self.keeper_on:
            return
        cmd = [self.cordon, "attach" if on else "detach", "--cgroup", self.keeper_cg]
        if on:
            # Where BPF LSM is unusable, attach refuses unless told to enforce what it can.
            cmd += ["--policy", self.policy, "--allow-degraded"]
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.keeper.append({"attach" if on else "detach": time.monotonic() - t0})
        self.keeper_on = on
        if on:
            self.enforcement = "bpf-lsm" if os.path.exists(os.path.join(LSM_DIR, "lsm_sandboxes")) else "detect"
        if self.cordon_loaded() != on:
            msg = f"cordon's host-wide object loaded={self.cordon_loaded()}, expected {on}"
            if self.args.strict:
                raise SystemExit("b6_bench: " + msg)
            log(f"warning: {msg} (another user's sandboxes?); recorded per run")

    def run_job(self, config, rnd):
        self.seq += 1
        d = os.path.join(self.work, "runs", f"{self.seq:03d}-{config}")
        shutil.copytree(os.path.join(self.work, "src"), os.path.join(d, "src"))
        shutil.copytree(os.path.join(self.work, "suite"), os.path.join(d, "suite"))
        os.makedirs(os.path.join(d, "tmp"))
        job = ["/bin/sh", os.path.join(self.work, "runs", "job.sh"), d, str(self.args.repeat)]
        audit = os.path.join(self.work, f"audit-{self.seq:03d}.jsonl")
        if config == "cordon":
            # --user root: the job's directories are root's (copied per run);
            # with its own uid the command could not write below `runs`.
            cmd = [self.cordon, "run", "--user", "root", "--policy", self.policy, "--audit", audit, "--quiet",
                   "--"] + job
        else:
            cmd = job
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=d)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            log(p.stdout.decode(errors="replace")[-3000:])
            for name in ("compileall.log", "unittest.log"):
                try:
                    with open(os.path.join(d, name)) as f:
                        log(f"{name}: " + f.read()[-3000:])
                except OSError:
                    pass
            raise SystemExit(f"b6_bench: the job failed under {config} (exit {p.returncode})")
        with open(os.path.join(d, "times")) as f:
            t = [int(x) for x in f.read().split()]
        violations, kinds = 0, {}
        if os.path.exists(audit):
            with open(audit) as f:
                for line in f:
                    if not line.strip():
                        continue
                    violations += 1
                    try:
                        e = json.loads(line)
                        k = f"{e.get('kind', '?')} {e.get('verdict', '')} {(e.get('file') or {}).get('path', '')}".strip()
                    except ValueError:
                        k = "unparsable event"
                    kinds[k] = kinds.get(k, 0) + 1
            if violations:
                log(f"{config}: {violations} violation(s): {kinds}")
        rec = {"round": rnd, "config": config, "wall_s": wall, "compileall_s": (t[1] - t[0]) / 1e9,
               "unittest_s": (t[2] - t[1]) / 1e9, "violations": violations, "violation_kinds": kinds,
               "cordon_loaded": self.cordon_loaded()}
        self.runs.append(rec)
        shutil.rmtree(d)
        return rec

    def run_true(self, kind, rnd):
        audit = os.path.join(self.work, f"audit-true-{len(self.fixed)}.jsonl")
        if kind == "true":
            cmd = ["/bin/true"]
        else:
            cmd = [self.cordon, "run", "--user", "root", "--policy", self.policy, "--audit", audit, "--quiet", "--",
                   "/bin/true"]
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.fixed.append({"round": rnd, "kind": kind, "wall_s": time.monotonic() - t0})

    def machine(self):
        u = platform.uname()
        cpu = ""
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        try:
            with open("/sys/kernel/security/lsm") as f:
                lsm = f.read().strip()
        except OSError:
            lsm = ""
        return {"kernel": u.release, "cpu": cpu, "nproc": os.cpu_count(), "lsm": lsm,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def main(self):
        rng = random.Random(self.args.seed or None)
        self.prepare()
        log(f"job: compileall of {self.n_py} modules ({self.src_bytes >> 10} KB) + the unittest suite")
        if self.cordon_loaded():
            msg = "cordon's host-wide object is already loaded (other sandboxes on this machine)"
            if self.args.strict:
                raise SystemExit("b6_bench: " + msg)
            log("warning: " + msg + "; the clean configurations are not clean")
        # Warm-up (file caches of the interpreter and the library): one of each, discarded.
        w = self.run_job("unconfined", -1)
        log(f"warm-up job: {w['wall_s']:.1f} s (compileall {w['compileall_s']:.1f} s, tests {w['unittest_s']:.1f} s)")
        self.run_true("true", -1)
        self.run_true("cordon-cold", -1)
        log(f"cordon run -- /bin/true, cold: {self.fixed[-1]['wall_s']:.1f} s")
        self.runs.clear()
        self.fixed.clear()
        self.run_true("cordon-cold", 0)
        t_start = time.monotonic()
        for rnd in range(self.args.rounds):
            # The A/A control sits across a block boundary from the baseline,
            # as cordon does: clean, loaded, clean (reversed every other round).
            blocks = [["unconfined"], ["unconfined-loaded", "cordon"], ["unconfined-aa"]]
            if rnd % 2:
                blocks.reverse()
            for block in blocks:
                self.set_keeper("cordon" in block)
                rng.shuffle(block)
                for config in block:
                    self.run_job(config, rnd)
                self.run_true("cordon-warm" if self.keeper_on else "true", rnd)
            log(f"round {rnd + 1}/{self.args.rounds}: " + ", ".join(
                f"{r['config']} {r['wall_s']:.1f}s" for r in self.runs if r["round"] == rnd))
        self.set_keeper(False)
        self.run_true("cordon-cold", self.args.rounds)
        total = time.monotonic() - t_start
        out = {
            "benchmark": "B6 real workload",
            "machine": self.machine(),
            "vm": bool(os.environ.get("CORDON_VM")), "enforcement": self.enforcement,
            "host": {"kernel": os.environ.get("CORDON_BENCH_HOST_KERNEL", ""),
                     "cpu": os.environ.get("CORDON_BENCH_HOST_CPU", ""), "vm": bool(os.environ.get("CORDON_VM"))},
            "params": {"rounds": self.args.rounds, "repeat": self.args.repeat, "packages": PACKAGES, "modules": self.n_py,
                       "src_bytes": self.src_bytes, "suite": sorted(os.listdir(os.path.join(HERE, "suite"))),
                       "python": sys.version.split()[0], "total_s": total},
            "policy": POLICY.format(work=os.path.join(self.work, "runs")),
            "runs": self.runs,
            "fixed": self.fixed,
            "keeper": self.keeper,
        }
        with open(self.args.out, "w") as f:
            json.dump(out, f, indent=1)
        log(f"wrote {self.args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cordon", required=True, help="the cordon binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="/tmp/cordon-b6")
    ap.add_argument("--repeat", type=int, default=1, help="passes of the job per command (default 1)")
    ap.add_argument("--quick", action="store_true", help="2 rounds")
    ap.add_argument("--strict", action="store_true",
                    help="fail if cordon's host-wide object is loaded when it should not be (the VM run)")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 2
    if os.geteuid() != 0:
        raise SystemExit("b6_bench: run as root")
    b = Bench(args)
    try:
        b.main()
    finally:
        if b.keeper_on:
            subprocess.run([b.cordon, "detach", "--cgroup", b.keeper_cg], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if os.path.isdir(b.keeper_cg):
            try:
                os.rmdir(b.keeper_cg)  # a cgroup directory: rmdir, not a recursive delete
            except OSError as e:
                log(f"cannot remove {b.keeper_cg}: {e}")
        shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    main()
