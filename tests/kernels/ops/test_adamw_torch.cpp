// Fused AdamW against torch.optim.AdamW itself (Debian's python3-torch, run
// through ZRT_PYTHON) over several steps with weight-decay ranges.
#include <unistd.h>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/ops/adamw_reference.h"
#include "zrt/kernels/ops/adamw.h"

using namespace zrt;
using namespace zrt::test;
namespace fs = std::filesystem;

namespace {

void write_f32(const fs::path& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  BOOST_REQUIRE_MESSAGE(out.good(), "cannot write " << path);
}

std::vector<double> read_f32(const fs::path& path, std::int64_t n) {
  std::vector<float> buf(static_cast<std::size_t>(n));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n * 4));
  BOOST_REQUIRE_MESSAGE(in.gcount() == n * 4, "short or missing result file " << path);
  return std::vector<double>(buf.begin(), buf.end());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_adamw_torch)

BOOST_AUTO_TEST_CASE(matches_torch_optim_adamw) {
  auto gen = fresh_generator();
  const std::int64_t n = 10007;
  const int steps = 5;
  const kernels::AdamWHyperparams hp{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const std::vector<kernels::ElementRange> ranges = random_decay_ranges(n, gen);
  const fs::path dir = fs::temp_directory_path() / ("zrt_adamw_torch_" + std::to_string(getpid()) +
                                                    "_" + std::to_string(gen() % 1000000));
  fs::create_directories(dir);
  {
    std::ofstream cfg(dir / "config.txt");
    cfg.precision(17);
    cfg << n << ' ' << steps << ' ' << hp.lr << ' ' << hp.beta1 << ' ' << hp.beta2 << ' ' << hp.eps
        << ' ' << hp.weight_decay << '\n';
    for (auto r : ranges) cfg << r.begin << ' ' << r.end << '\n';
  }
  Tensor p = random_tensor(n, DType::f32, gen, -1, 1);
  Tensor m = Tensor::zeros({n}, DType::f32), v = Tensor::zeros({n}, DType::f32);
  write_f32(dir / "param.bin", p);
  for (int k = 1; k <= steps; ++k) {
    Tensor g = random_tensor(n, DType::f32, gen, -1, 1);
    write_f32(dir / ("grad_" + std::to_string(k) + ".bin"), g);
    kernels::fused_adamw(p, m, v, g, k, hp, ranges);
  }
  const std::string cmd = std::string(ZRT_PYTHON) + " " + ZRT_SOURCE_DIR +
                          "/tests/kernels/ops/adamw_torch_reference.py " + dir.string();
  const int rc = std::system(cmd.c_str());
  BOOST_REQUIRE_MESSAGE(rc != -1 && WIFEXITED(rc), "could not run `" << cmd << "`");
  BOOST_REQUIRE_MESSAGE(WEXITSTATUS(rc) != 3,
                        "the PyTorch reference needs torch and numpy importable by "
                            << ZRT_PYTHON << " (Debian: apt install python3-torch)");
  BOOST_REQUIRE_MESSAGE(WEXITSTATUS(rc) == 0,
                        "`" << cmd << "` failed with exit code " << WEXITSTATUS(rc));
  // Both sides compute in f32; they differ only where PyTorch fuses a
  // multiply-add, i.e. by an ulp or two per step.
  constexpr double kRtol = 1e-6;
  check_close(p.to_doubles(), read_f32(dir / "param_out.bin", n), kRtol, "param");
  check_close(m.to_doubles(), read_f32(dir / "exp_avg_out.bin", n), kRtol, "exp_avg");
  check_close(v.to_doubles(), read_f32(dir / "exp_avg_sq_out.bin", n), kRtol, "exp_avg_sq");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
