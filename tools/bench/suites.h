// The suites of zrt-bench, one file each (bench_<suite>.cpp).
#pragma once

namespace zrt::bench {
int bench_comm(int argc, char** argv);
int bench_optim(int argc, char** argv);
int bench_ckpt(int argc, char** argv);
int bench_train(int argc, char** argv);
int bench_gemm(int argc, char** argv);
int bench_tensor(int argc, char** argv);
int bench_attention(int argc, char** argv);
int bench_ops(int argc, char** argv);
}  // namespace zrt::bench
