#!/usr/bin/env bash
# Prepares, on a machine without a GPU, everything a lent GPU machine needs to
# run tools/gpu-check.sh, in one folder that git ignores: the gpu suites,
# zrt-train and zrt-bench built here (Release, sm_90, MPI and OpenBLAS off,
# stripped), the shared libraries they need that such a machine lacks
# (zrt's own, Boost.Test, xxHash), and in scripts/ the PyTorch side of the training
# comparison (tools/bench/torch_gpt.py with the safetensors reader it imports,
# tests/model_zoo/models/safetensors_io.py, beside it) and the reader of the
# sanitizer's and ncu's output (tools/gpu_report.py). The CUDA runtime,
# cuBLAS and NCCL are not carried:
# gpu-check.sh takes them from that machine's CUDA toolkit or its PyTorch's
# nvidia/*/lib wheels (CUDA 13 there as here). Prints the bundle's size, which must
# stay under the 64 MiB a device call carries.
#
# Binaries built here rather than sources built there: the device's minutes
# are the scarce ones, and this machine's glibc (2.36) and libstdc++ are no
# newer than that machine's.
#
# usage: tools/gpu-bundle.sh [BUNDLE]   (default: gpu-bundle/ in the repository;
#        the build goes to build-gpu-bundle/, or ZRT_GPU_BUNDLE_BUILD)
# then:  device run, carry [gpu-bundle], command: tools/gpu-check.sh gpu-bundle
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-$root/gpu-bundle}
build=${ZRT_GPU_BUNDLE_BUILD:-$root/build-gpu-bundle}
limit_mib=60  # of the 64 MiB a call carries, with room for the working tree's own files

suites=(test_tensor_gpu test_caching_allocator_gpu test_comm_gpu test_op_registry_gpu test_nn_kernels_gpu test_engine_gpu)
programs=("${suites[@]}" zrt-train zrt-bench)

# The tree as it is when the build starts, for the manifest.
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# ccache caches the suites' objects, which include a precompiled header (Note
# [Test compile time]), only with these.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DZRT_CUDA=ON -DZRT_NCCL=ON -DZRT_MPI=OFF -DZRT_OPENBLAS=OFF -DZRT_BUILD_TESTS=ON -DZRT_WERROR=ON \
  "${launcher[@]}" > "$build/zrt-configure.log" ||
  { cat "$build/zrt-configure.log"; exit 1; }
cmake --build "$build" --target "${programs[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/scripts"
cp "$root/tools/bench/torch_gpt.py" "$root/tests/model_zoo/models/safetensors_io.py" \
  "$root/tools/gpu_report.py" "$bundle/scripts/"
for p in "${programs[@]}"; do
  path=$(find "$build" -type f -name "$p" -perm -u+x | head -1)
  [ -n "$path" ] || { echo "gpu-bundle: $p was not built" >&2; exit 1; }
  cp "$path" "$bundle/bin/$p"
  strip "$bundle/bin/$p"
done

# The shared libraries to carry: those the binaries need from this machine's
# packages that the device image does not have. Everything else must be
# glibc, libstdc++ or the device's own CUDA libraries (found there at run time).
carry_pattern='libzrt_|libboost_unit_test_framework|libxxhash'
device_pattern='linux-vdso|ld-linux|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libcuda\.so|libcudart|libcublas|libcublasLt|libnccl'
for p in "$bundle"/bin/*; do
  while read -r name _ path _; do
    if [[ $name =~ $carry_pattern ]]; then
      if [ ! -e "$bundle/lib/$name" ]; then
        cp -L "$path" "$bundle/lib/$name"
        [[ $name == libzrt_* ]] && strip --strip-unneeded "$bundle/lib/$name"
      fi
    elif ! [[ $name =~ $device_pattern ]]; then
      echo "gpu-bundle: $(basename "$p") needs $name ($path), which is neither carried nor on the device" >&2
      exit 1
    fi
  done < <(ldd "$p" | awk '/=>/ {print $1, $2, $3, $4} !/=>/ {print $1, "=>", $1, ""}')
done

{
  echo "commit $commit"
  echo "built $(uname -m), $(ldd --version | head -1), $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
  echo "programs ${programs[*]}"
  echo "scripts torch_gpt.py safetensors_io.py gpu_report.py"
} > "$bundle/MANIFEST"
size_kib=$(du -sk "$bundle" | cut -f1)
echo "gpu-bundle: $bundle: $((size_kib / 1024)) MiB ($size_kib KiB)"
ls -l "$bundle/bin" "$bundle/lib" "$bundle/scripts" | awk 'NF > 5 {printf "  %8.1f MiB  %s\n", $5 / 1048576, $NF}'
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu-bundle: larger than $limit_mib MiB: a device call carries 64 MiB in all" >&2
  exit 1
fi
