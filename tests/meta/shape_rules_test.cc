// Tests of the shared shape rules (tensord/meta/shape_rules.h): broadcasting,
// PyTorch's result_type, the output layout of elementwise ops, the
// preserve-format layout and reduction masks. Every expected value is a
// literal that PyTorch 1.13 printed for the same inputs (the comment next to
// each shows the torch expression).
#include "tensord/meta/shape_rules.h"

#include <vector>

#include "gtest/gtest.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

using S = ScalarType;

TensorMeta Strided(Shape sizes, Shape strides, S dtype = S::kFloat32) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.dtype = dtype;
  return m;
}

TensorMeta Dense(Shape sizes, S dtype = S::kFloat32) { return TensorMeta::Contiguous(std::move(sizes), dtype, kCPU); }

// ---- broadcasting ----------------------------------------------------------

TEST(BroadcastShapes, NumPyRules) {
  EXPECT_EQ(*BroadcastShapes("add", {Shape{5, 1, 3}, Shape{4, 1}}), (Shape{5, 4, 3}));
  EXPECT_EQ(*BroadcastShapes("add", {Shape{}, Shape{2, 3}}), (Shape{2, 3}));
  EXPECT_EQ(*BroadcastShapes("add", {Shape{0}, Shape{1}}), (Shape{0}));
  EXPECT_EQ(*BroadcastShapes("add", {Shape{2, 1}, Shape{1, 0}}), (Shape{2, 0}));
  // torch.broadcast_shapes((2,1,1), (3,1), (4,)) == (2, 3, 4)
  EXPECT_EQ(*BroadcastShapes("where", {Shape{2, 1, 1}, Shape{3, 1}, Shape{4}}), (Shape{2, 3, 4}));
  EXPECT_EQ(*BroadcastShapes("add", {}), Shape{});
}

TEST(BroadcastShapes, ErrorTextIsPyTorchsPrefixedByTheOpWithTheShapes) {
  // torch.ones(3) + torch.ones(4)
  absl::StatusOr<Shape> r = BroadcastShapes("add", {Shape{3}, Shape{4}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kRuntime);
  EXPECT_EQ(r.status().message(),
            "add: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0 (shapes [3] "
            "and [4])");
  // torch.ones(2, 1, 3) + torch.ones(4, 2)
  r = BroadcastShapes("mul", {Shape{2, 1, 3}, Shape{4, 2}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "mul: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 2 (shapes "
            "[2, 1, 3] and [4, 2])");
  // [0] with [3]: 0 is not a singleton
  r = BroadcastShapes("add", {Shape{0}, Shape{3}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "add: The size of tensor a (0) must match the size of tensor b (3) at non-singleton dimension 0 (shapes [0] "
            "and [3])");
}

TEST(BroadcastStrides, ZeroForNewAndExpandedDims) {
  const TensorMeta t = Strided({3, 1}, {1, 7});
  EXPECT_EQ(BroadcastStrides(t, Shape{2, 3, 4}), (Shape{0, 1, 0}));
  EXPECT_EQ(BroadcastStrides(t, Shape{3, 1}), (Shape{1, 7}));  // a size-1 dim that stays 1 keeps its stride
}

// ---- type promotion ----------------------------------------------------------

ScalarType Promote(std::vector<PromotionOperand> ops) {
  absl::StatusOr<ScalarType> r = ResultType("add", ops);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : S::kBool;
}

TEST(ResultType, DimensionedTensorsUseThePromotionTable) {
  const TensorMeta bf16 = Dense({2}, S::kBFloat16), f16 = Dense({2}, S::kFloat16);
  const TensorMeta u8 = Dense({2}, S::kUInt8), i8 = Dense({2}, S::kInt8), i16 = Dense({2}, S::kInt16);
  const TensorMeta f32 = Dense({2}, S::kFloat32), i64 = Dense({2}, S::kInt64), b = Dense({2}, S::kBool);
  EXPECT_EQ(Promote({{&bf16}, {&f16}}), S::kFloat32);  // bfloat16 + float16
  EXPECT_EQ(Promote({{&u8}, {&i8}}), S::kInt16);       // uint8 + int8
  EXPECT_EQ(Promote({{&i16}, {&u8}}), S::kInt16);
  EXPECT_EQ(Promote({{&i64}, {&f16}}), S::kFloat16);   // integer + floating -> the floating one
  EXPECT_EQ(Promote({{&b}, {&u8}}), S::kUInt8);
  EXPECT_EQ(Promote({{&b}, {&b}}), S::kBool);
  EXPECT_EQ(Promote({{&f32}, {&i64}}), S::kFloat32);
}

TEST(ResultType, ZeroDimTensorsOnlyRaiseTheCategory) {
  const TensorMeta i8 = Dense({2}, S::kInt8), f16 = Dense({2}, S::kFloat16), b = Dense({2}, S::kBool);
  const TensorMeta u8 = Dense({2}, S::kUInt8), bf16 = Dense({2}, S::kBFloat16), i32 = Dense({2}, S::kInt32);
  const TensorMeta z_i64 = Dense({}, S::kInt64), z_f64 = Dense({}, S::kFloat64), z_i8 = Dense({}, S::kInt8);
  const TensorMeta z_i32 = Dense({}, S::kInt32), z_f16 = Dense({}, S::kFloat16), z_b = Dense({}, S::kBool);
  EXPECT_EQ(Promote({{&i8}, {&z_i64}}), S::kInt8);      // ones(2, int8) + tensor(1)
  EXPECT_EQ(Promote({{&u8}, {&z_i8}}), S::kUInt8);      // ones(2, uint8) + tensor(-1, int8)
  EXPECT_EQ(Promote({{&i8}, {&z_f64}}), S::kFloat64);   // the category rises: int8 + float64 0-dim -> float64
  EXPECT_EQ(Promote({{&f16}, {&z_f64}}), S::kFloat16);  // same category: the dimensioned tensor wins
  EXPECT_EQ(Promote({{&b}, {&z_i64}}), S::kInt64);
  EXPECT_EQ(Promote({{&b}, {&z_i8}}), S::kInt8);
  EXPECT_EQ(Promote({{&i32}, {&z_b}}), S::kInt32);
  EXPECT_EQ(Promote({{&bf16}, {&z_f16}}), S::kBFloat16);
  EXPECT_EQ(Promote({{&z_i8}, {&z_i32}}), S::kInt32);   // two 0-dim tensors promote normally
  const TensorMeta z_bf16 = Dense({}, S::kBFloat16);
  EXPECT_EQ(Promote({{&z_bf16}, {&z_f16}}), S::kFloat32);
}

TEST(ResultType, PythonScalarsAreWrappedNumbers) {
  const TensorMeta i8 = Dense({2}, S::kInt8), b = Dense({2}, S::kBool), f16 = Dense({2}, S::kFloat16);
  const TensorMeta z_i8 = Dense({}, S::kInt8), z_u8 = Dense({}, S::kUInt8);
  const Scalar two = Scalar::Int(2), big = Scalar::Int(300), half = Scalar::Float(2.5), yes = Scalar::Bool(true);
  EXPECT_EQ(Promote({{&i8}, {nullptr, &half}}), S::kFloat32);  // int tensor + 2.5 -> default float dtype
  EXPECT_EQ(Promote({{&i8}, {nullptr, &big}}), S::kInt8);      // width never rises: int8 + 300 -> int8
  EXPECT_EQ(Promote({{&b}, {nullptr, &two}}), S::kInt64);      // bool + 2 -> int64
  EXPECT_EQ(Promote({{&b}, {nullptr, &half}}), S::kFloat32);
  EXPECT_EQ(Promote({{&b}, {nullptr, &yes}}), S::kBool);
  EXPECT_EQ(Promote({{&f16}, {nullptr, &half}}), S::kFloat16);
  EXPECT_EQ(Promote({{&z_i8}, {nullptr, &two}}), S::kInt8);     // tensor(1, int8) + 5
  EXPECT_EQ(Promote({{&z_i8}, {nullptr, &half}}), S::kFloat32); // tensor(1, int8) + 5.0
  EXPECT_EQ(Promote({{&z_u8}, {nullptr, &half}}), S::kFloat32);
  EXPECT_EQ(Promote({{nullptr, &yes}, {nullptr, &two}}), S::kInt64);  // where(c, True, 2)
  EXPECT_EQ(Promote({{nullptr, &two}, {nullptr, &half}}), S::kFloat32);
}

TEST(ResultType, Float8DoesNotPromoteImplicitly) {
  const TensorMeta e4m3 = Dense({2}, S::kFloat8_e4m3fn), e5m2 = Dense({2}, S::kFloat8_e5m2), f32 = Dense({2});
  absl::StatusOr<ScalarType> r = ResultType("add", std::vector<PromotionOperand>{{&e4m3}, {&f32}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kRuntime);
  EXPECT_EQ(r.status().message(),
            "add: Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and Float");
  r = ResultType("mul", std::vector<PromotionOperand>{{&e5m2}, {&e4m3}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "mul: Promotion for Float8 Types is not supported, attempted to promote Float8_e5m2 and Float8_e4m3fn");
  EXPECT_EQ(Promote({{&e4m3}, {&e4m3}}), S::kFloat8_e4m3fn);
}

// ---- elementwise output layout ---------------------------------------------------

Shape OutStrides(Shape sizes, std::vector<const TensorMeta*> inputs) {
  return ElementwiseOutputStrides(sizes, inputs);
}

TEST(ElementwiseOutputStrides, FollowsThePermutationOfTheInputs) {
  const TensorMeta p = Strided({4, 2, 3}, {1, 12, 4});  // empty(2, 3, 4).permute(2, 0, 1)
  const TensorMeta scalar = Dense({}, S::kInt64);        // a wrapped Python number
  EXPECT_EQ(OutStrides({4, 2, 3}, {&p}), (Shape{1, 12, 4}));           // p.neg()
  EXPECT_EQ(OutStrides({4, 2, 3}, {&p, &p}), (Shape{1, 12, 4}));       // p + p
  EXPECT_EQ(OutStrides({4, 2, 3}, {&p, &scalar}), (Shape{1, 12, 4}));  // p + 1

  const TensorMeta t = Strided({3, 4}, {1, 3});  // empty(4, 3).t()
  const TensorMeta c = Dense({3, 4});
  EXPECT_EQ(OutStrides({3, 4}, {&t, &c}), (Shape{1, 3}));  // the first input decides: t + c
  EXPECT_EQ(OutStrides({3, 4}, {&c, &t}), (Shape{4, 1}));  // c + t
}

TEST(ElementwiseOutputStrides, BroadcastDimsDoNotDecide) {
  const TensorMeta e = Strided({3, 4}, {1, 0});  // empty(3, 1).expand(3, 4)
  const TensorMeta t = Strided({3, 4}, {1, 3});
  const TensorMeta scalar = Dense({});
  EXPECT_EQ(OutStrides({3, 4}, {&e, &t}), (Shape{1, 3}));   // e + t: e's stride-0 dim defers to t
  EXPECT_EQ(OutStrides({3, 4}, {&t, &e}), (Shape{1, 3}));
  EXPECT_EQ(OutStrides({3, 4}, {&e, &scalar}), (Shape{4, 1}));  // e + 1
  const TensorMeta row = Dense({4});
  EXPECT_EQ(OutStrides({3, 4}, {&row, &t}), (Shape{1, 3}));  // ones(4) + t
}

TEST(ElementwiseOutputStrides, SizeOneDimsAndTies) {
  // empty_strided((2, 3, 1, 1), (3, 1, 3, 3)): contiguous once size-1 dims
  // are ignored, so a same-shape op gives plain contiguous strides, but with
  // a wrapped scalar the sort keeps the input's strides.
  const TensorMeta nc11 = Strided({2, 3, 1, 1}, {3, 1, 3, 3});
  const TensorMeta scalar = Dense({});
  EXPECT_EQ(OutStrides({2, 3, 1, 1}, {&nc11}), (Shape{3, 1, 1, 1}));           // a.neg()
  EXPECT_EQ(OutStrides({2, 3, 1, 1}, {&nc11, &nc11}), (Shape{3, 1, 1, 1}));    // a + a
  EXPECT_EQ(OutStrides({2, 3, 1, 1}, {&nc11, &scalar}), (Shape{3, 1, 3, 3}));  // a + 1

  // Equal strides: the smaller dim goes first.
  const TensorMeta eq22 = Strided({2, 2}, {1, 1});
  EXPECT_EQ(OutStrides({2, 2}, {&scalar, &eq22}), (Shape{2, 1}));
  const TensorMeta eq23 = Strided({2, 3}, {1, 1});
  EXPECT_EQ(OutStrides({2, 3}, {&eq23, &scalar}), (Shape{1, 2}));
  const TensorMeta eq32 = Strided({3, 2}, {1, 1});
  EXPECT_EQ(OutStrides({3, 2}, {&eq32, &scalar}), (Shape{2, 1}));
}

TEST(ElementwiseOutputStrides, ChannelsLastAndEmptyTensors) {
  // channels-last with an odd stride on its size-1 dim
  const TensorMeta cl = Strided({2, 3, 1, 5}, {15, 1, 999, 3});
  const TensorMeta scalar = Dense({});
  EXPECT_EQ(OutStrides({2, 3, 1, 5}, {&cl, &cl}), (Shape{15, 1, 15, 3}));      // fresh channels-last strides
  EXPECT_EQ(OutStrides({2, 3, 1, 5}, {&cl, &scalar}), (Shape{15, 1, 30, 3}));  // the sorted layout
  const TensorMeta cl4 = Strided({2, 3, 4, 5}, {60, 1, 15, 3});
  const TensorMeta hw = Dense({4, 5});
  EXPECT_EQ(OutStrides({2, 3, 4, 5}, {&cl4, &hw}), (Shape{60, 1, 15, 3}));

  // empty(0, 3).t() + 1 and empty(3, 0, 2).permute(2, 0, 1) + 1: sizes
  // multiply as they are, so a 0-sized dim zeroes the strides after it.
  const TensorMeta z = Strided({3, 0}, {1, 3});
  EXPECT_EQ(OutStrides({3, 0}, {&z, &scalar}), (Shape{1, 3}));
  const TensorMeta z3 = Strided({2, 3, 0}, {1, 2, 2});
  EXPECT_EQ(OutStrides({2, 3, 0}, {&z3, &scalar}), (Shape{1, 0, 2}));
  EXPECT_EQ(OutStrides({}, {&scalar, &scalar}), Shape{});
}

TEST(PreserveFormatStrides, KeepsDenseLayoutsAndDensifiesOthers) {
  EXPECT_EQ(PreserveFormatStrides(Strided({4, 2, 3}, {1, 12, 4})), (Shape{1, 12, 4}));
  EXPECT_EQ(PreserveFormatStrides(Strided({2, 3, 1, 1}, {3, 1, 3, 3})), (Shape{3, 1, 3, 3}));
  // p[:, :, 1:] for p = empty(2, 3, 4).permute(2, 0, 1): not dense, keeps the permutation
  EXPECT_EQ(PreserveFormatStrides(Strided({4, 2, 2}, {1, 12, 4})), (Shape{1, 8, 4}));
  EXPECT_EQ(PreserveFormatStrides(Strided({3, 4}, {1, 0})), (Shape{4, 1}));  // expanded -> contiguous
  // torch's infer_dense_strides example: stride-0 dims do not move
  EXPECT_EQ(PreserveFormatStrides(Strided({6, 5, 4, 3, 2}, {6, 0, 120, 0, 1})), (Shape{6, 36, 180, 2, 1}));
  EXPECT_EQ(PreserveFormatStrides(Strided({5}, {2})), (Shape{1}));
  EXPECT_EQ(PreserveFormatStrides(Dense({})), Shape{});
}

// ---- reductions --------------------------------------------------------------

TEST(Reduction, MasksAndShapes) {
  std::vector<bool> m = *ReductionMask("sum", Value(std::vector<int64_t>{0, -1}), 3);
  EXPECT_EQ(m, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(ReducedShape({2, 3, 4}, m, false), (Shape{3}));
  EXPECT_EQ(ReducedShape({2, 3, 4}, m, true), (Shape{1, 3, 1}));
  EXPECT_EQ(*ReductionMask("sum", Value(), 2), (std::vector<bool>{true, true}));                         // None
  EXPECT_EQ(*ReductionMask("sum", Value(std::vector<int64_t>{}), 2), (std::vector<bool>{true, true}));  // []
  EXPECT_EQ(*ReductionMask("sum", Value(int64_t{1}), 2), (std::vector<bool>{false, true}));
  EXPECT_TRUE(ReductionMask("sum", Value(std::vector<int64_t>{-1}), 0)->empty());  // tensor(1.).sum(-1)
  EXPECT_EQ(ReducedShape({}, {}, true), Shape{});
}

TEST(Reduction, Errors) {
  absl::StatusOr<std::vector<bool>> r = ReductionMask("sum", Value(std::vector<int64_t>{0, 0}), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "sum: dim 0 appears multiple times in the list of dims");
  r = ReductionMask("amax", Value(std::vector<int64_t>{1, -2}), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "amax: dim 1 appears multiple times in the list of dims");
  r = ReductionMask("sum", Value(std::vector<int64_t>{0, 0}), 0);  // tensor(1.).sum([0, 0])
  ASSERT_FALSE(r.ok());
  r = ReductionMask("sum", Value(std::vector<int64_t>{3}), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kIndex);
  EXPECT_EQ(r.status().message(), "sum: Dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

}  // namespace
}  // namespace tensord
