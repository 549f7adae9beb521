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
# A dtype of the format that zrt has no tensor type for.
safetensors("i16.safetensors", {"a": entry("I16", [2], 0, 4)}, f32([1]))
# One tensor named twice: JSON keeps the last, which would lose one silently.
safetensors("duplicate-key.safetensors",
            b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', f32([1, 2]))
# MLP rows for the tiny preset (x f32 [3, 16], y i64 [3]), one feature not finite.
def rows(name, bad_index, bad_value):
    x = [0.25 * (i % 7) - 0.5 for i in range(48)]
    x[bad_index] = bad_value
    y = struct.pack("<3q", 0, 1, 0)
    safetensors(name, {"x": entry("F32", [3, 16], 0, 192), "y": entry("I64", [3], 192, 216)}, f32(x) + y)


rows("nan-rows.safetensors", 16 + 5, math.nan)
rows("inf-rows.safetensors", 32 + 15, -math.inf)
rows("rows-without-extension", 0, 0.5)  # all finite: rows a gpt cannot train on
