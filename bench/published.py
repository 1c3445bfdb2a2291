"""The driver of bench/published.sh: plans every published run with the gpt app and compares."""
import json, os, subprocess, sys

root, out_path, filters = sys.argv[1], sys.argv[2], sys.argv[3:]
own = os.environ.get("OWN", "1") != "0"
runs = json.load(open(os.path.join(root, "configs/published/runs.json")))["runs"]
runs = [r for r in runs if not filters or any(f in r["id"] for f in filters)]


def counted_flops_per_step(run):
    """FLOPs of one step as the source counts them (its FLOP/s are these over the step time)."""
    m, B = run["model"], run["batch"]
    s, l, h, V = m["seq"], m["layers"], m["d"], m["vocab"]
    kind = run["published"]["flops_counted"]
    if kind == "megatron-2021":  # arXiv 2104.04473 eq. 3: forward, backward and the recomputed forward
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    if kind == "megatron-core":  # model FLOPs (no recomputation), the output layer's backward counted
        return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    raise SystemExit(f"{run['id']}: unknown flops_counted '{kind}'")


def model_flops_per_step(run):
    """Model FLOPs (no recomputation), Megatron's form: what MFU is measured in."""
    m, B = run["model"], run["batch"]
    s, l, h, V = m["seq"], m["layers"], m["d"], m["vocab"]
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def plan(run, layout):
    m = run["model"]
    args = [os.path.join(root, "build/apps/gpt"), f"--model.layers={m['layers']}", f"--model.d={m['d']}",
            f"--model.heads={m['heads']}", f"--model.seq={m['seq']}", f"--model.vocab={m['vocab']}",
            f"--model.attention={m.get('attention', 'unfused')}", f"--model.head={m.get('head', 'replicated')}",
            f"--train.batch={run['batch']}", "--plan.half-precision=true", "--plan.recompute=true",
            "--plan.only=true", "--plan.mode=auto", "--plan.max-micro-batches=1024",
            f"--cluster.file={os.path.join(root, 'configs/published', run['cluster'])}"]
    if layout:
        args += [f"--plan.dp={layout['dp']}", f"--plan.tp={layout['tp']}", f"--plan.pp={layout['pp']}"]
    runtime = run.get("runtime", {})
    if runtime.get("overlap"):
        args.append(f"--plan.assume-overlap={runtime['overlap']}")
    if runtime.get("sequence_parallel"):
        args.append("--plan.assume-sequence-parallel=true")
    if runtime.get("f32_gradients"):
        args.append("--plan.assume-f32-gradients=true")
    if runtime.get("f32_loss"):
        args.append("--plan.assume-f32-loss=true")
    if runtime.get("even_layers"):
        args.append("--plan.assume-even-layers=true")
    if layout and layout.get("recompute"):
        args.append("--plan.always-recompute=true")
    p = subprocess.run(args, capture_output=True, text=True)
    last = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not last:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[:2]}
    return json.loads(last[-1])["plan"]


def layout_text(p):
    if "error" in p:
        return "error: " + " ".join(p["error"])[:60]
    t = f"dp{p['dp']} tp{p['tp']} pp{p['pp']} m{p['micro_batches']}"
    if p.get("virtual_stages", 1) > 1:
        t += f" v{p['virtual_stages']}"
    if p["pp"] > 1:
        t += " " + p["schedule"]
    return t + (" sharded" if p["shard_params"] else "") + (" rc" if p.get("recompute") else "")


rows = []
with open(out_path, "w") as out:
    for run in runs:
        published_s = counted_flops_per_step(run) / (run["published"]["tflops_per_gpu"] * 1e12 * run["gpus"])
        given = plan(run, run["layout"])
        chosen = plan(run, None) if own else None
        row = {"id": run["id"], "gpus": run["gpus"], "published_step_s": published_s,
               "published_samples_per_s": run["batch"] / published_s,
               "published_mfu": model_flops_per_step(run) / (published_s * run["gpus"] * run["published"]["peak_tflops"] * 1e12),
               "published_layout": given, "own_choice": chosen}
        for key, p in (("layout", given), ("own", chosen)):
            if p and "predicted" in p:
                step = p["predicted"]["step_s"]
                row[f"{key}_step_s"] = step
                row[f"{key}_samples_per_s"] = run["batch"] / step
                # throughput error: predicted samples/s over published samples/s, minus 1
                row[f"{key}_error"] = published_s / step - 1
                row[f"{key}_mfu"] = model_flops_per_step(run) / (step * run["gpus"] * run["published"]["peak_tflops"] * 1e12)
        rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()
        print(f"{row['id']:30} {run['gpus']:5}  published {published_s:7.2f} s (MFU {100 * row['published_mfu']:4.1f}%)  "
              f"layout {layout_text(given):36} {row.get('layout_step_s', float('nan')):7.2f} s {100 * row.get('layout_error', float('nan')):+6.1f}%"
              + (f"  own {layout_text(chosen):36} {row.get('own_step_s', float('nan')):7.2f} s" if chosen else ""),
              flush=True)

errors = [abs(r["layout_error"]) for r in rows if "layout_error" in r]
within = sum(e <= 0.15 for e in errors)
print(f"\nunder the published layout: mean absolute error {100 * sum(errors) / max(1, len(errors)):.1f}% over {len(errors)} runs, "
      f"{within} within ±15%, largest {100 * max(errors, default=0):.1f}%")
if own:
    faster = sum(1 for r in rows if "own_step_s" in r and "layout_step_s" in r and r["own_step_s"] <= r["layout_step_s"] * (1 + 1e-9))
    print(f"the planner's own choice predicted at least as fast as the published layout: {faster} of {len(rows)}")
print("(step times; throughput error: predicted samples/s over published, minus 1, the samples/s in the .jsonl; "
      "simulated: cost model and simulator, no GPU)")
