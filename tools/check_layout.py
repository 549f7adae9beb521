#!/usr/bin/env python3
"""Checks zrt's folder layout and include graph (docs/design.md, section 2).

- The libraries are ordered runtime < kernels < optim < model_zoo: a file of a
  library includes only its own library and the ones below it.
- Inside a library the sub-folders are ordered too (LAYERS below): a file
  includes only its own folder and folders of a lower layer; folders of one
  layer do not include each other.
- zrt code is included as "zrt/LIBRARY/...", never relatively, and library
  code never includes tests/ or tools/.
- The installed headers (every *.h of a library but the *_impl.h bodies)
  leave Eigen and CUDA to zrt's own sources: none includes <Eigen/...>,
  directly or through the zrt headers it includes (Eigen is a private
  dependency of zrt_kernels); none includes CUDA's, cuBLAS's or NCCL's
  headers outside a CUDA section (#ifdef ZRT_WITH_CUDA, __CUDACC__, ...),
  directly or through the zrt headers it includes outside one; and none
  includes a file that is not installed (.cuh, *_impl.h) outside one.

Prints each violation as FILE:LINE: message and exits 1 if there is any.
usage: tools/check_layout.py [SOURCE_ROOT]
       tools/check_layout.py --self-test   (the header rules reject bad includes)
"""
import pathlib
import re
import sys
import tempfile

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


# --- installed headers: no Eigen, CUDA only in CUDA sections ------------------

# Macros whose test guards a CUDA-only section of a header.
CUDA_MACROS = {"ZRT_WITH_CUDA", "ZRT_WITH_NCCL", "__CUDACC__", "__CUDA_ARCH__"}
EIGEN_HEADER = re.compile(r"^(unsupported/)?Eigen/")
CUDA_HEADER = re.compile(r"^(cuda|cublas|curand|cusparse|cub/|thrust/)|^nccl\.h$")
CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
CUDA_TEST = re.compile(r"^\(*\s*(defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)|(\w+))\s*\)*$")


def cuda_test(term):
    """'pos' if `term` tests a CUDA macro, 'neg' if it tests its absence, else None."""
    term = term.strip()
    negated = term.startswith("!")
    m = CUDA_TEST.match(term.lstrip("!").strip())
    if not m or (m.group(2) or m.group(3) or m.group(4)) not in CUDA_MACROS:
        return None
    return "neg" if negated else "pos"


def branch_kinds(directive, condition):
    """(this branch is CUDA-only, its #else is CUDA-only) for #if/#ifdef/#ifndef/#elif."""
    condition = condition.split("//")[0].strip()
    if directive == "ifdef":
        return condition in CUDA_MACROS, False
    if directive == "ifndef":
        return False, condition in CUDA_MACROS
    if "||" in condition:
        return False, False
    kinds = [cuda_test(t) for t in condition.split("&&")]
    return "pos" in kinds, kinds == ["neg"]


def includes_of(path):
    """[(line number, quote, name, inside a CUDA-only section)] of a source file."""
    out = []
    stack = []  # per open conditional: [this branch CUDA-only, its #else CUDA-only]
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        c = CONDITIONAL.match(line)
        if c:
            directive, rest = c.group(1), c.group(2)
            if directive in ("if", "ifdef", "ifndef"):
                stack.append(list(branch_kinds(directive, rest)))
            elif directive == "elif" and stack:
                stack[-1] = [branch_kinds("if", rest)[0], False]
            elif directive == "else" and stack:
                stack[-1] = [stack[-1][1], False]
            elif directive == "endif" and stack:
                stack.pop()
            continue
        m = INCLUDE.match(line)
        if m:
            out.append((number, m.group(1), m.group(2), any(b[0] for b in stack)))
    return out


def installed(rel):
    return (rel.parts[0] in LIBRARIES and rel.suffix == ".h" and not rel.name.endswith("_impl.h"))


def check_installed_headers(root):
    """Errors of the rule on installed headers (see the module's docstring)."""
    cache = {}

    def includes(rel):
        if rel not in cache:
            cache[rel] = includes_of(root / rel) if (root / rel).is_file() else []
        return cache[rel]

    def zrt_file(name):
        parts = pathlib.PurePosixPath(name).parts
        return pathlib.Path(*parts[1:]) if len(parts) > 2 and parts[0] == "zrt" else None

    def first_reached(start, bad, cuda_too):
        """The first (file, line, include) matching `bad` that `start` reaches
        through zrt includes (only those outside CUDA sections unless
        cuda_too), or None; a zrt file that is not installed counts when
        cuda_too is False."""
        seen, todo = {start}, [start]
        while todo:
            rel = todo.pop(0)
            for number, quote, name, guarded in includes(rel):
                if guarded and not cuda_too:
                    continue
                spelled = f'<{name}>' if quote == "<" else f'"{name}"'
                if bad(name):
                    return rel, number, spelled
                target = zrt_file(name)
                if target is None or target in seen:
                    continue
                if not cuda_too and not installed(target):
                    return rel, number, spelled
                seen.add(target)
                todo.append(target)
        return None

    def describe(rel, hit):
        where, number, name = hit
        return f"{name} ({where}:{number})" if where == rel else f"{name} (through {where}:{number})"

    errors = []
    for library in LIBRARIES:
        for path in sorted((root / library).rglob("*.h")):
            rel = path.relative_to(root)
            if not installed(rel):
                continue
            hit = first_reached(rel, lambda n: bool(EIGEN_HEADER.match(n)), cuda_too=True)
            if hit:
                errors.append(f"{rel}: installed header includes {describe(rel, hit)}; "
                              "Eigen is private to zrt_kernels' sources")
            hit = first_reached(rel, lambda n: bool(CUDA_HEADER.match(n)), cuda_too=False)
            if hit:
                what = "a CUDA header" if CUDA_HEADER.match(hit[2].strip('<>"')) else "a file that is not installed"
                errors.append(f"{rel}: installed header includes {what}, {describe(rel, hit)}, "
                              "outside #ifdef ZRT_WITH_CUDA (or __CUDACC__, __CUDA_ARCH__, ZRT_WITH_NCCL)")
    return errors


# A small source tree per case, and the installed headers the rules must
# report in it.
SELF_TESTS = {
    "an installed header includes Eigen": ({"runtime/a.h": "#include <Eigen/Core>\n"}, {"runtime/a.h"}),
    "an installed header reaches Eigen through a zrt header": (
        {"runtime/a.h": "#pragma once\n#include <Eigen/Core>\n",
         "kernels/b.h": '#include "zrt/runtime/a.h"\n'}, {"runtime/a.h", "kernels/b.h"}),
    "Eigen in the #else of a CUDA section": (
        {"kernels/b.h": "#ifdef __CUDACC__\n#include <cuda_bf16.h>\n#else\n#include <Eigen/Core>\n#endif\n"},
        {"kernels/b.h"}),
    "Eigen reached through a CUDA section": (
        {"runtime/a.h": "#include <Eigen/Core>\n",
         "kernels/b.h": '#ifdef ZRT_WITH_CUDA\n#include "zrt/runtime/a.h"\n#endif\n'},
        {"runtime/a.h", "kernels/b.h"}),
    "a bare CUDA include": ({"runtime/a.h": "#include <cuda_runtime.h>\n"}, {"runtime/a.h"}),
    "a bare NCCL include": ({"runtime/a.h": "#include <nccl.h>\n"}, {"runtime/a.h"}),
    "a CUDA include reached through a zrt header": (
        {"runtime/a.h": "#include <cublas_v2.h>\n", "kernels/b.h": '#include "zrt/runtime/a.h"\n'},
        {"runtime/a.h", "kernels/b.h"}),
    "a CUDA include under #ifndef __CUDACC__": (
        {"runtime/a.h": "#ifndef __CUDACC__\n#include <cuda_fp16.h>\n#endif\n"}, {"runtime/a.h"}),
    "a CUDA include under a condition that is not CUDA's alone": (
        {"runtime/a.h": "#if defined(ZRT_WITH_CUDA) || defined(FOO)\n#include <cuda.h>\n#endif\n"},
        {"runtime/a.h"}),
    "a CUDA include after its section closed": (
        {"runtime/a.h": "#ifdef ZRT_WITH_CUDA\n#endif\n#include <cuda_runtime.h>\n"}, {"runtime/a.h"}),
    "an installed header includes a .cuh": (
        {"kernels/b.h": '#include "zrt/kernels/b.cuh"\n', "kernels/b.cuh": "\n"}, {"kernels/b.h"}),
    "CUDA includes in CUDA sections, Eigen in sources and bodies": (
        {"runtime/a.h": "#ifdef ZRT_WITH_CUDA\n#include <cuda_runtime.h>\n#endif\n",
         "runtime/c.h": "#if defined(__CUDA_ARCH__) && X\n#include <cuda_bf16.h>\n#else\n#endif\n"
                        "#ifndef __CUDACC__\n#else\n#include <cuda_fp16.h>\n#endif\n",
         "kernels/b.h": '#include "zrt/runtime/a.h"\n#ifdef ZRT_WITH_CUDA\n#include "zrt/kernels/b.cuh"\n#endif\n',
         "kernels/b.cuh": "#include <cuda_runtime.h>\n",
         "kernels/b_impl.h": "#include <Eigen/Core>\n",
         "kernels/b.cpp": "#include <Eigen/Core>\n#include <cuda_runtime.h>\n"}, set()),
}


def self_test():
    failures = 0
    for name, (files, expected) in SELF_TESTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            for library in LIBRARIES:
                (root / library).mkdir()
            for rel, text in files.items():
                (root / rel).write_text(text)
            errors = check_installed_headers(root)
        reported = {e.split(":")[0] for e in errors}
        if reported != expected:
            failures += 1
            print(f"self-test FAILED: {name}: expected reports on {sorted(expected)}, got {errors}")
        else:
            print(f"self-test ok: {name}" + "".join(f"\n  {e}" for e in errors))
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    errors = check(root) + check_installed_headers(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layout: {len(errors)} include(s) against the layout and header rules in docs/design.md, section 2")
        return 1
    print("check_layout: the include graph follows the layout and the header rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
