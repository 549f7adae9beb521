#!/usr/bin/env python3
"""Checks zrt's folder layout and include graph (docs/design.md, section 2).

- The libraries are ordered runtime < kernels < optim < model_zoo: a file of a
  library includes only its own library and the ones below it.
- Inside a library the sub-folders are ordered too (LAYERS below): a file
  includes only its own folder and folders of a lower layer; folders of one
  layer do not include each other.
- zrt code is included as "zrt/LIBRARY/...", never relatively, and library
  code never includes tests/ or tools/.

Prints each violation as FILE:LINE: message and exits 1 if there is any.
usage: tools/check_layout.py [SOURCE_ROOT]
"""
import pathlib
import re
import sys

LIBRARIES = ["runtime", "kernels", "optim", "model_zoo"]

# Per library, its folders from the bottom layer up ("" is the library's top
# folder). A folder may include its own files and any folder of a lower layer.
LAYERS = {
    "runtime": [[""], ["memory", "io"], ["comm"]],
    "kernels": [[""], ["math", "ops"], ["cpu_isa"], ["cpu_blas"], ["nn"]],
    "optim": [["flat_param"], [""], ["checkpoint"]],
    "model_zoo": [["layers"], ["models"], ["io"], ["data", "engine"], ["trainer"]],
}

SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^">]+)[">]')


def layer_of(library, folder):
    for i, layer in enumerate(LAYERS[library]):
        if folder in layer:
            return i
    return None


def check(root):
    errors = []
    for library in LIBRARIES:
        for path in sorted((root / library).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            rel = path.relative_to(root)
            folder = rel.parent.relative_to(library).as_posix()
            folder = "" if folder == "." else folder
            own_layer = layer_of(library, folder)
            if own_layer is None:
                errors.append(f"{rel}: folder {library}/{folder} has no place in LAYERS "
                              "(tools/check_layout.py, docs/design.md section 2)")
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = m.group(2)
                where = f"{rel}:{number}"
                if name.startswith(("tests/", "tools/")):
                    errors.append(f"{where}: library code includes {name}")
                    continue
                if (path.parent / name).exists() and m.group(1) == '"':
                    errors.append(f"{where}: relative include \"{name}\"; spell it zrt/{library}/...")
                    continue
                if not name.startswith("zrt/"):
                    continue
                parts = pathlib.PurePosixPath(name).parts
                target = parts[1]
                if target not in LIBRARIES:
                    errors.append(f"{where}: {name} names no zrt library")
                    continue
                if LIBRARIES.index(target) > LIBRARIES.index(library):
                    errors.append(f"{where}: {library} includes {name}, from {target} above it")
                    continue
                if target != library:
                    continue
                target_folder = "/".join(parts[2:-1])
                if target_folder == folder:
                    continue
                target_layer = layer_of(library, target_folder)
                if target_layer is None or target_layer >= own_layer:
                    errors.append(f"{where}: {library}/{folder or '.'} includes {name}, "
                                  f"from {library}/{target_folder or '.'}, which is not below it")
    return errors


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layout: {len(errors)} include(s) against the layout in docs/design.md, section 2")
        return 1
    print("check_layout: the include graph follows the layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
