#!/usr/bin/env python3
"""The README's code blocks marked as excerpts are the examples' real code.

A block preceded by the line `<!-- excerpt: PATH -->` (PATH relative to the
repository) must appear in PATH: its lines, split into chunks at lines that
are just `// ...`, each chunk as consecutive lines of PATH, the chunks in
order (leading and trailing blanks of every line are ignored). The examples
are compiled and run by test_install_consumer, so a README snippet that no
longer compiles or runs fails the suite.

usage: readme_excerpts.py REPO_ROOT     (exit 1 naming the first block that differs)
"""
import re
import sys
from pathlib import Path

MARK = re.compile(r"^<!-- excerpt: (\S+) -->$")
# Each example has at least one excerpt: a README that lost its marks fails.
EXPECTED = {"examples/regression/main.cpp", "examples/layers/main.cpp"}


def blocks(readme):
    lines = readme.read_text().splitlines()
    for i, line in enumerate(lines):
        m = MARK.match(line.strip())
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            yield m.group(1), i + 1, None
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        yield m.group(1), i + 1, lines[i + 2:end] if end else None


def chunks(block):
    out = [[]]
    for line in block:
        if line.strip() == "// ...":
            out.append([])
        else:
            out[-1].append(line.strip())
    return [c for c in out if c]


def find(chunk, text, start):
    """Index after the first occurrence of `chunk` in `text` at or after `start`; -1: none."""
    for i in range(start, len(text) - len(chunk) + 1):
        if text[i:i + len(chunk)] == chunk:
            return i + len(chunk)
    return -1


def main(root):
    root = Path(root)
    readme = root / "README.md"
    seen = set()
    for path, line_no, block in blocks(readme):
        where = f"README.md:{line_no}"
        if block is None:
            print(f"{where}: the excerpt mark is not followed by a closed ``` block", file=sys.stderr)
            return 1
        source = root / path
        if not source.is_file():
            print(f"{where}: excerpt of {path}, which does not exist", file=sys.stderr)
            return 1
        text = [line.strip() for line in source.read_text().splitlines()]
        at = 0
        for chunk in chunks(block):
            at = find(chunk, text, at)
            if at < 0:
                print(f"{where}: these lines are not (in this order) in {path}:\n  "
                      + "\n  ".join(chunk), file=sys.stderr)
                return 1
        seen.add(path)
    missing = EXPECTED - seen
    if missing:
        print(f"README.md has no excerpt of {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    print(f"README.md: the excerpts of {len(seen)} file(s) are faithful")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
