"""Edits the index.json of a zrt checkpoint step the way a careful tool would:
the edit, then index.json.xxh64 and the root's `latest` rewritten to match
(Note [Checkpoint format]), so only validation can refuse the lie; with
`stale`, index.json alone. `check` edits nothing and exits 1 unless both
checksums equal this file's own xxHash64 of index.json.
usage: ckpt_index_edit.py STEP_DIR shift-offset|swap-zero1-ranks|step|check [stale]
"""
import json
import pathlib
import sys

MASK = (1 << 64) - 1
P1, P2, P3, P4, P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                      9650029242287828579, 2870177450012600261)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & MASK


def round_(acc, lane):
    return (rotl((acc + lane * P2) & MASK, 31) * P1) & MASK


def xxh64(data, seed=0):
    """XXH64 as the reference implementation computes it (no xxhash module needed)."""
    n, i = len(data), 0
    lane = lambda at, width: int.from_bytes(data[at:at + width], "little")
    if n >= 32:
        v = [(seed + P1 + P2) & MASK, (seed + P2) & MASK, seed, (seed - P1) & MASK]
        while i + 32 <= n:
            v = [round_(v[k], lane(i + 8 * k, 8)) for k in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & MASK
        for x in v:
            h = ((h ^ round_(0, x)) * P1 + P4) & MASK
    else:
        h = (seed + P5) & MASK
    h = (h + n) & MASK
    while i + 8 <= n:
        h = (rotl(h ^ round_(0, lane(i, 8)), 27) * P1 + P4) & MASK
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ ((lane(i, 4) * P1) & MASK), 23) * P2 + P3) & MASK
        i += 4
    while i < n:
        h = (rotl(h ^ ((data[i] * P5) & MASK), 11) * P1) & MASK
        i += 1
    h = ((h ^ (h >> 33)) * P2) & MASK
    h = ((h ^ (h >> 29)) * P3) & MASK
    return h ^ (h >> 32)


assert xxh64(b"") == 0xEF46DB3751D8E999, "xxh64 self-check"

step, edit = pathlib.Path(sys.argv[1]), sys.argv[2]
stale = len(sys.argv) > 3 and sys.argv[3] == "stale"
index_file, sum_file, latest = step / "index.json", step / "index.json.xxh64", step.parent / "latest"
names_step = latest.exists() and latest.read_text().split("\n")[0] == step.name

if edit == "check":
    want = f"{xxh64(index_file.read_bytes()):016x}"
    got = [sum_file.read_text()]
    if names_step:
        got.append(latest.read_text())
    expected = [f"{want}  index.json\n", f"{step.name}\nindex-xxh64 {want}\n"][:len(got)]
    if got != expected:
        sys.exit(f"checksums {got!r} are not {expected!r}")
    sys.exit(0)

index = json.loads(index_file.read_text())
if edit == "shift-offset":
    index["layout"]["handles"][1]["params"][1]["offset"] += 1
elif edit == "swap-zero1-ranks":
    ranks = index["ranks"]
    ranks[0]["zero1_rank"], ranks[1]["zero1_rank"] = ranks[1]["zero1_rank"], ranks[0]["zero1_rank"]
elif edit == "step":
    index["step"] += 1
else:
    sys.exit(f"unknown edit {edit}")
text = (json.dumps(index, indent=1) + "\n").encode()
index_file.write_bytes(text)
if not stale:
    checksum = f"{xxh64(text):016x}"
    sum_file.write_text(f"{checksum}  index.json\n")
    if names_step:
        latest.write_text(f"{step.name}\nindex-xxh64 {checksum}\n")
