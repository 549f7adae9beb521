"""Loss and parameter gradients of one batch in PyTorch (float64, CPU), the
reference of test_models_torch.

usage: torch_model_reference.py IN.safetensors OUT.safetensors --kind gpt|mlp
                                [--n-head N] [--activation gelu|relu]
IN holds `param/<fqn>` (every primary parameter), `batch/inputs`,
`batch/targets` and metadata `normaliser`; OUT gets `loss` [1] and
`grad/<fqn>`, float64.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
except ImportError as e:
    print(f"cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)
import safetensors_io
from torch_models import model_loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--kind", required=True, choices=["gpt", "mlp"])
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--activation", default="gelu", choices=["gelu", "relu"])
    a = ap.parse_args()
    t, meta = safetensors_io.read(a.inp)
    p = {k[len("param/"):]: v.to(torch.float64).requires_grad_(True) for k, v in t.items() if k.startswith("param/")}
    loss = model_loss(a.kind, p, t["batch/inputs"], t["batch/targets"], float(meta["normaliser"]),
                      a.n_head, a.activation)
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    out.update({"grad/" + k: v.grad for k, v in p.items()})
    safetensors_io.write(a.out, out)


if __name__ == "__main__":
    main()
