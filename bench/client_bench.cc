// Meta cost per op through the C++ client: client::Call on meta tensors (what
// a C++ user pays, and what every Python call runs under the binding):
// overload resolution by name, binding, the meta function, autograd
// bookkeeping and the result Tensors. Same op mix as meta_bench.cc (the meta
// function alone) and bench/meta_bench.py (from Python, beside torch). Not a
// test: no thresholds. No daemon is involved.
//
//   build/bin/client_bench [--benchmark_filter=Add]
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "tensord/client/ops.h"
#include "tensord/meta/device.h"

namespace tensord::client {
namespace {

Tensor MetaEmpty(std::vector<int64_t> sizes) {
  return *Call1("empty", {Arg(std::move(sizes))}, {{"device", Arg(kMetaDevice)}}, CallMode::kFunction);
}

// Calls `op` once per iteration; stops the benchmark on an error. The site
// is given as text so CallSite::Current() formatting is not what is timed.
void RunCall(benchmark::State& state, const char* op, std::vector<Arg> args, Kwargs kwargs = {},
             CallMode mode = CallMode::kMethod) {
  const CallSite site = CallSite::Of("client_bench");
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> r = Call(op, args, kwargs, mode, site);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
}

struct Inputs {
  Tensor a = MetaEmpty({64, 128});
  Tensor b = MetaEmpty({128, 32});
  Tensor row = MetaEmpty({128});
  Tensor x3 = MetaEmpty({8, 64, 128});
  Tensor xt = *Call1("transpose", {x3, 1, 2}, {}, CallMode::kMethod);
};
const Inputs& In() {
  static const Inputs* in = new Inputs();
  return *in;
}

void BM_AddBroadcast(benchmark::State& s) { RunCall(s, "add", {In().a, In().row}); }
void BM_AddTransposed(benchmark::State& s) { RunCall(s, "add", {In().xt, In().xt}); }
void BM_MulScalar(benchmark::State& s) { RunCall(s, "mul", {In().a, 2.0}); }
void BM_Matmul2D(benchmark::State& s) { RunCall(s, "matmul", {In().a, In().b}); }
void BM_MatmulBatched(benchmark::State& s) { RunCall(s, "matmul", {In().x3, In().b}); }
void BM_View(benchmark::State& s) { RunCall(s, "view", {In().a, 128, 64}); }
void BM_Transpose(benchmark::State& s) { RunCall(s, "transpose", {In().a, 0, 1}); }
void BM_SumDim(benchmark::State& s) { RunCall(s, "sum", {In().x3, 1}); }
void BM_SumAll(benchmark::State& s) { RunCall(s, "sum", {In().a}); }
void BM_Softmax(benchmark::State& s) { RunCall(s, "softmax", {In().x3, -1}, {}, CallMode::kFunction); }
void BM_Cat(benchmark::State& s) {
  RunCall(s, "cat", {std::vector<Tensor>{In().a, In().a, In().a}, 0}, {}, CallMode::kFunction);
}
void BM_ReshapeCopy(benchmark::State& s) { RunCall(s, "reshape", {In().xt, 8, -1}); }
void BM_EmptyStrided(benchmark::State& s) {
  RunCall(s, "empty_strided", {std::vector<int64_t>{4, 5}, std::vector<int64_t>{1, 4}}, {{"device", kMetaDevice}},
          CallMode::kFunction);
}

BENCHMARK(BM_AddBroadcast);
BENCHMARK(BM_AddTransposed);
BENCHMARK(BM_MulScalar);
BENCHMARK(BM_Matmul2D);
BENCHMARK(BM_MatmulBatched);
BENCHMARK(BM_View);
BENCHMARK(BM_Transpose);
BENCHMARK(BM_SumDim);
BENCHMARK(BM_SumAll);
BENCHMARK(BM_Softmax);
BENCHMARK(BM_Cat);
BENCHMARK(BM_ReshapeCopy);
BENCHMARK(BM_EmptyStrided);

}  // namespace
}  // namespace tensord::client

BENCHMARK_MAIN();
