"""Minimal safetensors reader/writer for the reference scripts (json +
struct + torch.frombuffer), so no `safetensors` package is needed."""
import json
import struct

import torch

_DTYPES = {
    "F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
    "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def read(path):
    """Returns (tensors: dict name -> tensor, metadata: dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dtype = _DTYPES[e["dtype"]]
        if end > b:
            t = torch.frombuffer(bytearray(data[b:end]), dtype=dtype).reshape(e["shape"]).clone()
        else:
            t = torch.zeros(e["shape"], dtype=dtype)
        out[name] = t
    return out, meta


def write(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        b = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
