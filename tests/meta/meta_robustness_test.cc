// Meta functions on hostile arguments: every op in the table is called many
// times with arguments of the right kinds but extreme values (INT64_MIN/MAX,
// negative sizes, huge lists, NaN, every dtype and device). Nothing may
// crash; every success must produce metadata that TensorMeta::Validate
// accepts; and a view (alias_of >= 0) must never address memory outside the
// tensor it aliases. Deterministic (fixed seed), so a failure reproduces.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"

namespace tensord {
namespace {

using S = ScalarType;

// Lowest and highest element offsets a tensor with numel > 0 addresses.
std::pair<int64_t, int64_t> Extent(const TensorMeta& t) {
  int64_t hi = t.storage_offset;
  for (size_t i = 0; i < t.sizes.size(); ++i) hi += (t.sizes[i] - 1) * t.strides[i];
  return {t.storage_offset, hi};
}

class Fuzzer {
 public:
  explicit Fuzzer(uint32_t seed) : rng_(seed) {
    const Device devices[] = {kCPU, kCPU, kCPU, kMetaDevice};
    const std::vector<std::pair<Shape, Shape>> layouts = {
        {{}, {}},           {{3}, {1}},          {{0}, {1}},           {{2, 3}, {3, 1}},
        {{3, 2}, {1, 3}},   {{3, 4}, {1, 0}},    {{2, 3, 4}, {12, 4, 1}}, {{4, 2, 3}, {1, 12, 4}},
        {{1, 1}, {5, 7}},   {{0, 3}, {3, 1}},    {{2, 1, 3, 1}, {3, 3, 1, 1}}, {{5}, {2}},
    };
    for (const auto& [sizes, strides] : layouts) {
      for (int d = 0; d < kNumScalarTypes; ++d) {
        TensorMeta t;
        t.sizes = sizes;
        t.strides = strides;
        t.storage_offset = Pick({0, 0, 3});
        t.dtype = static_cast<S>(d);
        t.device = devices[rng_() % 4];
        pool_.push_back(t);
      }
    }
  }

  int64_t Int() {
    static const int64_t kInts[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                    int64_t{1} << 40, -(int64_t{1} << 40), -3, -2, -1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 64};
    return kInts[rng_() % (sizeof(kInts) / sizeof(kInts[0]))];
  }

  Value Arg(const Argument& a) {
    if (a.optional && rng_() % 4 == 0) return Value();
    switch (a.type) {
      case ArgType::kTensor:
        return Value(&pool_[rng_() % pool_.size()]);
      case ArgType::kTensorList:
      case ArgType::kOptionalTensorList: {
        TensorList list;
        const int n = rng_() % 5;
        for (int i = 0; i < n; ++i) {
          const bool none = a.type == ArgType::kOptionalTensorList && rng_() % 3 == 0;
          list.push_back(none ? nullptr : &pool_[rng_() % pool_.size()]);
        }
        return Value(std::move(list));
      }
      case ArgType::kScalar:
        switch (rng_() % 3) {
          case 0: return Value(Scalar::Int(Int()));
          case 1: return Value(Scalar::Bool(rng_() % 2));
          default:
            return Value(Scalar::Float(Pick({0.5, -1.5, 1e300, -1e300, std::numeric_limits<double>::infinity(),
                                             std::nan(""), 1e-20, 3.0})));
        }
      case ArgType::kInt:
        return Value(Int());
      case ArgType::kIntList: {
        std::vector<int64_t> l;
        const int n = rng_() % 16 == 0 ? 70 : rng_() % 6;
        for (int i = 0; i < n; ++i) l.push_back(rng_() % 2 ? Int() : static_cast<int64_t>(rng_() % 5) - 1);
        return Value(std::move(l));
      }
      case ArgType::kFloat:
        return Value(Pick({0.5, -1.0, std::nan("")}));
      case ArgType::kFloatList:
        return Value(std::vector<double>{1.0});
      case ArgType::kBool:
        return Value(static_cast<bool>(rng_() % 2));
      case ArgType::kString:
        return Value("x");
      case ArgType::kDtype:
        return Value(static_cast<S>(rng_() % kNumScalarTypes));
      case ArgType::kDevice:
        return Value(Pick({kCPU, kMetaDevice, Device{DeviceType::kCUDA, 1}}));
    }
    return Value();
  }

 private:
  template <typename T>
  T Pick(std::initializer_list<T> xs) {
    return *(xs.begin() + rng_() % xs.size());
  }

  std::mt19937 rng_;
  std::vector<TensorMeta> pool_;
};

TEST(MetaRobustness, ExtremeArgumentsNeverCrashOrEscapeStorage) {
  Fuzzer fuzz(20240601);
  const OpTable& table = OpTable::Get();
  int ok = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    for (const OpEntry& op : table.entries()) {
      std::vector<Value> args;
      for (const Argument& a : op.schema.arguments) args.push_back(fuzz.Arg(a));
      absl::StatusOr<MetaResult> r = table.RunMeta(op, args);
      if (!r.ok()) {
        ++refused;
        EXPECT_NE(KindOf(r.status()), ErrorKind::kInternal) << op.full_name() << ": " << r.status();
        continue;
      }
      ++ok;
      ASSERT_EQ(r->outputs.size(), r->alias_of.size()) << op.full_name();
      for (size_t i = 0; i < r->outputs.size(); ++i) {
        const TensorMeta& out = r->outputs[i];
        EXPECT_TRUE(out.Validate("output").ok()) << op.full_name() << " " << out.ToString() << " " << out.Validate("output");
        const int alias = r->alias_of[i];
        if (alias < 0) {
          EXPECT_EQ(out.storage_offset, 0) << op.full_name();
          continue;
        }
        ASSERT_LT(alias, static_cast<int>(args.size())) << op.full_name();
        ASSERT_TRUE(args[alias].is_tensor()) << op.full_name();
        const TensorMeta& in = args[alias].tensor();
        EXPECT_EQ(out.dtype, in.dtype) << op.full_name();
        EXPECT_EQ(out.device, in.device) << op.full_name();
        if (out.numel() > 0) {
          ASSERT_GT(in.numel(), 0) << op.full_name() << ": a non-empty view of an empty tensor";
          const auto [out_lo, out_hi] = Extent(out);
          const auto [in_lo, in_hi] = Extent(in);
          EXPECT_GE(out_lo, in_lo) << op.full_name() << " " << out.ToString() << " of " << in.ToString();
          EXPECT_LE(out_hi, in_hi) << op.full_name() << " " << out.ToString() << " of " << in.ToString();
        }
      }
    }
  }
  // The fuzzer reaches both outcomes for the table as a whole.
  EXPECT_GT(ok, 1000);
  EXPECT_GT(refused, 1000);
}

TEST(MetaRobustness, WrongKindsAndBadMetadataAreErrorsNotCrashes) {
  const OpTable& table = OpTable::Get();
  TensorMeta bad;  // sizes and strides of different lengths
  bad.sizes = {2, 3};
  bad.strides = {1};
  TensorMeta negative = TensorMeta::Contiguous({2, 3}, S::kFloat32, kCPU);
  negative.strides = {-3, 1};
  for (const OpEntry& op : table.entries()) {
    // Every argument an int: the meta function is called directly, skipping
    // ValidateArgs, and must still answer with a status.
    std::vector<Value> ints(op.schema.arguments.size(), Value(int64_t{1}));
    absl::StatusOr<MetaResult> r = op.meta(op.schema.name, ints);
    (void)r;
    std::vector<Value> none(op.schema.arguments.size(), Value());
    r = op.meta(op.schema.name, none);
    (void)r;
    std::vector<Value> too_few;
    r = op.meta(op.schema.name, too_few);
    EXPECT_FALSE(r.ok()) << op.full_name();
    std::vector<Value> with_bad;
    for (const Argument& a : op.schema.arguments) {
      if (a.type == ArgType::kTensor) {
        with_bad.push_back(Value(&bad));
      } else if (a.type == ArgType::kTensorList || a.type == ArgType::kOptionalTensorList) {
        with_bad.push_back(Value(TensorList{&negative}));
      } else if (a.default_value) {
        with_bad.push_back(*a.default_value);
      } else {
        with_bad.push_back(Value(int64_t{0}));
      }
    }
    r = table.RunMeta(op, with_bad);
    if (op.has(kFactory)) continue;
    EXPECT_FALSE(r.ok()) << op.full_name() << " accepted inconsistent metadata";
  }
}

TEST(MetaRobustness, RankIsLimited) {
  const OpTable& table = OpTable::Get();
  TensorMeta t = TensorMeta::Contiguous(Shape(64, 1), S::kFloat32, kCPU);
  const OpEntry* unsqueeze = table.Find("unsqueeze");
  ASSERT_NE(unsqueeze, nullptr);
  absl::StatusOr<MetaResult> r = table.RunMeta(*unsqueeze, {Value(&t), Value(int64_t{0})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unsqueeze: tensors with more than 64 dimensions are not supported (got 65)");
  const OpEntry* zeros = table.Find("zeros");
  r = table.RunMeta(*zeros, {Value(std::vector<int64_t>(65, 1)), Value(), Value()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "zeros: tensors with more than 64 dimensions are not supported (got 65)");
}

}  // namespace
}  // namespace tensord
