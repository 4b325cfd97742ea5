#!/usr/bin/python3
"""B7: the agent's cost of watching resources (README "The agent watches resources").

Needs cgroup v2 with the pids and memory controllers (the test VMs; this host's hybrid cgroups have
none, so nothing would be watched): run it through bench/run_resources.sh, which boots the 6.12
guest. Three agents run side by side, each reading N sandboxes of its own (`cordon attach` through
it, the same one-line policy):
  - base-a and base-b: their sandboxes' parent enables no controller, so the cgroups have no
    memory.events or pids.events and the agents watch nothing (base-b/base-a is the A/A control);
  - watched: the parent enables pids and memory; every sandbox (pids.max 64) is watched.
Idle: --rounds windows of --seconds; each round reads the three agents' CPU time (utime + stime)
over the same window: the per-round ratio to base-a, its median. RSS (VmRSS) at the end.
Events: one more sandbox of the watched agent with pids.max 8 and a process in it that forks until
refused, releases, and forks again for --storm seconds; the watched agent's CPU over that window
minus its idle CPU over as long, per resource.pids event it wrote, and per refused fork.
Everything made is removed at the end (sandboxes detached, cgroups removed, agents stopped by pid).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_bench import cgroup2_mount, cpu_seconds, vm_rss_kib  # noqa: E402  (B4/B5's helpers)

POLICY = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: resbench}\nspec:\n  resources:\n    pids: %d\n"
PLAIN = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: resbench}\nspec: {}\n"
STORM = r"""
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
refused = 0
while time.monotonic() < end:
    r, w = os.pipe()
    kids = []
    while True:
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            break
        if pid == 0:
            os.close(w); os.read(r, 1); os._exit(0)
        kids.append(pid)
    os.close(w)
    for k in kids: os.waitpid(k, 0)
    os.close(r)
print(refused)
"""


def log(msg):
    print(f"resource_bench: {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, cordon):
        self.cordon = cordon
        self.mount = cgroup2_mount()
        self.root = os.path.join(self.mount, f"cordon-resbench-{os.getpid()}")
        self.scratch = tempfile.mkdtemp(prefix="cordon-resbench-")
        self.agents, self.attached, self.cgroups = {}, [], []
        # The policy texts kept by digest: here (the guest sees the host's /var/lib read-only).
        self.env = dict(os.environ, CORDON_POLICY_STORE=os.path.join(self.scratch, "policies"))

    def mkcg(self, path, controllers=""):
        os.mkdir(path)
        self.cgroups.append(path)
        if controllers:
            with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                f.write(controllers)

    def start_agent(self, name):
        d = os.path.join(self.scratch, name)
        os.mkdir(d)
        sock, audit = os.path.join(d, "agent.sock"), os.path.join(d, "audit.jsonl")
        scope = "/" + os.path.relpath(os.path.join(self.root, name), self.mount)
        with open(os.path.join(d, "agent.yaml"), "w") as f:
            f.write(f"socket: {sock}\nsinks:\n  - kind: jsonl\n    path: {audit}\n    fsync: never\n"
                    f"metrics:\n  listen: \"\"\nadopt:\n  cgroupPrefixes: [{scope}]\n"
                    f"oidc:\n  keyDir: {d}/oidc\n  publishDir: \"\"\n")
        logf = open(os.path.join(d, "agent.log"), "w")
        p = subprocess.Popen([self.cordon, "agent", "--config", os.path.join(d, "agent.yaml")], stdout=logf,
                             stderr=logf, env=self.env)
        for _ in range(400):
            if p.poll() is not None:
                raise SystemExit(f"resource_bench: agent {name} exited: {open(logf.name).read()}")
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                s.close()
                break
            except OSError:
                time.sleep(0.05)
        self.agents[name] = {"proc": p, "env": dict(self.env, CORDON_AGENT_SOCKET=sock), "audit": audit}

    def attach(self, agent, cg, pids):
        policy = os.path.join(self.scratch, f"pids{pids}.yaml")
        if not os.path.exists(policy):
            with open(policy, "w") as f:
                f.write(POLICY % pids if pids else PLAIN)
        r = subprocess.run([self.cordon, "attach", "--cgroup", cg, "--policy", policy, "--allow-degraded"],
                           env=self.agents[agent]["env"], capture_output=True, text=True)
        if r.returncode != 0 and "did not answer within" in r.stderr:
            # Under TCG the host's first sandbox loads the BPF LSM object, which can take longer
            # than the client waits: let the agent finish, then see whether it attached.
            pid = self.agents[agent]["proc"].pid
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                before = cpu_seconds(pid)
                time.sleep(2)
                if cpu_seconds(pid) - before < 0.05:
                    break
            st = subprocess.run([self.cordon, "status"], env=self.agents[agent]["env"], capture_output=True,
                                text=True)
            if st.returncode == 0 and os.path.relpath(cg, "/sys/fs/cgroup") in st.stdout:
                r = st
        if r.returncode != 0:
            with open(os.path.join(self.scratch, agent, "agent.log")) as f:
                raise SystemExit(f"resource_bench: attach {cg}: {r.stderr.strip()}\nagent log:\n{f.read()}")
        self.attached.append((agent, cg))

    def cleanup(self):
        for agent, cg in reversed(self.attached):
            subprocess.run([self.cordon, "detach", "--cgroup", cg], env=self.agents[agent]["env"],
                           capture_output=True)
        for a in self.agents.values():
            a["proc"].send_signal(signal.SIGTERM)  # our own child
            a["proc"].wait(timeout=60)
        for cg in reversed(self.cgroups):
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        shutil.rmtree(self.scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cordon", required=True)
    ap.add_argument("--sandboxes", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--storm", type=float, default=10.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    b = Bench(args.cordon)
    try:
        b.mkcg(b.root, "+pids +memory")
        for name, controllers in (("base-a", ""), ("base-b", ""), ("watched", "+pids +memory")):
            b.mkcg(os.path.join(b.root, name), controllers)
            b.start_agent(name)
        # Under TCG an agent's first instances take many seconds of the one vCPU to load: the
        # first attach waited past its 30 s for three agents loading at once. Wait until they idle.
        pids0 = [a["proc"].pid for a in b.agents.values()]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            before = sum(cpu_seconds(p) for p in pids0)
            time.sleep(2)
            if sum(cpu_seconds(p) for p in pids0) - before < 0.05:
                break
        t0 = time.monotonic()
        for i in range(args.sandboxes):
            for name in ("base-a", "base-b", "watched"):
                cg = os.path.join(b.root, name, f"s{i}")
                b.mkcg(cg)
                b.attach(name, cg, 64 if name == "watched" else 0)  # base: no limit, no controller
        log(f"{args.sandboxes} sandboxes per agent attached in {time.monotonic() - t0:.0f} s")
        time.sleep(2)
        pids = {n: a["proc"].pid for n, a in b.agents.items()}
        ratios = {"base-b": [], "watched": []}
        idle_watched = []
        for _ in range(args.rounds):
            before = {n: cpu_seconds(p) for n, p in pids.items()}
            time.sleep(args.seconds)
            used = {n: cpu_seconds(p) - before[n] for n, p in pids.items()}
            idle_watched.append(used["watched"] / args.seconds)
            for n in ratios:
                if used["base-a"] > 0:
                    ratios[n].append(used[n] / used["base-a"])
        rss = {n: vm_rss_kib(p) for n, p in pids.items()}
        storm_cg = os.path.join(b.root, "watched", "storm")
        b.mkcg(storm_cg)
        b.attach("watched", storm_cg, 8)
        before = cpu_seconds(pids["watched"])
        script = os.path.join(b.scratch, "storm.py")
        with open(script, "w") as f:
            f.write(STORM)
        storm = subprocess.Popen(["/bin/sh", "-c", f'echo $$ > {storm_cg}/cgroup.procs && exec /usr/bin/python3 '
                                  f'{script} {args.storm}'], stdout=subprocess.PIPE, text=True)
        out, _ = storm.communicate(timeout=args.storm + 120)
        time.sleep(1.5)  # the last held-back rise
        storm_cpu = cpu_seconds(pids["watched"]) - before
        refused = int(out.strip() or 0)
        events = 0
        with open(b.agents["watched"]["audit"]) as f:
            for line in f:
                if '"resource.pids"' in line:
                    events += 1
        idle_cpu = statistics.median(idle_watched) * (args.storm + 1.5)
        extra = max(storm_cpu - idle_cpu, 0.0)
        result = {
            "sandboxes_per_agent": args.sandboxes, "rounds": args.rounds, "seconds": args.seconds,
            "idle_cpu_ratio_median": {n: statistics.median(v) for n, v in ratios.items() if v},
            "idle_cpu_ratio_quartiles": {n: statistics.quantiles(v, n=4) for n, v in ratios.items() if len(v) > 1},
            "idle_cpu_share_watched": statistics.median(idle_watched),
            "rss_kib": rss, "rss_ratio": {n: rss[n] / rss["base-a"] for n in rss},
            "storm_seconds": args.storm, "storm_agent_cpu_s": storm_cpu, "storm_extra_cpu_s": extra,
            "storm_events": events, "storm_refused_forks": refused,
            "cpu_ms_per_event": 1000 * extra / events if events else None,
            "cpu_us_per_refused_fork": 1e6 * extra / refused if refused else None,
        }
        text = json.dumps(result, indent=1)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
