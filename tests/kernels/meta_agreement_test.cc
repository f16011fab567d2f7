// Meta is never more lenient than the CPU backend: for every op and every
// dtype, when the meta function accepts a call, the CPU kernel must run it.
// (Values are all ones, so no value-dependent error can fire.)
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const ScalarType kAllDtypes[] = {
    ScalarType::kBool,    ScalarType::kUInt8,    ScalarType::kInt8,          ScalarType::kInt16,
    ScalarType::kInt32,   ScalarType::kInt64,    ScalarType::kFloat16,       ScalarType::kBFloat16,
    ScalarType::kFloat32, ScalarType::kFloat64,  ScalarType::kFloat8_e4m3fn, ScalarType::kFloat8_e5m2,
};

Tensor Ones(ScalarType dt, Shape sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return FromValues(dt, sizes, std::vector<double>(static_cast<size_t>(n), 1.0));
}

// Runs meta; when it accepts, the kernel must succeed. Returns whether meta
// accepted (for reporting).
void ExpectKernelAcceptsWhatMetaAccepts(const std::string& op, std::vector<Value> args,
                                        std::vector<std::pair<std::string, Value>> kwargs,
                                        const std::string& what) {
  const OpEntry* e = OpTable::Get().Find(op);
  ASSERT_NE(e, nullptr) << op;
  auto bound = BindArgs(e->schema, args, kwargs);
  if (!bound.ok()) return;
  auto meta = OpTable::Get().RunMeta(*e, *bound);
  if (!meta.ok()) return;
  OpRun r = RunOp(op, std::move(args), std::move(kwargs));
  EXPECT_TRUE(r.status.ok()) << op << " (" << what << "): meta accepts but the kernel says "
                             << r.status;
}

TEST(MetaAgreementTest, ElementwiseOps) {
  const char* unary[] = {"neg", "abs", "sign", "floor", "ceil", "round", "trunc", "relu",
                         "bitwise_not", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
                         "sigmoid", "reciprocal", "logical_not", "isnan", "isinf", "isfinite",
                         "clone", "sum", "mean", "amax", "amin", "argmax", "argmin", "max", "min",
                         "nonzero"};
  const char* binary[] = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor",
                          "remainder.Tensor", "pow.Tensor_Tensor", "maximum", "minimum",
                          "eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor",
                          "ge.Tensor", "logical_and", "logical_or", "logical_xor",
                          "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor",
                          "matmul", "mm"};
  const char* with_scalar[] = {"add.Scalar", "sub.Scalar", "rsub.Scalar", "mul.Scalar",
                               "div.Scalar", "remainder.Scalar", "pow.Tensor_Scalar",
                               "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar",
                               "ge.Scalar", "bitwise_and.Scalar", "bitwise_or.Scalar",
                               "bitwise_xor.Scalar", "masked_fill.Scalar"};
  const Scalar scalars[] = {Scalar::Int(1), Scalar::Float(1.0), Scalar::Bool(true)};
  const Tensor mask = Ones(ScalarType::kBool, {2, 3});
  for (ScalarType dt : kAllDtypes) {
    const std::string dn(DtypeName(dt));
    const Tensor a = Ones(dt, {2, 3}), sq = Ones(dt, {3, 3}), b3 = Ones(dt, {2, 3, 3});
    for (const char* op : unary) ExpectKernelAcceptsWhatMetaAccepts(op, {In(a)}, {}, dn);
    for (const char* op : binary) ExpectKernelAcceptsWhatMetaAccepts(op, {In(sq), In(sq)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("bmm", {In(b3), In(b3)}, {}, dn);
    for (const char* op : with_scalar) {
      for (const Scalar& s : scalars) {
        std::vector<Value> args = {In(a), Value(s)};
        if (std::string(op) == "masked_fill.Scalar") args = {In(a), In(mask), Value(s)};
        ExpectKernelAcceptsWhatMetaAccepts(op, args, {}, dn + " with " + s.ToString());
      }
    }
    ExpectKernelAcceptsWhatMetaAccepts("pow.Scalar", {Value(Scalar::Int(2)), In(a)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("where.self", {In(mask), In(a), In(a)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("where.ScalarOther", {In(mask), In(a), Value(Scalar::Int(0))}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("clamp", {In(a), Value(Scalar::Int(0)), Value(Scalar::Int(1))}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("max.dim", {In(a), Value(int64_t{0})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("min.dim", {In(a), Value(int64_t{1})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("topk", {In(a), Value(int64_t{2})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("sum", {In(a)}, {{"dtype", Value(dt)}}, "sum dtype= " + dn);
    const Tensor idx = FromValues(ScalarType::kInt64, {2, 2}, {0, 1, 1, 0});
    const Tensor idx1 = FromValues(ScalarType::kInt64, {2}, {1, 0});
    ExpectKernelAcceptsWhatMetaAccepts("gather", {In(a), Value(int64_t{1}), In(idx)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("index_select", {In(a), Value(int64_t{1}), In(idx1)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("index.Tensor", {In(a), InList({&idx1})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("cat", {InList({&a, &a})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("stack", {InList({&a, &a})}, {}, dn);
    const Tensor at = ReversedLayout(a);
    ExpectKernelAcceptsWhatMetaAccepts("contiguous", {In(at)}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("reshape", {In(at), Value(std::vector<int64_t>{6})}, {}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("flatten.using_ints", {In(at)}, {}, dn);
    OpRun r = RunOp("masked_select", {In(a), In(mask)});
    EXPECT_TRUE(r.status.ok()) << "masked_select " << dn << ": " << r.status;
    for (ScalarType to : kAllDtypes) {
      ExpectKernelAcceptsWhatMetaAccepts("to.dtype", {In(a), Value(to)}, {},
                                         dn + " -> " + std::string(DtypeName(to)));
    }
    // Factories with dtype=.
    const std::vector<int64_t> size = {2, 3};
    for (const char* op : {"empty", "zeros", "ones", "rand", "randn"}) {
      ExpectKernelAcceptsWhatMetaAccepts(op, {Value(size)}, {{"dtype", Value(dt)}}, dn);
    }
    ExpectKernelAcceptsWhatMetaAccepts("full", {Value(size), Value(Scalar::Int(1))}, {{"dtype", Value(dt)}}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("arange", {Value(Scalar::Int(4))}, {{"dtype", Value(dt)}}, dn);
    ExpectKernelAcceptsWhatMetaAccepts("eye", {Value(int64_t{3})}, {{"dtype", Value(dt)}}, dn);
    for (const char* op : {"empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"}) {
      ExpectKernelAcceptsWhatMetaAccepts(op, {In(a)}, {}, dn);
    }
    ExpectKernelAcceptsWhatMetaAccepts("full_like", {In(a), Value(Scalar::Int(1))}, {}, dn);
  }
}

using S = ScalarType;

TEST(MetaAgreementTest, InPlaceNnAndScatterKernelsAcceptWhatMetaAcceptsForEveryDtype) {
  const S all[] = {S::kBool,    S::kUInt8,   S::kInt8,          S::kInt16,      S::kInt32,   S::kInt64,
                   S::kFloat16, S::kBFloat16, S::kFloat32,      S::kFloat64,    S::kFloat8_e4m3fn, S::kFloat8_e5m2};
  for (S dt : all) {
    const std::string dn(DtypeName(dt));
    auto ones = [dt](Shape sizes) {
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      return FromValues(dt, sizes, std::vector<double>(static_cast<size_t>(n), 1.0));
    };
    auto check = [&](const std::string& op, std::vector<Value> args, std::vector<std::pair<std::string, Value>> kw) {
      const OpEntry* e = OpTable::Get().Find(op);
      ASSERT_NE(e, nullptr) << op;
      auto bound = BindArgs(e->schema, args, kw);
      if (!bound.ok()) return;
      if (!OpTable::Get().RunMeta(*e, *bound).ok()) return;
      OpRun r = RunOp(op, std::move(args), std::move(kw));
      EXPECT_TRUE(r.status.ok()) << op << " (" << dn << "): meta accepts but the kernel says " << r.status;
    };
    const Tensor a = ones({2, 3});
    const Tensor mask = FromValues(S::kBool, {2, 3}, {1, 0, 1, 0, 1, 1});
    const Tensor idx = FromValues(S::kInt64, {2, 3}, {0, 1, 1, 0, 1, 0});
    const Tensor idx1 = FromValues(S::kInt64, {2}, {1, 0});
    for (const char* op : {"add_.Tensor", "sub_.Tensor", "mul_.Tensor", "div_.Tensor"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), In(a)}, {});
    }
    for (const char* op : {"add_.Scalar", "sub_.Scalar", "mul_.Scalar", "div_.Scalar"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), Value(Scalar::Int(1))}, {});
    }
    Tensor c = ones({2, 3});
    check("clamp_", {In(c), Value(Scalar::Int(0)), Value(Scalar::Int(1))}, {});
    Tensor mf = ones({2, 3});
    check("masked_fill_.Scalar", {In(mf), In(mask), Value(Scalar::Int(0))}, {});
    for (const char* op : {"addcmul", "addcdiv", "addcmul_", "addcdiv_"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), In(a), In(a)}, {});
    }
    for (S src_dt : all) {
      Tensor dst = ones({2, 3});
      const Tensor src = FromValues(src_dt, {3}, {1, 1, 1});
      check("copy_", {In(dst), In(src)}, {});
    }
    Tensor z = ones({2, 3});
    check("zero_", {In(z)}, {});
    check("fill_.Scalar", {In(z), Value(Scalar::Int(1))}, {});
    check("uniform_", {In(z)}, {});
    check("normal_", {In(z)}, {});
    check("erf", {In(a)}, {});
    check("gelu", {In(a)}, {});
    check("softmax.int", {In(a), Value(int64_t{1})}, {});
    check("log_softmax.int", {In(a), Value(int64_t{0})}, {});
    check("scatter_add", {In(a), Value(int64_t{0}), In(idx), In(a)}, {});
    check("index_add", {In(a), Value(int64_t{1}), In(idx1), In(ones({2, 2}))}, {});
    check("index_put", {In(a), InList({&idx1}), In(ones({3})), Value(false)}, {});
    check("index_put", {In(a), InList({&idx1}), In(ones({3})), Value(true)}, {});
    check("index_put", {In(a), InList({&mask}), In(ones({1}))}, {});
    check("masked_scatter", {In(a), In(mask), In(ones({6}))}, {});
    check("select_backward", {In(ones({3})), Value(std::vector<int64_t>{2, 3}), Value(int64_t{0}), Value(int64_t{1})}, {});
    check("slice_backward", {In(a), Value(std::vector<int64_t>{4, 3}), Value(int64_t{0}), Value(int64_t{1}),
                             Value(int64_t{3}), Value(int64_t{1})}, {});
  }
}

}  // namespace
}  // namespace tensord::testing
