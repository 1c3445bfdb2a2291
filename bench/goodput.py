"""Goodput under repeated failures: a job trains for a fixed window (default 5 minutes) while a
seeded-random process of it is SIGKILLed from outside every --every seconds (default 30), as a
cluster would; its progress at the end of the window (the newest step it has completed, which a
restart from a checkpoint moves back) against the same job's progress without failures is its
goodput. Issue 17 item 11: "goodput under one failure every 30 s over 5 minutes (goal: cohort
>= 90 % of its fault-free throughput)", beside PyTorch's elastic launcher on the same job.

Sides (each a fault-free and a faulted window, interleaved, --rounds times):
  cohort-restart  build/apps/mlp, dp2 over 2 processes (--launch.nproc=2), a checkpoint every C
                  steps, --launch.max-restarts: every kill restarts the whole job from the newest
                  checkpoint (the 2-process fallback of item 7)
  cohort-recover  the same with --fault.recover=true: a killed node is recovered inside the job
                  (its rank restored from the data-parallel replica, the survivor runs both); a
                  killed coordinator (process 0, or the last process left) restarts the job
  cohort-replace  the same with --fault.replace-wait-ms=10000: the launcher starts a replacement for
                  every killed node, which joins the running job in its place (plan and placement
                  kept, its ranks restored from the replica); a killed coordinator restarts the job
  torch           ../shared/bench/elastic_torch.py's worker under torchrun (--max_restarts),
                  DDP over gloo, the same model, a checkpoint every C steps

The job: MLP 784-1024-1024-10 on synthetic data, SGD lr 0.05 momentum 0.9, global batch 256
(128 per rank), 1 thread per process. Also checked: the loss at the faulted window's last step
equals the fault-free window's loss at that step (bit for bit: the plan never changes).

usage: goodput.py [--minutes 5] [--every 30] [--rounds 1] [--ckpt-every 50] [--seed 1]
                  [--sides cohort-restart,cohort-recover,cohort-replace,torch] [--victims any|nodes]
                  [--jsonl FILE]
"""
import argparse, json, os, random, shutil, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PEERS = os.environ.get("COHORT_PEERS", os.path.join(ROOT, "..", "shared", "bench"))
PY = "/usr/bin/python3"

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--minutes", type=float, default=5.0, help="the window each job trains for")
p.add_argument("--every", type=float, default=30.0, help="seconds between two kills (the first after this long)")
p.add_argument("--rounds", type=int, default=1)
p.add_argument("--ckpt-every", type=int, default=50, help="steps between checkpoints, both sides")
p.add_argument("--seed", type=int, default=1, help="which process each kill picks")
p.add_argument("--sides", default="cohort-restart,cohort-recover,cohort-replace,torch")
p.add_argument("--victims", default="any", choices=["any", "nodes"],
               help="nodes: never the job's process 0 (cohort's coordinator, torch's rank 0)")
p.add_argument("--jsonl", default=None, help="append one JSON line per window here")
p.add_argument("--mlp", default=os.path.join(ROOT, "build", "apps", "mlp"))
a = p.parse_args()
sides = [s for s in a.sides.split(",") if s]
for s in sides:
    if s not in ("cohort-restart", "cohort-recover", "cohort-replace", "torch"):
        sys.exit(f"goodput: unknown side '{s}' in --sides")
window = a.minutes * 60.0
STEPS = 10_000_000  # never reached: the window ends the job


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """The live child processes of `pid` (from /proc)."""
    out = []
    for t in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    live = []
    for c in out:
        try:
            with open(f"/proc/{c}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    live.append(c)
        except OSError:
            pass
    return live


def newest_step(losses):
    """The newest step of the running attempt and its loss (0, None before the first)."""
    return max(losses.items()) if losses else (0, None)


def cohort_job(side, work, faulted):
    metrics = os.path.join(work, "metrics.jsonl")
    cmd = [a.mlp, "--data.name=synth", "--model.dims=784,1024,1024,10", "--train.batch=256",
           f"--train.steps={STEPS}", "--train.warmup=0", "--train.lr=0.05", "--train.momentum=0.9",
           "--plan.dp=2", "--launch.nproc=2", "--plan.refit=false", "--launch.max-restarts=1000",
           f"--checkpoint.dir={os.path.join(work, 'ck')}", f"--checkpoint.every={a.ckpt_every}",
           f"--metrics.file={metrics}"]
    if side in ("cohort-recover", "cohort-replace"):
        cmd.append("--fault.recover=true")
    if side == "cohort-replace":
        cmd.append("--fault.replace-wait-ms=10000")
    pr = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "stderr"), "w"),
                          start_new_session=True)

    def rank_of(pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                for kv in f.read().split(b"\0"):
                    if kv.startswith(b"RANK="):
                        return int(kv[5:])
        except (OSError, ValueError):
            pass
        return -1

    def victims():  # the job's processes: the launcher's children (--victims nodes: not process 0)
        return [c for c in children(pr.pid) if a.victims == "any" or rank_of(c) > 0]

    def losses():  # step -> loss, from the metrics file (the last attempt's)
        out = {}
        try:
            with open(metrics) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if "step" in r and "loss" in r and "event" not in r:
                        out[r["step"]] = r["loss"]
        except OSError:
            pass
        return out

    return pr, victims, lambda: newest_step(losses()), losses


def torch_job(work, faulted):
    logf, ckd = os.path.join(work, "events.jsonl"), os.path.join(work, "ckpt")
    os.makedirs(ckd, exist_ok=True)
    port = free_port()
    cmd = [PY, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2", "--max_restarts=1000",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=goodput_{port}",
           "--monitor_interval=5", "--redirects=2", "--tee=2", f"--log_dir={os.path.join(work, 'tel')}",
           os.path.join(PEERS, "elastic_torch.py"), "--worker", "--log", logf, "--ckpt-dir", ckd,
           "--steps", str(STEPS), "--ckpt-every", str(a.ckpt_every), "--dims", "784,1024,1024,10",
           "--batch", "128", "--lr", "0.05", "--momentum", "0.9", "--threads", "1", "--seed", "0"]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    env.pop("ELASTIC_KILL_STEP", None)
    pr = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "stderr"), "w"),
                          env=env, start_new_session=True, cwd=PEERS)

    def events():
        out = []
        try:
            with open(logf) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
        except OSError:
            pass
        return out

    def victims():  # the workers of the newest attempt that are still alive
        ev = events()
        if not ev:
            return []
        newest = max(e["restart"] for e in ev if e["ev"] == "start") if any(e["ev"] == "start" for e in ev) else 0
        pids = [e["pid"] for e in ev if e["ev"] == "start" and e["restart"] == newest
                and (a.victims == "any" or e["rank"] > 0)]
        live = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                live.append(pid)
            except OSError:
                pass
        return live

    def losses():  # the newest attempt's loss at each step (rank 0; the log keeps every attempt's)
        steps = [e for e in events() if e["ev"] == "step" and e["rank"] == 0]
        newest = max((e["restart"] for e in steps), default=0)
        return {e["step"]: e["loss"] for e in steps if e["restart"] == newest}

    return pr, victims, lambda: newest_step(losses()), losses


def run_window(side, faulted, rnd, rng):
    work = tempfile.mkdtemp(prefix=f"goodput_{side}_")
    pr, victims, progress, losses = (torch_job(work, faulted) if side == "torch"
                                     else cohort_job(side, work, faulted))
    t0 = time.time()
    kills, next_kill = [], t0 + a.every
    ended_early = None
    while time.time() - t0 < window:
        if pr.poll() is not None:
            ended_early = pr.returncode
            break
        now = time.time()
        if faulted and now >= next_kill:
            v = victims()
            if v:
                pid = rng.choice(sorted(v))
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills.append({"t": round(now - t0, 2), "pid": pid, "of": sorted(v), "step": progress()[0]})
                except OSError:
                    pass
                next_kill += a.every
            # no live process at the moment (a restart between attempts): try again shortly
        time.sleep(0.05)
    step, loss = progress()
    elapsed = time.time() - t0
    try:
        os.killpg(pr.pid, signal.SIGKILL)
    except OSError:
        pass
    pr.wait()
    res = {"side": side, "faulted": faulted, "round": rnd, "window_s": round(elapsed, 2), "steps": step,
           "loss": loss, "kills": kills, "losses": losses(), "load": os.getloadavg()[0]}
    if ended_early is not None:
        res["error"] = f"the job ended by itself (exit {ended_early}); see {work}/stderr"
        with open(os.path.join(work, "stderr")) as f:
            res["stderr_tail"] = f.read()[-2000:]
    if side != "torch":
        try:
            with open(os.path.join(work, "stderr")) as f:
                txt = f.read()
            res["restarts"] = txt.count("restarting all")
            res["recoveries_in_job"] = txt.count("go on without it")
            res["replacements"] = txt.count("to take process")
        except OSError:
            pass
    if os.environ.get("GOODPUT_KEEP"):  # the job's stderr and files, for a look afterwards
        res["work"] = work
    else:
        shutil.rmtree(work, ignore_errors=True)
    return res


rng = random.Random(a.seed)
rows = []
for rnd in range(1, a.rounds + 1):
    for side in sides:
        for faulted in (False, True):
            r = run_window(side, faulted, rnd, rng)
            line = {k: v for k, v in r.items() if k != "losses"}
            print(json.dumps(line), file=sys.stderr, flush=True)
            rows.append(r)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps(line) + "\n")

print(f"\ngoodput over {a.minutes:g}-minute windows, one SIGKILL every {a.every:g} s ({a.victims}), a checkpoint "
      f"every {a.ckpt_every} steps, {a.rounds} round(s)")
print(f"{'side':15} {'round':>5} {'steps ff':>9} {'steps faulted':>13} {'goodput':>8} {'kills':>5} "
      f"{'restarts':>8} {'in-job':>6}  loss equal")
summary = {}
for side in sides:
    for rnd in range(1, a.rounds + 1):
        ff = [r for r in rows if r["side"] == side and r["round"] == rnd and not r["faulted"]]
        fa = [r for r in rows if r["side"] == side and r["round"] == rnd and r["faulted"]]
        if not ff or not fa:
            continue
        ff, fa = ff[0], fa[0]
        g = fa["steps"] / ff["steps"] if ff["steps"] else float("nan")
        ref = ff["losses"].get(fa["steps"], ff["losses"].get(str(fa["steps"])))
        equal = ("error" not in fa and "error" not in ff and ref is not None and fa["loss"] == ref)
        if ref is None:
            equal = "n/a (fault-free did not reach the step)"
        summary.setdefault(side, []).append(g)
        print(f"{side:15} {rnd:5} {ff['steps']:9} {fa['steps']:13} {100 * g:7.1f}% {len(fa['kills']):5} "
              f"{str(fa.get('restarts', '-')):>8} {str(fa.get('recoveries_in_job', '-')):>6}  {equal}")
for side, gs in summary.items():
    gs = sorted(gs)
    print(f"{side}: goodput median {100 * gs[len(gs) // 2]:.1f} % over {len(gs)} round(s)")
