#!/usr/bin/env python3
"""Checks zrt's folder layout and include graph (docs/design.md, section 2).

- The libraries are ordered runtime < kernels < optim < model_zoo: a file of a
  library includes only its own library and the ones below it.
- Inside a library the sub-folders are ordered too (LAYERS below): a file
  includes only its own folder and folders of a lower layer; folders of one
  layer do not include each other.
- zrt code is included as "zrt/LIBRARY/...", never relatively, and library
  code never includes tests/ or tools/.
- The model ops of kernels/nn/ are the layers': model_zoo code outside
  layers/ includes from kernels only MODEL_ZOO_KERNELS (the whole-tensor
  ops of ops/, the id flag of nn/id_check.h, the switches of kernel_path.h).
- Tensors stop at the kernels' Tensor-level entry points: no CUDA launcher
  of kernels (.cu, .cuh) reaches zrt/runtime/tensor.h through its zrt
  includes except by TENSOR_BRIDGES (nn/id_check.h, for its IdSource bits).
- The installed headers (every *.h of a library but the *_impl.h bodies)
  leave Eigen and CUDA to zrt's own sources: none includes <Eigen/...>,
  directly or through the zrt headers it includes (Eigen is a private
  dependency of zrt_kernels); none includes CUDA's, cuBLAS's or NCCL's
  headers outside a CUDA section (#ifdef ZRT_WITH_CUDA, __CUDACC__, ...),
  directly or through the zrt headers it includes outside one; and none
  includes a file that is not installed (.cuh, *_impl.h) outside one.
- The docs follow the code: docs/design.md's table of layers equals LAYERS
  and its table of folders names each library's sub-folders, no more; every
  `Note [Title]` referenced anywhere (code, scripts, docs) is defined by a
  `// Note [Title]` (or `# Note [Title]`) line somewhere; every repository
  path that README.md or docs/*.md names, and every relative link, exists.

Prints each violation as FILE:LINE: message and exits 1 if there is any.
usage: tools/check_layout.py [SOURCE_ROOT]
       tools/check_layout.py --self-test   (the include, header and doc rules reject bad trees)
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
    "kernels": [[""], ["ops"], ["cpu_isa"], ["cpu_blas"], ["nn"]],
    "optim": [["flat_param"], [""], ["checkpoint"]],
    "model_zoo": [["layers"], ["models"], ["io"], ["data", "engine"], ["trainer"]],
}

SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^">]+)[">]')

# What model_zoo code outside layers/ may include from kernels (a folder
# ends in "/"): the whole-tensor ops, the id flag, the kernel-path switches.
# The model ops of nn/ are the layers' (docs/design.md, section 2).
MODEL_ZOO_KERNELS = ("zrt/kernels/ops/", "zrt/kernels/nn/id_check.h", "zrt/kernels/kernel_path.h")
# The only zrt headers through which a CUDA launcher of kernels may reach
# zrt/runtime/tensor.h: nn/id_check.h, whose IdSource bits embedding.cu and
# cross_entropy.cu record in an id flag (Note [Device id checks]).
TENSOR_HEADER = "zrt/runtime/tensor.h"
TENSOR_BRIDGES = {"zrt/kernels/nn/id_check.h"}


def model_zoo_may_include(name):
    return any(name.startswith(a) if a.endswith("/") else name == a for a in MODEL_ZOO_KERNELS)


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
                if (library == "model_zoo" and target == "kernels"
                        and folder.split("/")[0] != "layers" and not model_zoo_may_include(name)):
                    errors.append(f"{where}: model_zoo/{folder or '.'} includes {name}; outside "
                                  "model_zoo/layers/ the model zoo includes from kernels only "
                                  + ", ".join(MODEL_ZOO_KERNELS))
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
    return errors + check_launchers(root)


def check_launchers(root):
    """Errors of the rule that no CUDA launcher of kernels (.cu, .cuh) reaches
    TENSOR_HEADER through its zrt includes except by a TENSOR_BRIDGES header."""
    def zrt_includes(rel):
        path = root / rel
        if not path.is_file():
            return []
        return [(number, m.group(2))
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                if (m := INCLUDE.match(line)) and m.group(2).startswith("zrt/")]

    errors = []
    for path in sorted((root / "kernels").rglob("*")):
        if path.suffix not in {".cu", ".cuh"}:
            continue
        start = path.relative_to(root)
        seen, todo = {start}, [(start, None)]  # (file, the line of start that reaches it)
        while todo:
            rel, first = todo.pop(0)
            for number, name in zrt_includes(rel):
                if name in TENSOR_BRIDGES:
                    continue
                if name == TENSOR_HEADER:
                    through = "" if rel == start else f" (through {rel}:{number})"
                    errors.append(f"{start}:{first or number}: CUDA launcher includes "
                                  f"{TENSOR_HEADER}{through}; tensors stop at the Tensor-level "
                                  "entry points (only " + ", ".join(sorted(TENSOR_BRIDGES))
                                  + " may bring it)")
                    todo = []
                    break
                target = pathlib.Path(*pathlib.PurePosixPath(name).parts[1:])
                if target not in seen:
                    seen.add(target)
                    todo.append((target, first or number))
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


# --- docs checked against the code ---------------------------------------------

# Where notes are defined and referenced, and the files read there.
NOTE_FOLDERS = LIBRARIES + ["tools", "tests", "examples", "cmake", "docs", ".ci"]
NOTE_SUFFIXES = SOURCE_SUFFIXES | {".py", ".sh", ".md", ".cmake", ".txt", ""}
NOTE_DEFINITION = re.compile(r"^[ \t]*(?://|#)?[ \t]*Note \[([^\]]+)\][ \t]*$", re.M)
NOTE_REFERENCE = re.compile(r"Note\s+\[([^\]]+)\]")
# A line break and the comment leader of the next line: a wrapped reference.
LINE_LEADER = re.compile(r"\n[ \t]*(?://+|#+|\*|>)?[ \t]*")
CODE_SPAN = re.compile(r"`[^`]*`")
# Repository paths in the docs: a top-level folder and what follows it, or
# an include spelling zrt/LIBRARY/...; and the target of a relative link.
TOP_FOLDERS = LIBRARIES + ["tests", "tools", "docs", "examples", "cmake", ".ci"]
DOC_PATH = re.compile(r"(?<![\w./<-])(zrt/)?((?:%s)/[\w./+-]*)"
                      % "|".join(map(re.escape, TOP_FOLDERS)))
DOC_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def doc_files(root):
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def table_rows(text, header):
    """The cells of the rows of the markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    return None


def folder_name(cell):
    name = cell.strip().strip("`").rstrip("/")
    return "" if name == "." else name


def check_design_tables(root, layers):
    """docs/design.md's table of layers equals `layers`; its table of folders
    names each library's sub-folders and no others."""
    design = root / "docs" / "design.md"
    if not design.is_file():
        return ["docs/design.md: missing (the layer table of tools/check_layout.py)"]
    text = design.read_text()
    errors = []
    rows = table_rows(text, "| library | layers")
    if rows is None:
        return ["docs/design.md: no table headed '| library | layers ...' (section 2)"]
    table = {folder_name(r[0]): [[folder_name(f) for f in layer.split(",")]
                                 for layer in r[1].split("<")] for r in rows}
    if table != layers:
        errors.append(f"docs/design.md: the layer table {table} differs from "
                      f"tools/check_layout.py's LAYERS {layers}")
    rows = table_rows(text, "| folder | CMake target") or []
    listed = {folder_name(r[0]): r[3] for r in rows if len(r) > 3}
    for library, library_layers in layers.items():
        named = set(re.findall(r"`(\w+)/`", listed.get(library, "")))
        folders = {f for layer in library_layers for f in layer if f}
        if library not in listed:
            errors.append(f"docs/design.md: the folder table has no row for `{library}/`")
        elif named != folders:
            errors.append(f"docs/design.md: the folder table's `{library}/` row names "
                          f"{sorted(named)}, its folders are {sorted(folders)}")
    return errors


def note_files(root):
    for folder in NOTE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if (path.is_file() and path.suffix in NOTE_SUFFIXES and "__pycache__" not in path.parts
                    and path.name != "check_layout.py"):  # whose self-tests name missing notes
                yield path
    yield from (p for p in [root / "README.md", root / "CMakeLists.txt"] if p.is_file())


def check_notes(root):
    """Every referenced note is defined somewhere."""
    defined, referenced = set(), {}
    for path in note_files(root):
        text = path.read_text(errors="replace")
        if path.suffix != ".md":
            defined.update(NOTE_DEFINITION.findall(text))
        else:
            text = CODE_SPAN.sub("", text)  # `Note [Title]` spells the form itself
        for m in NOTE_REFERENCE.finditer(LINE_LEADER.sub(" ", text)):
            referenced.setdefault(" ".join(m.group(1).split()), path.relative_to(root))
    return [f"{where}: Note [{title}] is defined nowhere (no '// Note [{title}]' line)"
            for title, where in sorted(referenced.items()) if title not in defined]


def check_doc_paths(root):
    """Every repository path and relative link in README.md and docs/*.md exists."""
    errors = []
    for doc in doc_files(root):
        rel = doc.relative_to(root)
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for m in DOC_PATH.finditer(line):
                path = m.group(2).rstrip(".,:;")
                if m.group(1) and path.split("/")[0] not in LIBRARIES:
                    continue
                if not (root / path).exists():
                    errors.append(f"{rel}:{number}: names {m.group(0)}, which does not exist")
            for m in DOC_LINK.finditer(line):
                target = m.group(1)
                if "://" not in target and not (doc.parent / target).exists():
                    errors.append(f"{rel}:{number}: links to {target}, which does not exist")
    return errors


def check_docs(root, layers=LAYERS):
    return check_design_tables(root, layers) + check_notes(root) + check_doc_paths(root)


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


# A small source tree per case, and the files the include rules (check)
# must report in it.
INCLUDE_SELF_TESTS = {
    "model_zoo outside layers/ includes a model op": (
        {"model_zoo/engine/e.cpp": '#include "zrt/kernels/nn/gemm.h"\n'}, {"model_zoo/engine/e.cpp"}),
    "model_zoo outside layers/ includes a top-level kernels header other than kernel_path.h": (
        {"model_zoo/data/d.cpp": '#include "zrt/kernels/launch.h"\n'}, {"model_zoo/data/d.cpp"}),
    "layers/ include model ops; the rest whole-tensor ops, the id flag, kernel paths": (
        {"model_zoo/layers/l.cpp": '#include "zrt/kernels/nn/gemm.h"\n#include "zrt/kernels/nn/layernorm.h"\n',
         "model_zoo/engine/e.cpp": '#include "zrt/kernels/ops/cast.h"\n#include "zrt/kernels/nn/id_check.h"\n',
         "model_zoo/models/p.cpp": '#include "zrt/kernels/ops/random_fill.h"\n',
         "model_zoo/trainer/t.cpp": '#include "zrt/kernels/kernel_path.h"\n'}, set()),
    "a CUDA launcher includes tensor.h": (
        {"kernels/nn/x.cu": '#include "zrt/runtime/tensor.h"\n'}, {"kernels/nn/x.cu"}),
    "a CUDA launcher reaches tensor.h through a zrt header": (
        {"kernels/nn/x.cuh": '#include "zrt/kernels/nn/y.h"\n',
         "kernels/nn/y.h": '#include "zrt/runtime/tensor.h"\n'}, {"kernels/nn/x.cuh"}),
    "launchers reach tensor.h only through nn/id_check.h; entry points include it": (
        {"kernels/nn/x.cu": '#include "zrt/kernels/nn/id_check.h"\n#include "zrt/kernels/nn/x.cuh"\n',
         "kernels/nn/x.cuh": "#include <cuda_runtime.h>\n",
         "kernels/nn/id_check.h": '#include "zrt/runtime/tensor.h"\n',
         "kernels/nn/x.cpp": '#include "zrt/runtime/tensor.h"\n#include "zrt/kernels/nn/x.cuh"\n'},
        set()),
}


def design_tables(layers):
    """docs/design.md's two tables as check_design_tables reads them, for `layers`."""
    def cell(folders):
        return ", ".join(f"`{f}/`" if f else "`.`" for f in folders)
    text = "| library | layers, bottom first |\n| --- | --- |\n"
    text += "".join(f"| `{lib}/` | {' < '.join(cell(layer) for layer in ls)} |\n"
                    for lib, ls in layers.items())
    text += "\n| folder | CMake target | namespace | contents |\n| --- | --- | --- | --- |\n"
    text += "".join(f"| `{lib}/` | t | n | {cell(f for layer in ls for f in layer if f)} |\n"
                    for lib, ls in layers.items())
    return text


DESIGN = design_tables(LAYERS)
MOVED = {**LAYERS, "model_zoo": LAYERS["model_zoo"] + [["checkpoint"]]}
UNLISTED = {**LAYERS, "runtime": [[""], ["memory"], ["comm"]]}
# A small tree per case (docs/design.md as `design` unless given), and the
# files the doc rules must report in it.
DOC_SELF_TESTS = {
    "a doc refers to a note defined nowhere": ({"README.md": "see Note [Gone]\n"}, {"README.md"}),
    "code refers, wrapped over two lines, to a note defined nowhere": (
        {"kernels/b.h": "// as Note [Gone\n//   away] says\n"}, {"kernels/b.h"}),
    "a doc names a file that moved": (
        {"README.md": "in `model_zoo/checkpoint/save.h`\n"}, {"README.md"}),
    "a doc names a header by its include spelling, which moved": (
        {"docs/x.md": "(`zrt/model_zoo/checkpoint/save.h`)\n"}, {"docs/x.md"}),
    "a doc links to a page that does not exist": ({"docs/x.md": "[y](y.md#top)\n"}, {"docs/x.md"}),
    "the layer table has a folder LAYERS lacks": (
        {"docs/design.md": design_tables(MOVED)}, {"docs/design.md"}),
    "the folder table leaves out a folder": (
        {"docs/design.md": (DESIGN.split("\n\n")[0] + "\n\n"
                            + design_tables(UNLISTED).split("\n\n")[1])},
        {"docs/design.md"}),
    "design.md has no layer table": ({"docs/design.md": "# Design\n"}, {"docs/design.md"}),
    "defined notes, wrapped references, code spans and existing paths pass": (
        {"runtime/a.h": "// Note [Kept note]\n// Note [Two\n// lines] below\n",
         "tools/t.py": '"""\nNote [Two lines]\n"""\n',
         "docs/x.md": "`runtime/a.h` (zrt/runtime/a.h, Note [Kept\n  note]); a `Note [Title]`;"
                      " [design](design.md#2-folders) and [home](https://example.com)\n"}, set()),
}


def run_self_tests(cases, check, base):
    failures = 0
    for name, (files, expected) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            for library in LIBRARIES:
                (root / library).mkdir()
            for rel, text in {**base, **files}.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
            errors = check(root)
        reported = {e.split(":")[0] for e in errors}
        if reported != expected:
            failures += 1
            print(f"self-test FAILED: {name}: expected reports on {sorted(expected)}, got {errors}")
        else:
            print(f"self-test ok: {name}" + "".join(f"\n  {e}" for e in errors))
    return failures


def self_test():
    failures = run_self_tests(INCLUDE_SELF_TESTS, check, {})
    failures += run_self_tests(SELF_TESTS, check_installed_headers, {})
    failures += run_self_tests(DOC_SELF_TESTS, check_docs, {"docs/design.md": DESIGN})
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    errors = check(root) + check_installed_headers(root) + check_docs(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layout: {len(errors)} violation(s) of the layout, header and doc rules "
              "(docs/design.md, section 2)")
        return 1
    print("check_layout: the include graph follows the layout and header rules; the docs match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
