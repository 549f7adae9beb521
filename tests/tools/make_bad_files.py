"""Writes the malformed input files of test_zrt_train_errors.sh into DIR:
llm.c token files and safetensors files, each broken in one named way."""
import json
import math
import struct
import sys

out = sys.argv[1]


def llmc(name, magic=20240520, version=1, count=None, tokens=(1, 2, 3, 4) * 64, extra=b""):
    header = [0] * 256
    header[0], header[1], header[2] = magic, version, len(tokens) if count is None else count
    with open(f"{out}/{name}", "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens) + extra)


llmc("magic.bin", magic=1234)
llmc("version.bin", version=7)
llmc("count.bin", count=1000)
llmc("vocab.bin", tokens=(1, 2, 3, 999) * 64)  # tiny GPT has 256 tokens


def safetensors(name, header, data, length=None):
    text = json.dumps(header).encode() if isinstance(header, dict) else header
    with open(f"{out}/{name}", "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length) + text + data)


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


entry = lambda dtype, shape, b, e: {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
safetensors("overlap.safetensors", {"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, f32([1, 2, 3]))
safetensors("hole.safetensors", {"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 12, 16)}, f32([1, 2, 3, 4]))
safetensors("truncated.safetensors", {"a": entry("F32", [4], 0, 16)}, f32([1, 2]))
safetensors("huge-header.safetensors", {"a": entry("F32", [1], 0, 4)}, f32([1]), length=1 << 40)
safetensors("bad-json.safetensors", b'{"a": {"dtype": "F32", ', f32([1]))
safetensors("bad-dtype.safetensors", {"a": entry("F7", [1], 0, 4)}, f32([1]))
# One tensor named twice: JSON keeps the last, which would lose one silently.
safetensors("duplicate-key.safetensors",
            b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', f32([1, 2]))
