#!/usr/bin/python3
"""B4 (event pipeline) and B5 (agent footprint and scale), with the real `cordon` binary.

Run as root through bench/run_agent.sh, which compiles bench/agent_bench_helper.c (libc only)
and renders the JSON this writes with bench/report_agent.py. See docs/performance-agent.md.

Everything it creates lives under <cgroup2>/cordon-agentbench-<pid>/ and a scratch directory
/tmp/cordon-agentbench-*; it is removed on exit, on error and on SIGINT/SIGTERM (sandboxes
detached, agent and helper processes it started stopped by their pid). A run killed with
SIGKILL leaves them behind: the next run detaches and removes cgroups of
cordon-agentbench-<pid> whose process is gone.

B4: one agent (rate limit off, one jsonl sink, one `cordon tail -f -o json` subscriber), one
sandbox whose policy denies everything, and a flood generator in it doing denied UDP sendto().
  - saturation: the generator floods as fast as it can for --seconds, --runs rounds. The ring
    buffer overflows, so the agent is never idle: its events per CPU-second (utime + stime of
    the agent process) is its capacity on one core, whatever share of the machine it got.
    Same for the tail subscriber. With --baseline, a second pipeline runs the other binary and
    every round visits both in a shuffled order (the machine's speed drifts): the per-round
    ratio of their capacities is the before/after figure.
  - overload: the generator is paced at twice the agent's median capacity (or as fast as it
    can, if that is less) for --seconds, --runs times.
  Every run checks the accounting exactly: kernel denials = events in the audit file + the
  loss records' counts (+ suppressed, which is 0 with the rate limit off), and what the tail
  printed + what the agent counted as dropped for it = the events and loss records it was sent.
B5: one agent, then 1, 100 and 1,000 sandboxes attached through it (`cordon attach`, one cgroup
each): the agent's VmRSS and idle CPU at each level, and --probes attach/detach cycles of one more
sandbox: `cordon attach` end to end (process start to exit) and, from the agent's log line, the
AttachSandbox call itself and the agent's whole handling of the request.
"""
import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")
PREFIX = "cordon-agentbench-"
DENY_POLICY = ("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: agentbench\n"
               "spec:\n  network:\n    egress: []\n")


def log(msg):
    print(f"agent_bench: {msg}", file=sys.stderr, flush=True)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    raise SystemExit("agent_bench: no cgroup2 mount")


def quartiles(values):
    v = sorted(values)
    if not v:
        return None
    if len(v) == 1:
        return {"median": v[0], "q1": v[0], "q3": v[0], "n": 1, "min": v[0], "max": v[0]}
    q = statistics.quantiles(v, n=4, method="inclusive")
    return {"median": statistics.median(v), "q1": q[0], "q3": q[2], "n": len(v), "min": v[0], "max": v[-1]}


def cpu_times(pid):
    """(user, system) CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def cpu_seconds(pid):
    return sum(cpu_times(pid))


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Bench:
    def __init__(self, args):
        self.args = args
        self.mount = cgroup2_mount()
        self.parent = os.path.join(self.mount, f"{PREFIX}{os.getpid()}")
        self.scratch = tempfile.mkdtemp(prefix=PREFIX)
        self.procs = []          # Popen objects we started
        self.cgroups = []        # directories we created, in creation order
        self.attached = set()    # cgroup directories with a sandbox we attached
        self.env = dict(os.environ)
        self.policy = os.path.join(self.scratch, "deny.yaml")
        with open(self.policy, "w") as f:
            f.write(DENY_POLICY)
        self.clean_stale()
        os.mkdir(self.parent)
        self.cgroups.append(self.parent)

    # ---- cleanup ------------------------------------------------------------
    def clean_stale(self):
        for name in os.listdir(self.mount):
            m = re.fullmatch(PREFIX + r"(\d+)", name)
            if not m or os.path.exists(f"/proc/{m.group(1)}"):
                continue
            log(f"removing the leftovers of a killed run: {name}")
            dirs = []
            for root, subdirs, _ in os.walk(os.path.join(self.mount, name)):
                dirs.append(root)
            env = dict(os.environ)
            env.pop("CORDON_AGENT_SOCKET", None)
            for d in reversed(dirs):
                subprocess.run([self.args.cordon, "detach", "--cgroup", d], env=env, capture_output=True)
                try:
                    os.rmdir(d)
                except OSError:
                    pass

    def mkcg(self, path):
        os.mkdir(path)
        self.cgroups.append(path)
        return path

    def cleanup(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        env = dict(os.environ)
        env.pop("CORDON_AGENT_SOCKET", None)  # no agent any more: detach directly
        for cg in sorted(self.attached):
            subprocess.run([self.args.cordon, "detach", "--cgroup", cg], env=env, capture_output=True)
        self.attached.clear()
        for cg in reversed(self.cgroups):
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a process that is still leaving it
        self.cgroups = []
        shutil.rmtree(self.scratch, ignore_errors=True)

    # ---- agent ----------------------------------------------------------------
    def start_agent(self, binary, name, scope, extra=""):
        """An agent reading only sandboxes whose cgroup (below the cgroup2 mount) starts with scope."""
        d = os.path.join(self.scratch, name)
        os.mkdir(d)
        sock = os.path.join(d, "agent.sock")
        audit = os.path.join(d, "audit.jsonl")
        config = os.path.join(d, "agent.yaml")
        with open(config, "w") as f:
            f.write(f"socket: {sock}\nsinks:\n  - kind: jsonl\n    path: {audit}\n    maxBytes: 0\n"
                    f"metrics:\n  listen: \"\"\nrateLimit: {{eventsPerSecond: 0}}\n"
                    f"adopt:\n  cgroupPrefixes: [{scope}]\n{extra}")
        logf = open(os.path.join(d, "agent.log"), "w")
        p = subprocess.Popen([binary, "agent", "--config", config], stdout=logf, stderr=logf)
        self.procs.append(p)
        self.env["CORDON_AGENT_SOCKET"] = sock  # the latest agent is the default one
        for _ in range(200):
            if p.poll() is not None:
                raise SystemExit(f"agent_bench: the agent exited: {open(logf.name).read()}")
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                s.close()
                break
            except OSError:
                time.sleep(0.05)
        return {"proc": p, "dir": d, "audit": audit, "log": logf.name, "binary": binary,
                "env": dict(os.environ, CORDON_AGENT_SOCKET=sock)}

    def stop_agent(self, agent):
        p = agent["proc"]
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        self.procs.remove(p)

    def cli(self, binary, *argv, check=True, env=None):
        r = subprocess.run([binary, *argv], env=env or self.env, capture_output=True, text=True)
        if check and r.returncode != 0:
            raise SystemExit(f"agent_bench: cordon {' '.join(argv)}: {r.stderr.strip()}")
        return r

    def status(self, binary, env=None):
        return json.loads(self.cli(binary, "status", "--json", env=env).stdout)

    def attach(self, binary, cg, env=None):
        self.cli(binary, "attach", "--cgroup", cg, "--policy", self.policy, "--allow-degraded", env=env)
        self.attached.add(cg)

    def detach(self, binary, cg, env=None):
        self.cli(binary, "detach", "--cgroup", cg, env=env)
        self.attached.discard(cg)


# ---- B4 ---------------------------------------------------------------------------

def count_new_lines(path, state):
    """Counts lines (and kinds) appended to path since the last call."""
    events = loss_records = loss_sum = lines = 0
    with open(path, "rb") as f:
        f.seek(state["offset"])
        new = f.read()
    state["offset"] += len(new)
    data = state.get("rest", b"") + new
    end = data.rfind(b"\n") + 1
    state["rest"] = data[end:]
    for line in data[:end].split(b"\n")[:-1]:
        lines += 1
        if b'"kind":"loss"' in line:
            loss_records += 1
            loss_sum += int(json.loads(line)["loss"]["dropped"])
        elif b'"kind":"net.sendmsg"' in line:
            events += 1
    return {"lines": lines, "events": events, "loss_records": loss_records, "loss_sum": loss_sum}


def snapshot(bench, binary, sandbox_id, env):
    s = bench.status(binary, env)
    k = next(x for x in s["sandboxes"] if int(x["id"]) == sandbox_id)
    a = s["agent"] or {}
    sb = next((x for x in a.get("sandboxes", []) if int(x["id"]) == sandbox_id), {})
    return {"generated": int(k["denied"]["sendmsg"]), "delivered": int(sb.get("delivered", 0)),
            "lost": int(sb.get("lost", 0)), "suppressed": int(sb.get("suppressed", 0)),
            "tailer_drops": int(a.get("tailerDrops", 0)), "tailers": len(a.get("tailers", []))}


def b4_pipeline(bench, binary, label, seconds):
    """Starts an agent, a sandbox and a tail; returns the pipeline (run, close)."""
    args = bench.args
    log(f"B4 [{label}]: agent {binary}")
    cg_rel = f"/{os.path.basename(bench.parent)}/flood-{label}"
    agent = bench.start_agent(binary, f"b4-{label}", cg_rel, "tail: {disconnectAfterDropped: 0}\n")
    env = agent["env"]
    cg = bench.mkcg(os.path.join(bench.parent, f"flood-{label}"))
    bench.attach(binary, cg, env)
    st = bench.status(binary, env)
    sandbox_id = int(next(x for x in st["sandboxes"] if x["cgroup"].endswith(cg[len(bench.mount):]))["id"])
    tail_out = os.path.join(agent["dir"], "tail.jsonl")
    tail_err = open(os.path.join(agent["dir"], "tail.err"), "w")
    tail = subprocess.Popen([binary, "tail", "-f", "-o", "json", "--cgroup", cg], env=env,
                            stdout=subprocess.PIPE, stderr=tail_err)
    counter = subprocess.Popen([args.helper, "count", tail_out], stdin=tail.stdout, stdout=subprocess.DEVNULL)
    tail.stdout.close()
    bench.procs += [tail, counter]
    for _ in range(100):
        if snapshot(bench, binary, sandbox_id, env)["tailers"] == 1 and os.path.exists(tail_out):
            break
        time.sleep(0.1)
    audit_state = {"offset": 0}
    tail_state = {"offset": 0}
    results = []
    pagecache_files = []

    def one_run(phase, rate, round_index=None):
        s0 = snapshot(bench, binary, sandbox_id, env)
        audit_offset0 = audit_state["offset"]
        (u0, k0), t0 = cpu_times(agent["proc"].pid), cpu_seconds(tail.pid)
        out = subprocess.run([args.helper, "flood", cg, str(rate), str(seconds)], capture_output=True, text=True)
        flood = json.loads(out.stdout)
        # Wait until everything generated is accounted for (loss records come with the
        # agent's 200 ms loss check) and the tail has printed or been counted for it all.
        deadline = time.time() + 20
        audit = {"lines": 0, "events": 0, "loss_records": 0, "loss_sum": 0}
        tailc = {"lines": 0, "events": 0, "loss_records": 0, "loss_sum": 0}
        while True:
            for k, v in count_new_lines(agent["audit"], audit_state).items():
                audit[k] += v
            for k, v in count_new_lines(tail_out, tail_state).items():
                tailc[k] += v
            s1 = snapshot(bench, binary, sandbox_id, env)
            gen = s1["generated"] - s0["generated"]
            balanced = (audit["events"] + audit["loss_sum"] == gen and
                        s1["delivered"] - s0["delivered"] == audit["events"] and s1["lost"] - s0["lost"] == audit["loss_sum"])
            tail_done = tailc["lines"] + s1["tailer_drops"] - s0["tailer_drops"] >= audit["lines"]
            if (balanced and tail_done) or time.time() > deadline:
                break
            time.sleep(0.2)
        (u1, k1), t1 = cpu_times(agent["proc"].pid), cpu_seconds(tail.pid)
        audit_bytes = audit_state["offset"] - audit_offset0
        # The same bytes appended by a plain writer to a new file, right away: what putting them
        # into fresh page cache costs on this machine (side by side with the agent, see the helper).
        pc_file = os.path.join(agent["dir"], f"pagecache-{len(pagecache_files)}.dat")
        pc = json.loads(subprocess.run([args.helper, "pagecache", pc_file, str(audit_bytes)], capture_output=True,
                                       text=True, check=True).stdout)
        pagecache_files.append(pc_file)  # kept until the end: freed pages would be reused warm
        gen = s1["generated"] - s0["generated"]
        delivered = s1["delivered"] - s0["delivered"]
        lost = s1["lost"] - s0["lost"]
        suppressed = s1["suppressed"] - s0["suppressed"]
        tail_drops = s1["tailer_drops"] - s0["tailer_drops"]
        agent_user, agent_sys = u1 - u0, k1 - k0
        agent_cpu, tail_cpu = agent_user + agent_sys, t1 - t0
        pc_cpu = pc["user_s"] + pc["sys_s"]
        wall = flood["ns"] / 1e9
        r = {
            "phase": phase, "round": round_index, "target_rate": rate, "seconds": wall, "sends": flood["sends"], "eperm": flood["eperm"],
            "generated": gen, "delivered": delivered, "lost": lost, "suppressed": suppressed,
            "audit_events": audit["events"], "audit_loss_records": audit["loss_records"],
            "audit_loss_sum": audit["loss_sum"], "tail_lines": tailc["lines"], "tail_events": tailc["events"],
            "tail_drops": tail_drops, "agent_cpu_s": agent_cpu, "tail_cpu_s": tail_cpu,
            "agent_user_s": agent_user, "agent_sys_s": agent_sys, "audit_bytes": audit_bytes,
            "pagecache_cpu_s": pc_cpu, "pagecache_wall_s": pc["ns"] / 1e9,
            "agent_events_per_cpu_s_without_pagecache": (delivered / (agent_cpu - pc_cpu)
                                                         if agent_cpu - pc_cpu > 0 else None),
            "generated_per_s": gen / wall, "delivered_per_s": delivered / wall,
            "agent_events_per_cpu_s": delivered / agent_cpu if agent_cpu > 0 else None,
            "tail_lines_per_cpu_s": (tailc["lines"]) / tail_cpu if tail_cpu > 0 else None,
            "loss_fraction": lost / gen if gen else 0,
            # The identities this benchmark checks exactly.
            "accounted": gen == audit["events"] + audit["loss_sum"] + suppressed and delivered == audit["events"]
                         and lost == audit["loss_sum"] and flood["eperm"] == flood["sends"] == gen,
            "tail_accounted": tailc["lines"] + tail_drops == audit["lines"],
        }
        log(f"  [{label}] {phase}: {gen:,} generated in {wall:.2f} s ({gen / wall:,.0f}/s), {delivered:,} delivered "
            f"({delivered / wall:,.0f}/s wall, {r['agent_events_per_cpu_s'] or 0:,.0f}/agent CPU-s), {lost:,} lost, "
            f"tail {tailc['lines']:,} + {tail_drops:,} dropped; accounted {r['accounted']} {r['tail_accounted']}; agent "
            f"user {agent_user:.2f} s sys {agent_sys:.2f} s, {audit_bytes / 1e6:.0f} MB of lines, page cache alone "
            f"{pc_cpu:.2f} s")
        results.append(r)
        return r

    def close():
        tail.send_signal(signal.SIGTERM)
        tail.wait(timeout=30)
        counter.wait(timeout=30)
        bench.procs.remove(tail)
        bench.procs.remove(counter)
        bench.detach(binary, cg, env)
        bench.stop_agent(agent)
        for f in pagecache_files:
            os.unlink(f)

    return {"label": label, "binary": binary, "runs": results, "run": one_run, "close": close}


def b4(bench, runs, seconds):
    """Saturation rounds, each visiting the pipelines (this build, and the baseline if given) in a
    shuffled order; then overload runs of this build at twice its median capacity."""
    pipes = [b4_pipeline(bench, bench.args.cordon, "current", seconds)]
    if bench.args.baseline:
        pipes.append(b4_pipeline(bench, os.path.abspath(bench.args.baseline), "baseline", seconds))
    for p in pipes:
        p["run"]("warmup", 0)
        p["runs"].clear()
    rng = random.Random(bench.args.seed)
    for i in range(runs):
        order = pipes[:]
        rng.shuffle(order)
        for p in order:
            p["run"]("saturation", 0, i)
    cur = pipes[0]
    capacity = statistics.median(r["agent_events_per_cpu_s"] for r in cur["runs"] if r["agent_events_per_cpu_s"])
    for i in range(runs):
        cur["run"]("overload", round(2 * capacity), i)
    out = []
    for p in pipes:
        p["close"]()
        out.append({"label": p["label"], "binary": p["binary"], "runs": p["runs"]})
    out[0]["capacity"] = capacity
    return out


# ---- B5 ---------------------------------------------------------------------------

ATTACH_LOG = re.compile(r"attached sandbox .* in ([0-9.]+) ms: AttachSandbox ([0-9.]+) ms( \(prepared instance\))?")


def timed(bench, *argv):
    out = subprocess.run([bench.args.helper, "time", *argv], env=bench.env, capture_output=True, text=True)  # the B5 agent
    r = json.loads(out.stdout)
    if r["status"] != 0:
        raise SystemExit(f"agent_bench: {' '.join(argv)} exited {r['status']}")
    return r["ns"] / 1e6


def b5_scale(bench, binary, label, sizes, probes):
    log(f"B5 [{label}]: agent {binary}, sandboxes {sizes}, {probes} probe attaches at each")
    agent = bench.start_agent(binary, f"b5-{label}", f"/{os.path.basename(bench.parent)}/scale-{label}/")
    pid = agent["proc"].pid
    time.sleep(0.5)
    levels = [{"sandboxes": 0, "rss_kib": vm_rss_kib(pid)}]
    scale = bench.mkcg(os.path.join(bench.parent, f"scale-{label}"))
    probe = bench.mkcg(os.path.join(scale, "probe"))
    n = 0
    grow_ms = []
    for size in sizes:
        while n < size:
            n += 1
            cg = bench.mkcg(os.path.join(scale, f"s{n:05d}"))
            grow_ms.append(timed(bench, binary, "attach", "--cgroup", cg, "--policy", bench.policy,
                                 "--allow-degraded"))
            bench.attached.add(cg)
        time.sleep(1.0)
        c0 = cpu_seconds(pid)
        time.sleep(2.0)
        idle = (cpu_seconds(pid) - c0) / 2.0
        rss = vm_rss_kib(pid)
        cli_ms, agent_ms, attach_ms, detach_ms, start_ms = [], [], [], [], []
        prepared = 0
        for _ in range(probes):
            # The floor of any `cordon` command: starting the binary (side by side with the attach).
            start_ms.append(timed(bench, binary, "--version"))
            with open(agent["log"]) as f:
                f.seek(0, 2)
                before = f.tell()
            cli_ms.append(timed(bench, binary, "attach", "--cgroup", probe, "--policy", bench.policy,
                                "--allow-degraded"))
            bench.attached.add(probe)
            with open(agent["log"]) as f:
                f.seek(before)
                m = ATTACH_LOG.search(f.read())
            if m:
                agent_ms.append(float(m.group(1)))
                attach_ms.append(float(m.group(2)))
                prepared += bool(m.group(3))
            detach_ms.append(timed(bench, binary, "detach", "--cgroup", probe))
            bench.attached.discard(probe)
        st = bench.status(binary)
        read = len((st["agent"] or {}).get("sandboxes", []))
        level = {"sandboxes": size, "agent_reads": read, "rss_kib": rss, "idle_cpu": idle,
                 "cli_attach_ms": quartiles(cli_ms), "agent_attach_ms": quartiles(agent_ms),
                 "attach_sandbox_ms": quartiles(attach_ms), "cli_detach_ms": quartiles(detach_ms),
                 "cli_start_ms": quartiles(start_ms), "prepared_attaches": prepared, "probes": len(attach_ms),
                 "grow_attach_ms": quartiles(grow_ms[-min(len(grow_ms), 100):])}
        log(f"  {size} sandboxes (agent reads {read}): VmRSS {rss / 1024:.1f} MiB, idle CPU {idle * 100:.1f} %, "
            f"cordon attach {level['cli_attach_ms']['median']:.2f} ms, AttachSandbox "
            f"{(level['attach_sandbox_ms'] or {}).get('median', float('nan')):.2f} ms")
        levels.append(level)
    log("  detaching")
    for cg in sorted(c for c in bench.attached if c.startswith(scale)):
        bench.detach(binary, cg)
    bench.stop_agent(agent)
    for cg in [c for c in bench.cgroups if c.startswith(scale + "/")][::-1] + [scale]:
        os.rmdir(cg)
        bench.cgroups.remove(cg)
    return {"label": label, "binary": binary, "levels": levels}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cordon", required=True, help="the cordon binary")
    ap.add_argument("--helper", required=True, help="agent_bench_helper")
    ap.add_argument("--out", help="JSON output (default stdout)")
    ap.add_argument("--runs", type=int, default=10, help="runs per B4 phase (default 10)")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per B4 run (default 1)")
    ap.add_argument("--sizes", default="1,100,1000", help="B5 sandbox counts (default 1,100,1000)")
    ap.add_argument("--probes", type=int, default=15, help="B5 attach/detach cycles per size (default 15)")
    ap.add_argument("--baseline", help="another cordon binary (e.g. before a change) measured too: B4 saturation, B5")
    ap.add_argument("--only", choices=["b4", "b5"], help="run one part")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random)")
    ap.add_argument("--baseline-label", help="how the report names the baseline (default: its path)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("agent_bench: needs root")
    args.cordon = os.path.abspath(args.cordon)
    args.helper = os.path.abspath(args.helper)
    bench = Bench(args)

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    out = {
        "machine": {"nproc": os.cpu_count(), "kernel": platform.release(),
                    "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), ""),
                    "loadavg_start": open("/proc/loadavg").read().split()[:3]},
        "config": {"runs": args.runs, "seconds": args.seconds, "sizes": args.sizes, "probes": args.probes},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        if args.only in (None, "b4"):
            out["b4"] = b4(bench, args.runs, args.seconds)
        if args.only in (None, "b5"):
            sizes = [int(x) for x in args.sizes.split(",")]
            out["b5"] = [b5_scale(bench, args.cordon, "current", sizes, args.probes)]
            if args.baseline:
                out["b5"].append(b5_scale(bench, os.path.abspath(args.baseline), "baseline", sizes,
                                          max(3, args.probes // 3)))
    except KeyboardInterrupt:
        log("interrupted: cleaning up")
        bench.cleanup()
        return 130
    finally:
        bench.cleanup()
    out["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    for part in ("b4", "b5"):
        for d in out.get(part, []):
            if d["label"] == "baseline":
                d["name"] = args.baseline_label or d["binary"]
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
