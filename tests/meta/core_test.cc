// Tests of meta's core: dtypes and promotion, devices, TensorMeta invariants,
// the schema parser and argument binding, and the op table itself.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>

#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord {
namespace {

using S = ScalarType;

TEST(Dtype, PromotionTableMatchesPyTorch) {
  // Expected values printed by torch.promote_types (PyTorch 1.13).
  EXPECT_EQ(*PromoteTypes(S::kBFloat16, S::kFloat16), S::kFloat32);
  EXPECT_EQ(*PromoteTypes(S::kUInt8, S::kInt8), S::kInt16);
  EXPECT_EQ(*PromoteTypes(S::kUInt8, S::kInt32), S::kInt32);
  EXPECT_EQ(*PromoteTypes(S::kBool, S::kUInt8), S::kUInt8);
  EXPECT_EQ(*PromoteTypes(S::kInt64, S::kFloat16), S::kFloat16);
  EXPECT_EQ(*PromoteTypes(S::kInt32, S::kInt64), S::kInt64);
  EXPECT_EQ(*PromoteTypes(S::kFloat32, S::kFloat64), S::kFloat64);
  EXPECT_EQ(*PromoteTypes(S::kBFloat16, S::kFloat32), S::kFloat32);
  EXPECT_EQ(*PromoteTypes(S::kFloat8_e4m3fn, S::kFloat8_e4m3fn), S::kFloat8_e4m3fn);
  absl::StatusOr<S> f8 = PromoteTypes(S::kFloat8_e4m3fn, S::kFloat32);
  ASSERT_FALSE(f8.ok());
  EXPECT_EQ(f8.status().message(),
            "Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and Float");
  // Symmetric for every pair.
  for (int a = 0; a < kNumScalarTypes; ++a) {
    for (int b = 0; b < kNumScalarTypes; ++b) {
      auto ab = PromoteTypes(static_cast<S>(a), static_cast<S>(b));
      auto ba = PromoteTypes(static_cast<S>(b), static_cast<S>(a));
      ASSERT_EQ(ab.ok(), ba.ok());
      if (ab.ok()) {
        EXPECT_EQ(*ab, *ba) << a << " " << b;
      }
    }
  }
}

TEST(Dtype, NamesParseAndPrint) {
  EXPECT_EQ(DtypeName(S::kBFloat16), "bfloat16");
  EXPECT_EQ(*ParseDtype("float"), S::kFloat32);
  EXPECT_EQ(*ParseDtype("torch.long"), S::kInt64);
  EXPECT_EQ(*ParseDtype("float8_e5m2"), S::kFloat8_e5m2);
  EXPECT_FALSE(ParseDtype("complex64").ok());
  EXPECT_EQ(ItemSize(S::kFloat16), 2);
  EXPECT_FALSE(IsValidScalarType(12));
  EXPECT_FALSE(IsValidScalarType(-1));
}

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(ParseDevice("cuda:3")->ToString(), "cuda:3");
  EXPECT_EQ(ParseDevice("cuda")->index, 0);
  EXPECT_TRUE(ParseDevice("meta")->is_meta());
  EXPECT_FALSE(ParseDevice("cuda:-1").ok());
  EXPECT_FALSE(ParseDevice("tpu").ok());
  // PyTorch's slot for an out-of-tree device (tensord's test device).
  EXPECT_EQ(ParseDevice("privateuseone")->ToString(), "privateuseone:0");
  EXPECT_EQ(ParseDevice("privateuseone:2")->index, 2);
  EXPECT_TRUE(ParseDevice("privateuseone:0")->indexed());
  EXPECT_FALSE(ParseDevice("privateuseone:x").ok());
  // PyTorch's grammar: "cpu:0" and "meta:0" name the one cpu and meta device;
  // an index has no leading zero, sign or space, and fits int32.
  EXPECT_EQ(*ParseDevice("cpu:0"), kCPU);
  EXPECT_TRUE(ParseDevice("meta:0")->is_meta());
  EXPECT_EQ(ParseDevice("cuda:0")->index, 0);
  EXPECT_EQ(ParseDevice("cuda:10")->index, 10);
  for (const char* bad : {"cuda:01", "cuda: 1", "cuda:+1", "cuda:", "cuda:1 ", "cpu:1", "meta:2", "cuda:99999999999"}) {
    absl::StatusOr<Device> d = ParseDevice(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("Invalid device string: '"), absl::string_view::npos) << d.status();
  }
  EXPECT_NE(ParseDevice("xpu:0").status().message().find("Expected one of cpu, cuda, meta, privateuseone device type"),
            absl::string_view::npos);
}

TEST(TensorMeta, ContiguityAndStorage) {
  TensorMeta m = TensorMeta::Contiguous({2, 3, 4}, S::kFloat32, kCPU);
  EXPECT_EQ(m.strides, (Shape{12, 4, 1}));
  EXPECT_TRUE(m.is_contiguous());
  EXPECT_EQ(*m.StorageBytesNeeded(), 96);
  TensorMeta t = m;
  t.sizes = {2, 4, 3};
  t.strides = {12, 1, 4};
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.is_non_overlapping_and_dense());
  TensorMeta e = m;
  e.strides = {0, 4, 1};  // expanded
  EXPECT_FALSE(e.is_non_overlapping_and_dense());
  EXPECT_EQ(*e.StorageBytesNeeded(), 48);
  TensorMeta z = TensorMeta::Contiguous({0, 5}, S::kInt64, kCPU);
  z.storage_offset = 3;
  EXPECT_EQ(*z.StorageBytesNeeded(), 24);
  EXPECT_EQ(ContiguousStrides({2, 0, 3}), (Shape{3, 3, 1}));
}

TEST(TensorMeta, ValidateRejectsHostileMetadata) {
  TensorMeta m = TensorMeta::Contiguous({4}, S::kFloat32, kCPU);
  m.sizes = {-1};
  EXPECT_FALSE(m.Validate("x").ok());
  m.sizes = {1ll << 62, 1ll << 62};
  m.strides = {1, 1};
  EXPECT_FALSE(m.Validate("x").ok());
  m.sizes = {4};
  m.strides = {1ll << 62};
  EXPECT_FALSE(m.Validate("x").ok());
  m.strides = {1};
  m.storage_offset = -2;
  EXPECT_FALSE(m.Validate("x").ok());
  m.storage_offset = 0;
  m.dtype = static_cast<S>(99);
  EXPECT_FALSE(m.Validate("x").ok());
}

TEST(TensorMeta, StridedGivesContiguousStridesAndChecksAUsersLayout) {
  absl::StatusOr<TensorMeta> c = TensorMeta::Strided("x", {2, 0, 3}, std::nullopt, 0, S::kFloat32, kMetaDevice);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->strides, (Shape{3, 3, 1}));
  EXPECT_EQ(*c->StorageBytesNeeded(), 0);
  absl::StatusOr<TensorMeta> v = TensorMeta::Strided("x", {2, 3}, Shape{1, 4}, 5, S::kInt16, kCPU);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->strides, (Shape{1, 4}));
  EXPECT_EQ(*v->StorageBytesNeeded(), (5 + 1 + 1 * 1 + 2 * 4) * 2);
  EXPECT_FALSE(v->is_contiguous());

  auto error = [](Shape sizes, std::optional<Shape> strides, int64_t offset) {
    absl::StatusOr<TensorMeta> r = TensorMeta::Strided("TensorMeta", std::move(sizes), std::move(strides), offset,
                                                       S::kFloat32, kMetaDevice);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(KindOf(r.status()), ErrorKind::kRuntime);
    return std::string(r.status().message());
  };
  EXPECT_EQ(error(Shape(65, 1), std::nullopt, 0),
            "TensorMeta: tensors with more than 64 dimensions are not supported (got 65)");
  EXPECT_EQ(error({2, -1}, Shape{1}, 0), "TensorMeta: Trying to create tensor with negative dimension -1: [2, -1]");
  EXPECT_EQ(error({2, 3}, Shape{1}, 0),
            "TensorMeta: dimensionality of sizes (2) must match dimensionality of strides (1)");
  EXPECT_EQ(error({2, 3}, Shape{1, -1}, 0), "TensorMeta: negative strides are not supported, got strides=[1, -1]");
  EXPECT_EQ(error({2}, std::nullopt, -1), "TensorMeta: storage_offset must be non-negative, got -1");
  EXPECT_EQ(error({1ll << 40, 1ll << 40}, Shape{1ll << 40, 1}, 0),
            "TensorMeta: Storage size calculation overflowed with sizes=[1099511627776, 1099511627776] and "
            "strides=[1099511627776, 1] (storage_offset 0)");
  // An element count past int64 overflows even where the strides address 4 bytes.
  EXPECT_EQ(error({1ll << 40, 1ll << 40}, Shape{0, 0}, 0),
            "TensorMeta: Storage size calculation overflowed with sizes=[1099511627776, 1099511627776] and "
            "strides=[0, 0] (storage_offset 0)");
  EXPECT_EQ(error({4}, Shape{1}, INT64_MAX), "TensorMeta: Storage size calculation overflowed with sizes=[4] and "
                                              "strides=[1] (storage_offset 9223372036854775807)");
  // Contiguous strides of an empty tensor are still products of its sizes.
  EXPECT_EQ(error({0, 1ll << 40, 1ll << 40}, std::nullopt, 0),
            "TensorMeta: Storage size calculation overflowed with sizes=[0, 1099511627776, 1099511627776]");
}

// An expanded view is valid over 4 bytes while its dense size is 2**64
// bytes: DenseBytes refuses what StorageBytesNeeded accepts.
TEST(TensorMeta, DenseBytesOfAnExpandedViewIsChecked) {
  TensorMeta m = TensorMeta::Contiguous({1ll << 31, 1ll << 31}, S::kFloat32, kCPU);
  m.strides = {0, 0};
  ASSERT_TRUE(m.Validate("x").ok());
  EXPECT_EQ(*m.StorageBytesNeeded(), 4);
  absl::StatusOr<int64_t> b = m.DenseBytes("fetch");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "fetch: tensor of 4611686018427387904 elements x 4 bytes overflows int64");
  m.dtype = S::kUInt8;
  EXPECT_EQ(*m.DenseBytes("fetch"), 1ll << 62);
  EXPECT_EQ(*CheckedBytes("scratch", 3, 16), 48);
  EXPECT_FALSE(CheckedBytes("scratch", 1ll << 60, 16).ok());
  EXPECT_FALSE(CheckedBytes("scratch", -1, 16).ok());
  EXPECT_EQ(SaturatingBytes(1ll << 62, 4), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(SaturatingBytes(6, 4), 24);
}

TEST(TensorMeta, WrapDimMessage) {
  EXPECT_EQ(*WrapDim("sum", -1, 3), 2);
  EXPECT_EQ(*WrapDim("sum", 0, 0), 0);
  absl::StatusOr<int64_t> bad = WrapDim("sum", 2, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(KindOf(bad.status()), ErrorKind::kIndex);
  EXPECT_EQ(bad.status().message(), "sum: Dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

TEST(Errors, KindsSurviveRebuilding) {
  EXPECT_EQ(KindOf(TypeErr("x")), ErrorKind::kType);
  EXPECT_EQ(KindOf(RuntimeErr("x")), ErrorKind::kRuntime);
  EXPECT_EQ(KindOf(MakeError(ErrorKind::kType, "x")), ErrorKind::kType);
  absl::Status s = WithContext(NotImplementedErr("m"), "op: ");
  EXPECT_EQ(KindOf(s), ErrorKind::kNotImplemented);
  EXPECT_EQ(s.message(), "op: m");
}

TEST(Schema, ParsesAndRoundTrips) {
  auto s = ParseSchema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "add");
  EXPECT_EQ(s->overload, "Tensor");
  ASSERT_EQ(s->arguments.size(), 3u);
  EXPECT_TRUE(s->arguments[2].kwarg_only);
  EXPECT_EQ(s->arguments[2].default_value->scalar().to_int(), 1);
  EXPECT_EQ(s->ToString(), "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");

  auto v = ParseSchema("view(Tensor(a) self, SymInt[] size) -> Tensor(a)");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ReturnAliases(), std::vector<int>{0});

  auto m = ParseSchema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->returns.size(), 2u);
  EXPECT_EQ(m->returns[1].name, "indices");
  EXPECT_EQ(ParseSchema(m->ToString())->ToString(), m->ToString());

  auto r = ParseSchema("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->arguments[1].optional);
  EXPECT_EQ(r->arguments[1].fixed_len, 1);
  EXPECT_FALSE(ParseSchema("nonsense").ok());
  // Only tensors carry alias annotations (printing one on an int threw).
  EXPECT_FALSE(ParseSchema("f(int(a) x) -> Tensor").ok());
  EXPECT_FALSE(ParseSchema("f(Scalar(a!) x) -> Tensor").ok());
  // Leading whitespace before the name (an out-of-range substr before).
  EXPECT_FALSE(ParseSchema("\f\fx()->").ok());
  EXPECT_TRUE(ParseSchema("  neg(Tensor self) -> Tensor").ok());
  // A fixed list length sizes the broadcast default (a negative one threw).
  EXPECT_FALSE(ParseSchema("f(int[-2] k=3) -> Tensor").ok());
  EXPECT_FALSE(ParseSchema("f(int[2000000000] k=3) -> Tensor").ok());
  EXPECT_TRUE(ParseSchema("f(int[3] k=3) -> Tensor").ok());
  EXPECT_FALSE(ParseSchema("f(Blob x) -> Tensor").ok());
}

TEST(Schema, BindsLikePyTorch) {
  auto s = *ParseSchema("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  TensorMeta t = TensorMeta::Contiguous({2, 3}, S::kFloat32, kCPU);
  auto b = BindArgs(s, {Value(&t), Value(int64_t{1})}, {{"keepdim", Value(true)}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[1].int_list(), Shape{1});  // an int for int[1]
  EXPECT_TRUE((*b)[2].to_bool());
  EXPECT_TRUE((*b)[3].is_none());
  EXPECT_TRUE(ValidateArgs(s, *b).ok());

  auto missing = BindArgs(*ParseSchema("mm(Tensor self, Tensor mat2) -> Tensor"), {Value(&t)}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(KindOf(missing.status()), ErrorKind::kType);
  EXPECT_EQ(missing.status().message(), "mm() missing required argument 'mat2'");

  auto kwonly = BindArgs(s, {Value(&t), Value(int64_t{0}), Value(false), Value(S::kFloat64)}, {});
  ASSERT_FALSE(kwonly.ok());
  EXPECT_EQ(kwonly.status().message(), "sum() takes 3 positional arguments but 4 were given");

  auto unknown = BindArgs(s, {Value(&t)}, {{"axis", Value(int64_t{0})}});
  EXPECT_EQ(unknown.status().message(), "sum() got an unexpected keyword argument 'axis'");

  // A Python number for a Scalar becomes a Scalar; a string for a Device is parsed.
  auto f = *ParseSchema("full(int[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None) -> Tensor");
  auto fb = BindArgs(f, {Value(std::vector<int64_t>{2}), Value(2.5)}, {{"device", Value("meta")}});
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_EQ((*fb)[1].kind(), Value::Kind::kScalar);
  EXPECT_TRUE((*fb)[3].device().is_meta());

  // Wrong kinds are TypeErrors that name the argument.
  auto wrong = BindArgs(*ParseSchema("mm(Tensor self, Tensor mat2) -> Tensor"), {Value(&t), Value(int64_t{3})}, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(KindOf(wrong.status()), ErrorKind::kType);
  EXPECT_EQ(wrong.status().message(), "mm(): argument 'mat2' must be Tensor, not int");
  EXPECT_FALSE(ValidateArgs(f, {Value(int64_t{2}), Value(2.5), Value(), Value()}).ok());
}

TEST(OpTable, EveryBuiltinSchemaParsesAndNamesAreUnique) {
  const OpTable& t = OpTable::Get();
  ASSERT_GT(t.size(), 100u);
  for (const OpEntry& e : t.entries()) {
    EXPECT_EQ(t.Find(e.full_name()), &e);
    EXPECT_NE(e.meta, nullptr) << e.full_name();
    // Canonical text re-parses to itself.
    EXPECT_EQ(ParseSchema(e.schema_text)->ToString(), e.schema_text);
  }
  EXPECT_EQ(t.Overloads("add").size(), 2u);
  EXPECT_TRUE(t.Find("view")->is_view());
  EXPECT_FALSE(t.Find("add.Tensor")->is_view());
  EXPECT_TRUE(t.Find("add_.Tensor")->is_inplace());
  EXPECT_TRUE(t.Find("copy_")->is_inplace());
  EXPECT_FALSE(t.Find("add.Tensor")->is_inplace());
  EXPECT_FALSE(t.Find("view")->is_inplace());
  EXPECT_EQ(t.Find("nope"), nullptr);
}

TEST(OpTable, DigestAndDiff) {
  const OpTable& t = OpTable::Get();
  EXPECT_EQ(t.digest(), OpTable(BuiltinOpDefs()).digest());
  std::vector<std::string> ours = t.Describe();
  std::vector<std::string> theirs = ours;
  theirs[1] = "1 zeros(int[] size) -> Tensor";
  theirs.pop_back();
  EXPECT_EQ(DiffOpTables(ours, ours, "client", "daemon"), "");
  std::string d = DiffOpTables(ours, theirs, "client", "daemon");
  EXPECT_NE(d.find("op 1: client has '1 zeros(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor', "
                   "daemon has '1 zeros(int[] size) -> Tensor'"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("daemon lacks"), std::string::npos) << d;
}

}  // namespace
}  // namespace tensord
