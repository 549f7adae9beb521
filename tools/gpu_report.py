#!/usr/bin/env python3
"""Reads what the GPU tools print, for tools/gpu-check.sh; tested on the CPU
against saved outputs (tests/tools/test_gpu_report.sh).

  gpu_report.py sanitizer LOG [-- CMD...]
      Counts compute-sanitizer's errors in LOG, telling zrt's from API errors
      inside the libraries zrt only calls (Note [Whose sanitizer error]).
      Prints one line; exits 1 when any error is zrt's, 2 when LOG holds no
      ERROR SUMMARY (the sanitizer did not finish), else 0.
  gpu_report.py kernels --steps N [--title T] [--out FILE] LOG [-- CMD...]
      The device time per kernel name from ncu's output in LOG (ncu --metrics
      gpu__time_duration.sum --print-summary per-kernel, or the same with
      --csv, one row per launch or per kernel): total, then per name, most
      first, its share, ms per step over N steps, launches and average.
      Exits 2 when LOG holds no kernel times.

With `-- CMD...` CMD runs first, its output (stdout and stderr) going to LOG
and to this script's stdout; a CMD that fails makes the exit its exit code.

Note [Whose sanitizer error]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
compute-sanitizer reports every failed CUDA API call as an error, also the
calls libraries make on their own: NCCL probes each of its kernels with
cudaFuncGetAttributes and ignores cudaErrorNoKernelImageForDevice for those
not built for the device. Such an error is the library's, not zrt's. An
error is "library-internal" only when it is an API error ("Program hit ...
on CUDA API call to ...") whose failing call was made by a library zrt only
calls: the innermost host frame past the CUDA runtime, the driver and the C
libraries lies in libnccl, libcublas(Lt), libcudnn, libcufft, libcurand,
libcusparse or libcusolver. Everything else is zrt's: an API error made by
zrt's own code (or by a caller not named), and every kernel error (a memory
access, race or barrier error, in zrt's kernels or in a library kernel that
zrt fed). The sanitizer's own ERROR SUMMARY is the total, so an error this
script could not read counts as zrt's, never as none.
"""
import argparse
import csv
import io
import re
import signal
import subprocess
import sys
from collections import defaultdict

LIBRARIES = re.compile(r"lib(nccl|cublas|cublasLt|cudnn\w*|cufft|curand|cusparse|cusolver)\b")
PASS_THROUGH = re.compile(
    r"lib(cuda|cudart|c|stdc\+\+|gcc_s|pthread|dl|m)\b[.\w]*$|ld-linux|^\[?unknown")
PREFIX = re.compile(r"^=========( |$)")
SUMMARY = re.compile(r"^========= ERROR SUMMARY: (\d+) errors?")
API_ERROR = re.compile(r"^========= Program hit (\S+) .* on CUDA API call to (\S+?)\.?$")
RECORD = re.compile(r"^========= \S")  # a record's first line; its details are indented
FRAME = re.compile(r"^=========\s+Host Frame:\s*(.*)$")
IN_MODULE = re.compile(r"^=========\s+in (\S+)\s*$")  # a frame's module on a line of its own


def run(cmd, log):
    """Runs cmd with its output into `log` and onto stdout; its exit code."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # A timeout's TERM reaches the command too.
        signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            out.write(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        return proc.wait()


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError as e:
        sys.exit(f"gpu_report: cannot read {path}: {e.strerror}")


# --- sanitizer ---------------------------------------------------------------

def sanitizer_records(lines):
    """The error records: (first line, [(symbol, module) of each host frame])."""
    records = []
    for line in lines:
        if SUMMARY.match(line) or line.startswith("========= COMPUTE-SANITIZER"):
            continue
        if RECORD.match(line):
            if line.startswith("========= Warning"):  # racecheck's warnings are not errors
                records.append(None)
            else:
                records.append((line, []))
            continue
        if not records or records[-1] is None:
            continue
        frames = records[-1][1]
        frame = FRAME.match(line)
        if frame:
            text = frame.group(1)
            # "SYMBOL [0xADDR] in MODULE" (one line) or "SYMBOL [0xADDR]" then "in MODULE".
            head, sep, module = text.rpartition(" in ")
            if sep and "[0x" in head:
                frames.append([head, module.strip()])
            else:
                frames.append([text, ""])
            continue
        module = IN_MODULE.match(line)
        if module and frames and not frames[-1][1]:
            frames[-1][1] = module.group(1)
    return [r for r in records if r is not None]


def caller_library(frames):
    """The library that made a failing API call, or None for zrt or unknown."""
    for _symbol, module in frames:
        name = module.rsplit("/", 1)[-1]
        if not name:
            return None  # a caller not named: not known to be a library
        if PASS_THROUGH.search(name):
            continue
        return name if LIBRARIES.match(name) else None
    return None


def sanitizer(args):
    lines = read_lines(args.log)
    totals = [int(m.group(1)) for m in map(SUMMARY.match, lines) if m]
    if not totals:
        print(f"compute-sanitizer: no ERROR SUMMARY in {args.log}: the sanitizer did not finish")
        return 2
    total = sum(totals)  # one summary per process
    internal = defaultdict(int)
    for first, frames in sanitizer_records(lines):
        api = API_ERROR.match(first)
        library = api and caller_library(frames)
        if library:
            internal[f"{api.group(1)} from {api.group(2)} in {library}"] += 1
    inside = sum(internal.values())
    ours = max(total - inside, 0)
    detail = "; ".join(f"{n} {what}" for what, n in sorted(internal.items(), key=lambda kv: -kv[1]))
    print(f"compute-sanitizer: {ours} error(s) in zrt, {inside} library-internal"
          + (f" (API errors inside libraries zrt only calls: {detail})" if inside else ""))
    return 1 if ours else 0


# --- ncu kernel times ---------------------------------------------------------

UNITS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
         "s": 1e3, "second": 1e3}
# "  NAME (GRID)x(BLOCK), Context 1, Stream 7, Device 0, CC 9.0[, Invocations 24]"
DIMS = r"\([\d,]+, [\d,]+, [\d,]+\)"
KERNEL = re.compile(r"^\s+(.+?) " + DIMS + "x" + DIMS + r", Context \d+, Stream \d+"
                    r".*?(?:, Invocations (\d+))?\s*$")
METRIC = re.compile(r"^\s+gpu__time_duration\.sum\s+(\S+)\s+(.+?)\s*$")


def number(text):
    return float(text.replace(",", ""))


def kernel_times_text(lines):
    """(name, launches, total ms) per summary block of ncu's text output."""
    out, name, count = [], None, None
    for line in lines:
        k = KERNEL.match(line)
        if k:
            name, count = k.group(1), int(k.group(2)) if k.group(2) else None
            continue
        m = METRIC.match(line)
        if m and name is None:
            sys.exit(f"gpu_report: a kernel time under no kernel's heading: {line.strip()}")
        if m:
            unit, values = m.group(1), m.group(2).split()
            if unit not in UNITS:
                sys.exit(f"gpu_report: unknown time unit '{unit}' in: {line.strip()}")
            # One value per launch, or a summary's minimum, maximum and average,
            # whose header must say how many launches it averages.
            if len(values) > 1 and count is None:
                sys.exit(f"gpu_report: a summary of {name} without its number of invocations")
            count = count or 1
            out.append((name, count, number(values[-1]) * UNITS[unit] * count))
            name = None
    return out


def kernel_times_csv(text):
    rows = list(csv.DictReader(io.StringIO(text)))
    out = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "")
        if unit not in UNITS:
            sys.exit(f"gpu_report: unknown time unit '{unit}' for {r.get('Kernel Name')}")
        count = int(number(r.get("Invocations") or "1"))
        value = r.get("Metric Value") or r.get("Average")
        out.append((r["Kernel Name"], count, number(value) * UNITS[unit] * count))
    return out


def kernels(args):
    lines = read_lines(args.log)
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is not None:
        times = kernel_times_csv("\n".join(lines[start:]))
    else:
        times = kernel_times_text(lines)
    if not times:
        print(f"gpu_report: no gpu__time_duration.sum per kernel in {args.log}")
        return 2
    by_name = defaultdict(lambda: [0, 0.0])
    for name, count, ms in times:
        by_name[name][0] += count
        by_name[name][1] += ms
    total = sum(ms for _, ms in by_name.values())
    table = []
    if args.title:
        table.append(args.title)
    table.append(f"total kernel time {total:.1f} ms ({args.steps} steps), "
                 f"{total / args.steps:.1f} ms per step, {len(by_name)} kernels")
    for name, (count, ms) in sorted(by_name.items(), key=lambda kv: (-kv[1][1], kv[0])):
        table.append(f"{100 * ms / total:5.1f}%  {ms / args.steps:9.3f} ms/step  n={count:5d}  "
                     f"avg {1e3 * ms / count:10.1f} us  {name}")
    text = "\n".join(table) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def main():
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="gpu_report.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sanitizer")
    s.add_argument("log")
    k = sub.add_parser("kernels")
    k.add_argument("log")
    k.add_argument("--steps", type=int, required=True)
    k.add_argument("--title", default="")
    k.add_argument("--out", default="")
    args = parser.parse_args(argv)
    if args.what == "kernels" and args.steps < 1:
        parser.error("--steps must be positive")
    if cmd:
        rc = run(cmd, args.log)
        if rc != 0:
            print(f"gpu_report: {cmd[0]} exited with {rc}")
            # Its errors still count, and are said.
            (sanitizer if args.what == "sanitizer" else kernels)(args)
            return rc
    return (sanitizer if args.what == "sanitizer" else kernels)(args)


if __name__ == "__main__":
    sys.exit(main())
