"""PyTorch oracle for cohort's tests (python3-torch from Debian; run with /usr/bin/python3).

usage: torch_reference.py mlp|gpt|dlrm DIR
       torch_reference.py greedy EXPORT.safetensors HEADS TOKENS_JSON PROMPT_LENGTH
Reads DIR/manifest.txt + *.bin (written by test/support/tensor_files.hpp): the model's
parameters in cohort's layout (Linear weights [in, out]), the inputs, and the config.
Builds the same model in PyTorch, computes the loss and every gradient, takes one optimizer
step, and writes DIR/out/: loss, grad.<param> and next.<param> in cohort's layout.
greedy: loads a GPT exported by cohort (--checkpoint.export) and checks, for every token of
cohort's greedy continuation (TOKENS_JSON: prompt then continuation), that it is torch's most
likely next token given the tokens before it (or within 1e-4 of it: a tie in float); prints
{"checked", "disagree", "worst_gap"} as JSON.
"""
import json, math, os, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def read(d):
    out = {}
    for line in open(os.path.join(d, "manifest.txt")):
        name, dtype, dims = line.split()
        shape = [int(x) for x in dims.split(",")] if dims != "-" and dims else []
        arr = np.fromfile(os.path.join(d, name + ".bin"), dtype=np.int32 if dtype == "i32" else np.float32)
        out[name] = torch.from_numpy(arr.reshape(shape).copy())
    return out


def write(d, tensors):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "manifest.txt"), "w") as m:
        for name, t in tensors.items():
            a = t.detach().contiguous().numpy().astype(np.float32)
            m.write(f"{name} f32 {','.join(str(s) for s in a.shape)}\n")
            a.tofile(os.path.join(d, name + ".bin"))


def mlp_loss(p, data, dims):
    h = data["x"]
    for i in range(1, len(dims)):
        h = h @ p[f"fc{i}.weight"] + p[f"fc{i}.bias"]   # cohort layout: W [in, out]
        if i < len(dims) - 1:
            h = torch.relu(h)
    return F.cross_entropy(h, data["y"].long())


class Block(torch.nn.Module):
    """gpt_torch.py's Block, verbatim in structure."""

    def __init__(s, d, h):
        super().__init__()
        s.h, s.ln1, s.ln2 = h, torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        s.qkv, s.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        s.fc1, s.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(s, x):
        B, T, D = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // s.h)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(s, d, L, h, T, V):
        super().__init__()
        s.tok, s.pos = torch.nn.Embedding(V, d), torch.nn.Parameter(torch.zeros(T, d))
        s.blocks = torch.nn.Sequential(*[Block(d, h) for _ in range(L)])
        s.ln, s.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, V, bias=False)

    def forward(s, idx):
        return s.head(s.ln(s.blocks(s.tok(idx) + s.pos[: idx.shape[1]])))


def gpt_mapping(model, L):
    """(cohort name, torch tensor, to_cohort, from_cohort) for every parameter."""
    t = lambda w: w.t()
    same = lambda w: w
    rows = [("tok.weight", model.tok.weight, same), ("pos", model.pos, same),
            ("ln.weight", model.ln.weight, same), ("ln.bias", model.ln.bias, same),
            ("head.weight", model.head.weight, t)]
    for i, b in enumerate(model.blocks):
        p = f"block{i}."
        rows += [(p + "ln1.weight", b.ln1.weight, same), (p + "ln1.bias", b.ln1.bias, same),
                 (p + "ln2.weight", b.ln2.weight, same), (p + "ln2.bias", b.ln2.bias, same),
                 (p + "attn.proj.weight", b.proj.weight, t), (p + "attn.proj.bias", b.proj.bias, same),
                 (p + "fc1.weight", b.fc1.weight, t), (p + "fc1.bias", b.fc1.bias, same),
                 (p + "fc2.weight", b.fc2.weight, t), (p + "fc2.bias", b.fc2.bias, same)]
    return rows


def qkv_parts(b, d):
    """cohort's separate q, k, v projections are the row blocks of torch's fused qkv."""
    return [(name, slice(j * d, (j + 1) * d)) for j, name in enumerate(("q", "k", "v"))]


def load_gpt(model, p, L, d):
    """cohort's parameters (by cohort name) into the torch model."""
    with torch.no_grad():
        for name, param, f in gpt_mapping(model, L):
            param.copy_(f(p[name]))
        for i, b in enumerate(model.blocks):
            for part, rows in qkv_parts(b, d):
                b.qkv.weight[rows] = p[f"block{i}.attn.{part}.weight"].t()
                b.qkv.bias[rows] = p[f"block{i}.attn.{part}.bias"]


def run_gpt(data, cfg):
    L, d, h, T = (int(cfg[k]) for k in ("layers", "d", "heads", "seq"))
    model = GPT(d, L, h, T, 256)
    load_gpt(model, data, L, d)
    logits = model(data["tokens"].long())
    loss = F.cross_entropy(logits.view(-1, 256), data["targets"].long().view(-1))
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}

    def export(prefix, get):
        for name, param, f in gpt_mapping(model, L):
            out[prefix + name] = f(get(param))
        for i, b in enumerate(model.blocks):
            for part, rows in qkv_parts(b, d):
                out[f"{prefix}block{i}.attn.{part}.weight"] = get(b.qkv.weight)[rows].t()
                out[f"{prefix}block{i}.attn.{part}.bias"] = get(b.qkv.bias)[rows]

    export("grad.", lambda p: p.grad)
    opt = torch.optim.AdamW(model.parameters(), lr=float(cfg["lr"]), betas=(0.9, 0.95), weight_decay=0.1)
    opt.step()
    export("next.", lambda p: p.detach())
    return out


def run_mlp(data, cfg):
    dims = [int(x) for x in cfg["dims"].split(",")]
    names = [n for n in data if n.startswith("fc")]
    p = {n: data[n].clone().requires_grad_(True) for n in names}
    loss = mlp_loss(p, data, dims)
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    for n in names:
        out["grad." + n] = p[n].grad
    opt = torch.optim.SGD(p.values(), lr=float(cfg["lr"]), momentum=0.9, weight_decay=0.01)
    opt.step()
    for n in names:
        out["next." + n] = p[n].detach()
    return out


def run_dlrm(data, cfg):
    """dlrm_s_pytorch.py's forward (dlrm_torch.py's structure) with torch.nn.functional.embedding_bag
    on (ids, offsets) bags made from cohort's padded [B, L] rows, and BCE on the logit."""
    tables = [t.split(":") for t in cfg["tables"].split(",")]       # input:mean(0|1)
    names = [n for n in data if n.startswith(("bot.", "top.", "emb."))]
    p = {n: data[n].clone().requires_grad_(True) for n in names}

    def mlp(h, prefix, relu_last):
        layers = sorted({n.split(".")[1] for n in p if n.startswith(prefix + ".")}, key=lambda s: int(s[2:]))
        for i, l in enumerate(layers):
            h = h @ p[f"{prefix}.{l}.weight"] + p[f"{prefix}.{l}.bias"]
            if relu_last or i < len(layers) - 1:
                h = torch.relu(h)
        return h

    x = mlp(data["dense"], "bot", True)
    B, d = x.shape
    ly = []
    for name, mean in tables:
        ids = data[name].long()
        keep = ids >= 0
        flat = ids[keep]
        counts = keep.sum(1)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        ly.append(F.embedding_bag(flat, p["emb." + name], offsets, mode="mean" if mean == "1" else "sum"))
    T = torch.cat([x] + ly, dim=1).view(B, -1, d)
    Z = torch.bmm(T, T.transpose(1, 2))
    li, lj = torch.tril_indices(T.shape[1], T.shape[1], offset=-1)
    logits = mlp(torch.cat([x, Z[:, li, lj]], dim=1), "top", False).squeeze(1)
    loss = F.binary_cross_entropy_with_logits(logits, data["label"])
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    for n in names:
        out["grad." + n] = p[n].grad
    if cfg.get("opt", "sgd") == "adagrad":
        opt = torch.optim.Adagrad(p.values(), lr=float(cfg["lr"]))
    else:
        opt = torch.optim.SGD(p.values(), lr=float(cfg["lr"]), momentum=0.9)
    opt.step()
    for n in names:
        out["next." + n] = p[n].detach()
    return out


def read_safetensors(path):
    import json, struct
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        arr = np.frombuffer(data[8 + n + b:8 + n + e], dtype=np.float32).reshape(t["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def greedy_check(path, heads, tokens, prompt_len):
    p = read_safetensors(path)
    V, d = p["tok.weight"].shape
    T = p["pos"].shape[0]
    L = sum(1 for n in p if n.endswith(".ln1.weight"))
    model = GPT(d, L, heads, T, V)
    load_gpt(model, p, L, d)
    with torch.no_grad():
        checked = disagree = 0
        worst = 0.0
        for i in range(prompt_len, len(tokens)):
            ctx = torch.tensor([tokens[max(0, i - T):i]], dtype=torch.long)
            logits = model(ctx)[0, -1]
            top = logits.max().item()
            gap = top - logits[tokens[i]].item()
            worst = max(worst, gap)
            checked += 1
            if gap > 1e-4 * logits.abs().max().item():
                disagree += 1
    print(json.dumps({"checked": checked, "disagree": disagree, "worst_gap": worst}))


def main():
    if sys.argv[1] == "greedy":
        return greedy_check(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5]))
    kind, d = sys.argv[1], sys.argv[2]
    data = read(d)
    cfg = dict(line.split("=", 1) for line in open(os.path.join(d, "config.txt")).read().split())
    out = {"mlp": run_mlp, "gpt": run_gpt, "dlrm": run_dlrm}[kind](data, cfg)
    write(os.path.join(d, "out"), out)


if __name__ == "__main__":
    main()
