"""Trains zrt's GPT in eager PyTorch, for comparison with `zrt-bench train`.

The model is zrt's gpt.cpp written as a PyTorch module (nanoGPT style): token +
position embedding, pre-LayerNorm blocks (LayerNorm eps 1e-5, fused qkv with
bias, causal scaled-dot-product attention, GELU tanh MLP of width 4C, biases
everywhere), a final LayerNorm and an LM head tied to the token embedding.
Weights come from a safetensors file zrt wrote (`zrt-bench train --save-init`,
Hugging Face GPT-2 names, Conv1D [in, out] matrices transposed into
nn.Linear), tokens from `--save-data`; step s takes zrt's global batch (Note
[Data order]: sequence j starts at token ((s·B + j)·T) mod (len − T)), rank
r of R its slice [r·B/R, (r+1)·B/R). The optimisation is zrt-bench train's:
AdamW (lr 3e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on ≥2-D
parameters), gradients clipped to norm 1.0, linear warm-up of 5 steps then
cosine decay to 3e-4 at the last step. On the CPU by default; --ranks R > 1
spawns R processes whose blocks and root are sharded with FSDP2 `fully_shard`
over gloo. --device cuda trains on one GPU (cuda:0; one rank), each timed step
between torch.cuda.synchronize() calls, and reports the CUDA caching
allocator's peak (torch.cuda.max_memory_allocated / max_memory_reserved).
--dtype bf16 keeps fp32 weights and optimizer state and computes under
torch.autocast in bf16 (zrt's bf16: 16-bit compute, fp32 master state).

    torch_gpt.py --init W.safetensors --data D.safetensors --n-head H --batch-size B
                 --seq-len T [--device cpu|cuda] [--dtype fp32|bf16] [--ranks R] [--threads N]
                 [--warmup K] [--steps N] [--json]
    torch_gpt.py --compare [zrt-bench train flags] [--device cpu|cuda] [--dtype fp32|bf16] [--rounds 2]
                 [--mpirun] [--zrt-bench PATH] [--json-out FILE]

--compare runs zrt-bench train (which writes the weights and tokens), then
this trainer on them, alternately for --rounds rounds, and prints both side by
side: each side's best median step time over the rounds, tokens/s, model
GFLOP/s and its fraction of the fp32 peak zrt-bench measured (same formula,
same threads; on cuda the datasheet peak zrt-bench took for the GPU and
dtype), memory, the zrt/PyTorch ratios of tokens/s and of peak allocated
memory, and the first-step losses, which must agree (to 1e-3 relative in fp32,
3e-2 in bf16). --json-out also writes that summary as JSON to FILE.

Needs PyTorch 2.x: without it the script prints a skip message and exits 0
(77 with --device cuda). --device cuda with a PyTorch 2.x that has no CUDA
(or sees no GPU) exits 77, saying so.
"""
import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# gpu-bundle.sh carries this script with safetensors_io.py beside it; in the
# repository the reader lives with the reference tests.
SAFETENSORS_IO_DIRS = [HERE, os.path.join(REPO, "tests", "model_zoo", "models")]
EXIT_SKIP = 77  # --device cuda without CUDA: the test harnesses' "skipped"


def torch_or_skip():
    """torch when it is 2.x or newer, else None after printing why."""
    try:
        import torch
    except ImportError as e:
        print(f"torch_gpt.py: skipped: PyTorch 2.x is not installed ({e})")
        return None
    if int(torch.__version__.split(".")[0]) < 2:
        print(f"torch_gpt.py: skipped: needs PyTorch 2.x, found {torch.__version__} ({sys.executable})")
        return None
    return torch


# ---------------------------------------------------------------------------
# The PyTorch side

# zrt's schedule and AdamW, as zrt-bench train runs them (zrt-train's defaults).
LR, MIN_LR, LR_WARMUP, BETAS, EPS, WEIGHT_DECAY, CLIP = 3e-3, 3e-4, 5, (0.9, 0.95), 1e-8, 0.1, 1.0


def lr_at(step, total):
    """zrt's WarmupCosineLr (zrt/optim/lr_schedule.h)."""
    warmup = min(LR_WARMUP, total)
    if step < warmup:
        return LR * (step + 1) / warmup
    if step >= total:
        return MIN_LR
    progress = (step - warmup) / (total - warmup)
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * progress)) * (LR - MIN_LR)


def build_model(torch, weights, n_head):
    nn, F = torch.nn, torch.nn.functional
    V, C = weights["wte.weight"].shape
    P = weights["wpe.weight"].shape[0]
    n_layer = len({k.split(".")[1] for k in weights if k.startswith("h.")})

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = (z.view(B, T, n_head, C // n_head).transpose(1, 2) for z in self.c_attn(x).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C, eps=1e-5), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(C, eps=1e-5), Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1))

    model = Gpt()
    linear = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
    state = {k: (v.t() if k.endswith(linear) else v).contiguous() for k, v in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)
    return model


def peak_rss_bytes():
    """VmHWM: unlike ru_maxrss, it starts afresh at exec (a spawned rank does not inherit its parent's peak)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def train(rank, a, result_path):
    """One rank's run; rank 0 writes the result (JSON) to result_path."""
    torch = torch_or_skip()
    torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    device = torch.device("cuda:0" if cuda else "cpu")
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dist = torch.distributed
    world = a.ranks
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    sys.path[:0] = SAFETENSORS_IO_DIRS
    import safetensors_io  # the reference tests' reader: json + struct + torch.frombuffer

    rss_base = resident_bytes()  # the interpreter and torch's libraries
    weights, _ = safetensors_io.read(a.init)
    weights = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in weights.items()
               if k != "lm_head.weight"}
    tokens = safetensors_io.read(a.data)[0]["tokens"].to(device=device, dtype=torch.int64)
    model = build_model(torch, {k: v.float() for k, v in weights.items()}, a.n_head).to(device)
    del weights  # copied into the model
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for block in model.h:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, fused=True)
    B, T, total = a.batch_size, a.seq_len, a.warmup + a.steps
    span = tokens.numel() - T
    b = B // world
    offsets = torch.arange(T, device=device)
    times, losses = [], []
    for s in range(total):
        sync()
        t0 = time.perf_counter()
        starts = torch.tensor([((s * B + j) * T) % span for j in range(rank * b, (rank + 1) * b)], device=device)
        x = tokens[starts[:, None] + offsets]
        y = tokens[starts[:, None] + offsets + 1]
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(s, total)
        opt.step()
        loss = loss.detach()
        if world > 1:  # the global-batch mean: every rank's slice is the same size
            dist.all_reduce(loss)
            loss /= world
        losses.append(loss.item())
        sync()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    stats = torch.tensor(times + [float(peak_rss_bytes()), float(rss_base)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)  # the slowest rank per step, the largest memory
        dist.destroy_process_group()
    if rank == 0:
        step_s = sorted(stats[:a.steps].tolist())
        median = step_s[len(step_s) // 2]
        result = {"ranks": world, "threads": a.threads, "batch_size": B, "seq_len": T, "warmup": a.warmup,
                  "steps": a.steps, "step_ms": median * 1e3, "step_ms_min": step_s[0] * 1e3,
                  "step_ms_max": step_s[-1] * 1e3, "tokens_per_s": B * T / median, "loss_first": losses[0],
                  "loss_last": losses[-1], "rss_peak_MiB": stats[a.steps].item() / 2**20,
                  "rss_base_MiB": stats[a.steps + 1].item() / 2**20, "torch": torch.__version__,
                  "device": a.device, "dtype": a.dtype,
                  "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
                  "alloc_peak_MiB": torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
                  "reserved_peak_MiB": torch.cuda.max_memory_reserved(device) / 2**20 if cuda else None}
        with open(result_path, "w") as f:
            json.dump(result, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(a):
    """Trains with `a` (--ranks processes) and returns rank 0's result."""
    torch = torch_or_skip()
    with tempfile.TemporaryDirectory(prefix="torch-gpt-") as tmp:
        path = os.path.join(tmp, "result.json")
        if a.ranks > 1:
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(free_port())
            torch.multiprocessing.spawn(train, args=(a, path), nprocs=a.ranks)
        else:
            train(0, a, path)
        with open(path) as f:
            return json.load(f)


# ---------------------------------------------------------------------------
# --compare: zrt-bench train and this trainer, alternately

ZRT_FLAGS = ("device", "dtype", "preset", "n_layer", "n_head", "n_embd", "vocab_size", "batch_size", "seq_len",
             "ranks", "threads", "warmup", "steps", "peak_tflops")


def run_json(cmd, env=None):
    """The last line of cmd's output, as JSON; exits naming cmd when it fails."""
    if not shutil.which(cmd[0]):
        sys.exit(f"torch_gpt.py: {cmd[0]} not found (--zrt-bench names zrt-bench)")
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"torch_gpt.py: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_zrt(a, init, data, save):
    """zrt-bench train's JSON; with `save` it first writes the weights and tokens."""
    cmd = [a.zrt_bench, "train", "--json"] + (["--save-init", init, "--save-data", data] if save else [])
    for name in ZRT_FLAGS:
        value = getattr(a, name)
        if value is not None and not (a.mpirun and name == "ranks"):
            cmd += ["--" + name.replace("_", "-"), str(value)]
    env = dict(os.environ)
    if a.mpirun:
        cmd = ["mpirun", "--oversubscribe", "-np", str(a.ranks)] + cmd
        if os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return run_json(cmd, env)


def torch_env():
    """The environment of the PyTorch runs: OpenMP's idle threads sleep
    (OMP_WAIT_POLICY=PASSIVE, unless set) as zrt's kernel workers do. With its
    default spinning, a torch thread that waits while the one it waits for is
    descheduled burns the core that one needs: on a shared machine, steps many
    times slower."""
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_torch_process(init, data, z, ranks):
    """This script on zrt's run `z` in a process of its own, so no round inherits
    another's threads, heap or peak memory."""
    args = {"init": init, "data": data, "n-head": z["n_head"], "ranks": ranks, "threads": z["threads"],
            "device": z["device"], "dtype": z["dtype"],
            "batch-size": z["batch_size"], "seq-len": z["seq_len"], "warmup": z["warmup"], "steps": z["steps"]}
    return run_json([sys.executable, os.path.abspath(__file__), "--json"]
                    + [x for k, v in args.items() for x in ("--" + k, str(v))], torch_env())


def compare(a):
    if a.ranks is None:
        a.ranks = 1
    tmp = tempfile.mkdtemp(prefix="torch-gpt-compare-")
    try:
        init, data = os.path.join(tmp, "init.safetensors"), os.path.join(tmp, "data.safetensors")
        zrt_runs, torch_runs = [], []
        for i in range(a.rounds):
            zrt_runs.append(run_zrt(a, init, data, save=i == 0))
            torch_runs.append(run_torch_process(init, data, zrt_runs[0], a.ranks))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, zrt_runs, torch_runs)


def markdown_row(summary, mpirun):
    """The case as a row of README.md's "CPU training speed vs PyTorch" table."""
    z, t = summary["rows"]
    ranks = summary["ranks"]
    case = f"`{summary['preset']}`, {summary['batch_size']} × {summary['seq_len']}"
    if ranks > 1:
        case += f", zrt `mpirun -np {ranks}`" if mpirun else f", zrt `--ranks {ranks}`"
    step = lambda ms: f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1e3:.2f} s"
    flops = lambda r: f"{r['gflops']:.1f} ({100 * r['frac_peak']:.0f}%)"
    if ranks == 1:
        zmem, tmem = f"{z['alloc_peak_MiB']:.0f} / {z['rss_peak_MiB']:.0f} MiB", f"{t['rss_peak_MiB']:.0f} MiB"
    elif mpirun:
        zmem = f"{z['alloc_peak_MiB']:.0f} / {z['rss_peak_MiB']:.0f} MiB per process"
        tmem = f"{t['rss_peak_MiB']:.0f} MiB per process"
    else:
        zmem = f"{z['alloc_peak_MiB']:.0f} per rank / {z['rss_peak_MiB']:.0f} MiB (one process)"
        tmem = f"{t['rss_peak_MiB']:.0f} MiB per process"
    cells = [case, f"{ranks} × {summary['threads']}", step(z["step_ms"]), step(t["step_ms"]),
             f"{summary['ratio']:.2f}", flops(z), flops(t), zmem, tmem]
    return "| " + " | ".join(cells) + " |"


def report(a, zrt_runs, torch_runs):
    zrt = min(zrt_runs, key=lambda r: r["step_ms"])
    tch = min(torch_runs, key=lambda r: r["step_ms"])
    z0 = zrt_runs[0]
    cuda = z0["device"] == "cuda"
    flop = z0["gflop_per_step"]
    peak = max(r["peak_gflops"] for r in zrt_runs)  # 0: zrt-bench knows no peak for this GPU
    tolerance = 3e-2 if z0["dtype"] != "fp32" else 1e-3  # 16-bit compute rounds each side its own way
    ok = abs(z0["loss_first"] - torch_runs[0]["loss_first"]) <= tolerance * max(1.0, abs(z0["loss_first"]))
    rows = []
    for name, r in (("zrt", zrt), ("torch", tch)):
        gflops = flop / (r["step_ms"] / 1e3)
        # Peak allocated memory: zrt's step peak (its caching allocator, on the
        # device on cuda), PyTorch's max_memory_allocated on cuda (none on cpu).
        alloc = r["step_peak_MiB"] if name == "zrt" else r.get("alloc_peak_MiB")
        reserved = r["alloc_peak_MiB"] if name == "zrt" else r.get("reserved_peak_MiB")
        rows.append({"impl": name, "step_ms": r["step_ms"], "step_ms_min": r["step_ms_min"],
                     "step_ms_max": r["step_ms_max"], "tokens_per_s": r["tokens_per_s"], "gflops": gflops,
                     "frac_peak": gflops / peak if peak > 0 else None,
                     "alloc_peak_MiB": r["alloc_peak_MiB"] if name == "zrt" and not cuda else alloc,
                     "reserved_peak_MiB": reserved if cuda else None,
                     "rss_peak_MiB": r["rss_peak_MiB"], "rss_base_MiB": r["rss_base_MiB"],
                     "loss_first": r["loss_first"], "loss_last": r["loss_last"]})
    summary = {"device": z0["device"], "device_name": z0["device_name"], "dtype": z0["dtype"],
               "peak_source": z0["peak_source"], "torch_device_name": tch["device_name"],
               "preset": z0["preset"], "params": z0["params"], "batch_size": z0["batch_size"],
               "seq_len": z0["seq_len"], "ranks": z0["ranks"], "threads": z0["threads"], "steps": z0["steps"],
               "warmup": z0["warmup"], "rounds": a.rounds, "peak_gflops": peak, "torch": tch["torch"],
               "omp_wait_policy": torch_env()["OMP_WAIT_POLICY"],
               "ratio": zrt["step_ms"] / tch["step_ms"], "tokens_per_s_ratio": zrt["tokens_per_s"] / tch["tokens_per_s"],
               "alloc_peak_ratio": rows[0]["alloc_peak_MiB"] / rows[1]["alloc_peak_MiB"] if cuda else None,
               "losses_match": ok, "loss_tolerance": tolerance,
               "zrt_step_ms_rounds": [r["step_ms"] for r in zrt_runs],
               "torch_step_ms_rounds": [r["step_ms"] for r in torch_runs], "rows": rows}
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(summary, f, indent=1)
    if a.json:
        print(json.dumps(summary))
    elif a.markdown:
        print(markdown_row(summary, a.mpirun))
    else:
        where = f"cuda ({z0['device_name']})" if cuda else f"{z0['ranks']} rank(s) x {z0['threads']} thread(s)"
        print(f"gpt/{z0['preset']} ({z0['params']} parameters), batch {z0['batch_size']} x {z0['seq_len']}, "
              f"{z0['dtype']}, {where}, {z0['steps']} timed steps after {z0['warmup']}, "
              f"best of {a.rounds} rounds (zrt, torch alternately); torch {tch['torch']}, "
              f"OMP_WAIT_POLICY={summary['omp_wait_policy']}")
        print(f"{'':6} {'step ms':>9} {'min':>9} {'max':>9} {'tokens/s':>10} {'GFLOP/s':>8} {'% peak':>7} "
              f"{'alloc MiB':>10} {'RSS MiB':>8} {'RSS0 MiB':>9} {'loss[0]':>8} {'loss[-1]':>9}")
        for r in rows:
            alloc = f"{r['alloc_peak_MiB']:10.1f}" if r["alloc_peak_MiB"] is not None else f"{'-':>10}"
            frac = f"{100 * r['frac_peak']:6.1f}%" if r["frac_peak"] is not None else f"{'-':>7}"
            print(f"{r['impl']:6} {r['step_ms']:9.1f} {r['step_ms_min']:9.1f} {r['step_ms_max']:9.1f} "
                  f"{r['tokens_per_s']:10.0f} {r['gflops']:8.2f} {frac} {alloc} "
                  f"{r['rss_peak_MiB']:8.1f} {r['rss_base_MiB']:9.1f} {r['loss_first']:8.4f} {r['loss_last']:9.4f}")
        print(f"zrt/torch step time: {summary['ratio']:.2f}  (rounds: zrt "
              + ", ".join(f"{x:.1f}" for x in summary["zrt_step_ms_rounds"]) + " ms; torch "
              + ", ".join(f"{x:.1f}" for x in summary["torch_step_ms_rounds"]) + f" ms); peak {peak:.1f} GFLOP/s "
              f"({z0['peak_source']})")
        print(f"zrt/torch tokens/s: {summary['tokens_per_s_ratio']:.2f}"
              + (f"; peak allocated: zrt {rows[0]['alloc_peak_MiB']:.1f} MiB, torch {rows[1]['alloc_peak_MiB']:.1f} "
                 f"MiB ({summary['alloc_peak_ratio']:.2f}); peak reserved: zrt {rows[0]['reserved_peak_MiB']:.1f} "
                 f"MiB, torch {rows[1]['reserved_peak_MiB']:.1f} MiB" if cuda else ""))
        print(f"first-step loss: zrt {z0['loss_first']:.6f}, torch {torch_runs[0]['loss_first']:.6f}: "
              + ("match" if ok else "MISMATCH"))
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", action="store_true", help="run zrt-bench train and this trainer alternately")
    ap.add_argument("--init", help="initial weights (zrt-bench train --save-init)")
    ap.add_argument("--data", help="tokens (zrt-bench train --save-data)")
    ap.add_argument("--n-head", type=int, help="attention heads")
    ap.add_argument("--batch-size", type=int, help="global sequences per step")
    ap.add_argument("--seq-len", type=int, help="tokens per sequence")
    ap.add_argument("--ranks", type=int, help="processes (FSDP2 over gloo when more than 1); default 1")
    ap.add_argument("--threads", type=int, help="CPU threads per process (torch.set_num_threads)")
    ap.add_argument("--warmup", type=int, help="untimed steps first")
    ap.add_argument("--steps", type=int, help="timed steps")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train (cuda: one GPU)")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                    help="compute dtype (bf16: autocast over fp32 weights)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--markdown", action="store_true", help="--compare: print a row of README.md's table")
    cmp = ap.add_argument_group("--compare")
    cmp.add_argument("--zrt-bench", default=os.path.join(REPO, "build", "tools", "bench", "zrt-bench"))
    cmp.add_argument("--rounds", type=int, default=2, help="zrt, torch pairs")
    cmp.add_argument("--mpirun", action="store_true", help="zrt ranks as mpirun processes, not local threads")
    cmp.add_argument("--preset")
    cmp.add_argument("--n-layer", type=int)
    cmp.add_argument("--n-embd", type=int)
    cmp.add_argument("--vocab-size", type=int)
    cmp.add_argument("--peak-tflops", type=float, help="zrt-bench train's peak (instead of its measured/datasheet one)")
    cmp.add_argument("--json-out", help="also write the summary as JSON to this file")
    a = ap.parse_args()
    torch = torch_or_skip()
    if torch is None:
        return EXIT_SKIP if a.device == "cuda" else 0  # a cuda check reports a skip, not a pass
    if a.device == "cuda":
        if not torch.cuda.is_available():
            why = "was built without CUDA" if torch.version.cuda is None else "sees no GPU"
            print(f"torch_gpt.py: skipped: --device cuda, but torch {torch.__version__} ({sys.executable}) {why}")
            return EXIT_SKIP
        if (a.ranks or 1) > 1:
            ap.error("--device cuda trains on one GPU: --ranks must be 1")
    if a.compare:
        compare(a)
        return 0
    missing = [f for f in ("init", "data", "n_head", "batch_size", "seq_len") if getattr(a, f) is None]
    if missing:
        ap.error("needs " + ", ".join("--" + f.replace("_", "-") for f in missing) + " (or --compare)")
    a.ranks = a.ranks or 1
    a.warmup = 2 if a.warmup is None else a.warmup
    a.steps = a.steps or 5
    a.threads = a.threads or os.cpu_count()
    if a.batch_size % a.ranks:
        ap.error(f"--batch-size {a.batch_size} is not divisible by --ranks {a.ranks}")
    r = run_torch(a)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"torch_gpt.py: {r['ranks']} rank(s) x {r['threads']} thread(s), batch {r['batch_size']} x "
              f"{r['seq_len']}: step median {r['step_ms']:.1f} ms (min {r['step_ms_min']:.1f}, max "
              f"{r['step_ms_max']:.1f}), {r['tokens_per_s']:.0f} tokens/s, peak RSS {r['rss_peak_MiB']:.1f} MiB, "
              f"loss {r['loss_first']:.4f} first, {r['loss_last']:.4f} last")
    return 0


if __name__ == "__main__":
    sys.exit(main())
