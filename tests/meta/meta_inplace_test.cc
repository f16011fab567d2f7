// Meta functions of the in-place ops: they return self's meta aliasing
// argument 0 after PyTorch's in-place checks, with PyTorch 1.13's error
// kinds and texts.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord {
namespace {

using S = ScalarType;
using meta_test::Call;
using meta_test::Dense;
using meta_test::ExpectErrorContains;
using meta_test::KW;
using meta_test::Strided;

void ExpectSelf(const absl::StatusOr<MetaResult>& r, const TensorMeta& self) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0], self);
  EXPECT_EQ(r->alias_of[0], 0);
}

TEST(InPlaceMetaTest, ReturnsSelfAliasingArgumentZero) {
  const TensorMeta self = Strided({3, 4}, {1, 3});  // a transposed layout is kept
  const TensorMeta other = Dense({4});
  ExpectSelf(Call("add_.Tensor", {Value(&self), Value(&other)}, {{"alpha", Value(Scalar::Int(2))}}), self);
  ExpectSelf(Call("mul_.Scalar", {Value(&self), Value(Scalar::Float(0.5))}), self);
  ExpectSelf(Call("div_.Tensor", {Value(&self), Value(&other)}), self);
  ExpectSelf(Call("clamp_", {Value(&self), Value(Scalar::Int(0))}), self);
  ExpectSelf(Call("copy_", {Value(&self), Value(&other)}), self);
  ExpectSelf(Call("zero_", {Value(&self)}), self);
  ExpectSelf(Call("fill_.Scalar", {Value(&self), Value(Scalar::Int(3))}), self);
  ExpectSelf(Call("uniform_", {Value(&self), Value(-1.0), Value(1.0)}), self);
  ExpectSelf(Call("normal_", {Value(&self)}), self);
  ExpectSelf(Call("addcmul_", {Value(&self), Value(&other), Value(&self)}), self);
  const TensorMeta d64 = Dense({3, 4}, S::kFloat64);
  ExpectSelf(Call("add_.Tensor", {Value(&self), Value(&d64)}), self);  // double result cast into float
  const TensorMeta on_meta = Dense({3, 4}, S::kFloat32, Device{DeviceType::kMeta, 0});
  ExpectSelf(Call("copy_", {Value(&on_meta), Value(&self)}), on_meta);  // cpu -> meta copies are allowed
  for (const char* op : {"add_.Tensor", "copy_", "zero_", "uniform_", "detach"}) {
    EXPECT_TRUE(OpTable::Get().Find(op)->is_view()) << op;
  }
}

TEST(InPlaceMetaTest, PyTorchChecksAndTexts) {
  const TensorMeta l = Dense({3}, S::kInt64), f = Dense({3});
  // torch.zeros(3, dtype=torch.long).add_(torch.ones(3))
  ExpectErrorContains(Call("add_.Tensor", {Value(&l), Value(&f)}), ErrorKind::kRuntime,
                      "add_: result type Float can't be cast to the desired output type Long");
  ExpectErrorContains(Call("mul_.Scalar", {Value(&l), Value(Scalar::Float(0.5))}), ErrorKind::kRuntime,
                      "result type Float can't be cast to the desired output type Long");
  const TensorMeta b = Dense({3}, S::kBool);
  ExpectErrorContains(Call("add_.Scalar", {Value(&b), Value(Scalar::Int(1))}), ErrorKind::kRuntime,
                      "result type Long can't be cast to the desired output type Bool");
  // torch.zeros(3).add_(torch.ones(2, 3))
  const TensorMeta wide = Dense({2, 3});
  ExpectErrorContains(Call("add_.Tensor", {Value(&f), Value(&wide)}), ErrorKind::kRuntime,
                      "output with shape [3] doesn't match the broadcast shape [2, 3]");
  ExpectErrorContains(Call("copy_", {Value(&f), Value(&wide)}), ErrorKind::kRuntime,
                      "output with shape [3] doesn't match the broadcast shape [2, 3]");
  const TensorMeta mask = Dense({2, 3}, S::kBool);
  ExpectErrorContains(Call("masked_fill_.Scalar", {Value(&f), Value(&mask), Value(Scalar::Int(1))}),
                      ErrorKind::kRuntime, "output with shape [3] doesn't match the broadcast shape [2, 3]");
  // torch.zeros(1).expand(3).add_(1)
  const TensorMeta expanded = Strided({3}, {0});
  for (const char* op : {"add_.Scalar", "mul_.Scalar"}) {
    ExpectErrorContains(Call(op, {Value(&expanded), Value(Scalar::Int(1))}), ErrorKind::kRuntime,
                        "unsupported operation: more than one element of the written-to tensor refers to a single "
                        "memory location. Please clone() the tensor before performing the operation.");
  }
  ExpectErrorContains(Call("uniform_", {Value(&expanded)}), ErrorKind::kRuntime, "more than one element");
  ExpectErrorContains(Call("copy_", {Value(&expanded), Value(&f)}), ErrorKind::kRuntime, "more than one element");
  ExpectSelf(Call("fill_.Scalar", {Value(&expanded), Value(Scalar::Int(1))}), expanded);  // allowed, as PyTorch
  const TensorMeta meta_src = Dense({3}, S::kFloat32, Device{DeviceType::kMeta, 0});
  ExpectErrorContains(Call("copy_", {Value(&f), Value(&meta_src)}), ErrorKind::kNotImplemented,
                      "Cannot copy out of meta tensor; no data!");
  ExpectErrorContains(Call("uniform_", {Value(&l)}), ErrorKind::kRuntime, "not implemented for 'Long'");
  ExpectErrorContains(Call("uniform_", {Value(&f), Value(1.0), Value(0.0)}), ErrorKind::kRuntime,
                      "uniform_ expects to return a [from, to) range, but found from=1 > to=0");
  ExpectErrorContains(Call("normal_", {Value(&f), Value(0.0), Value(-1.0)}), ErrorKind::kRuntime,
                      "normal expects std >= 0.0, but found std -1");
  const TensorMeta i8 = Dense({2}, S::kInt8);
  ExpectErrorContains(Call("fill_.Scalar", {Value(&i8), Value(Scalar::Int(300))}), ErrorKind::kRuntime,
                      "value cannot be converted to type int8_t without overflow");
  const TensorMeta i = Dense({3}, S::kInt64);
  ExpectErrorContains(Call("addcdiv", {Value(&f), Value(&i), Value(&i)}), ErrorKind::kRuntime,
                      "Integer division with addcdiv is no longer supported");
  ExpectErrorContains(Call("addcmul", {Value(&b), Value(&b), Value(&b)}), ErrorKind::kRuntime,
                      "not implemented for 'Bool'");
}

}  // namespace
}  // namespace tensord
