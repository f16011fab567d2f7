// Meta cost per op from C++: binding the arguments to the schema and running
// the op's meta function (what the client does before streaming a call), for
// the same mix of ops as bench/meta_bench.py. Prints ns/op per op; the peer
// comparison with PyTorch's meta device lives in meta_bench.py (torch has no
// C++ library installed here). Not a test: no thresholds.
//
//   build/bin/meta_bench [--benchmark_filter=matmul]
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord {
namespace {

using KW = std::vector<std::pair<std::string, Value>>;

TensorMeta Meta(Shape sizes) { return TensorMeta::Contiguous(std::move(sizes), ScalarType::kFloat32, kMetaDevice); }

TensorMeta Strided(Shape sizes, Shape strides) {
  TensorMeta m = Meta(sizes);
  m.strides = std::move(strides);
  return m;
}

// Binds and runs `op` once per iteration; aborts the benchmark on an error.
void RunOp(benchmark::State& state, const char* op, std::vector<Value> pos, KW kw = {}) {
  const OpEntry* e = OpTable::Get().Find(op);
  if (e == nullptr) {
    state.SkipWithError((std::string("no op ") + op).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<Value>> args = BindArgs(e->schema, pos, kw);
    if (!args.ok()) {
      state.SkipWithError(std::string(args.status().message()).c_str());
      return;
    }
    absl::StatusOr<MetaResult> r = OpTable::Get().RunMeta(*e, *args);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
}

const TensorMeta kA = Meta({64, 128});
const TensorMeta kB = Meta({128, 32});
const TensorMeta kRow = Meta({128});
const TensorMeta kX3 = Meta({8, 64, 128});
const TensorMeta kXt = Strided({8, 128, 64}, {8192, 1, 128});

void BM_AddBroadcast(benchmark::State& s) { RunOp(s, "add.Tensor", {Value(&kA), Value(&kRow)}); }
void BM_AddTransposed(benchmark::State& s) { RunOp(s, "add.Tensor", {Value(&kXt), Value(&kXt)}); }
void BM_MulScalar(benchmark::State& s) { RunOp(s, "mul.Scalar", {Value(&kA), Value(Scalar::Float(2.0))}); }
void BM_Matmul2D(benchmark::State& s) { RunOp(s, "matmul", {Value(&kA), Value(&kB)}); }
void BM_MatmulBatched(benchmark::State& s) { RunOp(s, "matmul", {Value(&kX3), Value(&kB)}); }
void BM_View(benchmark::State& s) { RunOp(s, "view", {Value(&kA), Value(std::vector<int64_t>{128, 64})}); }
void BM_Transpose(benchmark::State& s) {
  RunOp(s, "transpose.int", {Value(&kA), Value(int64_t{0}), Value(int64_t{1})});
}
void BM_SumDim(benchmark::State& s) {
  RunOp(s, "sum", {Value(&kX3), Value(std::vector<int64_t>{1})});
}
void BM_Softmax(benchmark::State& s) { RunOp(s, "softmax.int", {Value(&kX3), Value(int64_t{-1})}); }
void BM_Cat(benchmark::State& s) {
  RunOp(s, "cat", {Value(TensorList{&kA, &kA, &kA}), Value(int64_t{0})});
}
void BM_ReshapeCopy(benchmark::State& s) {
  RunOp(s, "reshape", {Value(&kXt), Value(std::vector<int64_t>{8, -1})});
}
void BM_EmptyStrided(benchmark::State& s) {
  RunOp(s, "empty_strided", {Value(std::vector<int64_t>{4, 5}), Value(std::vector<int64_t>{1, 4})},
        {{"device", Value(kMetaDevice)}});
}

BENCHMARK(BM_AddBroadcast);
BENCHMARK(BM_AddTransposed);
BENCHMARK(BM_MulScalar);
BENCHMARK(BM_Matmul2D);
BENCHMARK(BM_MatmulBatched);
BENCHMARK(BM_View);
BENCHMARK(BM_Transpose);
BENCHMARK(BM_SumDim);
BENCHMARK(BM_Softmax);
BENCHMARK(BM_Cat);
BENCHMARK(BM_ReshapeCopy);
BENCHMARK(BM_EmptyStrided);

}  // namespace
}  // namespace tensord

BENCHMARK_MAIN();
