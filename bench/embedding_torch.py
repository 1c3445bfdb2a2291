"""The PyTorch side of cohort-embedding (issue 19 item 8): DLRM's embedding path alone — 26
nn.EmbeddingBag(rows, dim, mode="sum", sparse=True) of a Criteo file's table sizes, each step
looking up a batch's ids (the file's batches in order), backward of the sum of every output, and
torch.optim.SGD on the sparse gradients. Rows per second = batch x 26 per step. One JSON line.

usage: embedding_torch.py FILE [--batch B] [--steps N] [--warmup W] [--threads T] [--dim D]
FILE's .meta.json gives the table sizes (as dlrm_torch.py); criteo_synth.py (COHORT_PEERS or
../shared/bench) reads it.
"""
import argparse, json, os, sys, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("COHORT_PEERS", os.path.join(here, "..", "..", "shared", "bench")))
import numpy as np
import torch
import criteo_synth as cs

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--batch", type=int, default=2048)
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--dim", type=int, default=16)
a = ap.parse_args()
torch.set_num_threads(a.threads)
meta = cs.read_meta(a.file) or {}
rows = cs.table_rows(meta.get("max_rows", 0))
_, ids, _ = cs.load(a.file, rows)
ids = torch.from_numpy(ids)
tables = torch.nn.ModuleList(torch.nn.EmbeddingBag(n, a.dim, mode="sum", sparse=True) for n in rows)
opt = torch.optim.SGD(tables.parameters(), lr=0.01)
offsets = torch.arange(a.batch, dtype=torch.int64)
n = len(ids)
for s in range(a.warmup + a.steps):
    if s == a.warmup:
        t0 = time.perf_counter()
    lo = (s * a.batch) % n
    idx = torch.arange(lo, lo + a.batch) % n if lo + a.batch > n else slice(lo, lo + a.batch)
    batch = ids[idx]
    loss = sum(e(batch[:, t].contiguous(), offsets).sum() for t, e in enumerate(tables))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
secs = time.perf_counter() - t0
print(json.dumps({"bench": "torch_embedding", "torch": torch.__version__, "rows_per_s": a.steps * a.batch * 26 / secs,
                  "step_ms": 1000 * secs / a.steps, "batch": a.batch, "steps": a.steps, "dim": a.dim,
                  "table_rows": sum(rows), "threads": a.threads}))
