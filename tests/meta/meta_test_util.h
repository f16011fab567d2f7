// tests/meta/meta_test_util.h — what the meta tests share: a dense or
// strided TensorMeta, a call of an op's meta function by full name with
// positional and keyword arguments bound by the schema, as client and daemon
// bind them, and the check of an error's kind and text.
//
//   absl::StatusOr<MetaResult> r = meta_test::Call("add.Tensor", {&a, &b}, {{"alpha", Scalar::Int(2)}});
#ifndef TENSORD_TESTS_META_META_TEST_UTIL_H_
#define TENSORD_TESTS_META_META_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord::meta_test {

using KW = std::vector<std::pair<std::string, Value>>;

// A contiguous meta of `sizes` (PyTorch's contiguous strides).
inline TensorMeta Dense(Shape sizes, ScalarType dtype = ScalarType::kFloat32, Device device = kCPU) {
  return TensorMeta::Contiguous(sizes, dtype, device);
}

// The meta function of op `op` (full name) on `pos` and `kw`; InternalErr
// when the table lacks the op, the binding's error when the arguments do not fit.
inline absl::StatusOr<MetaResult> Call(absl::string_view op, std::vector<Value> pos, KW kw = {}) {
  const OpEntry* e = OpTable::Get().Find(op);
  if (e == nullptr) return InternalErr(absl::StrCat("no op ", op));
  absl::StatusOr<std::vector<Value>> args = BindArgs(e->schema, std::move(pos), std::move(kw));
  if (!args.ok()) return args.status();
  return OpTable::Get().RunMeta(*e, *args);
}

// A meta of `sizes` and `strides` at offset 0 (a view's layout).
inline TensorMeta Strided(Shape sizes, Shape strides, ScalarType dtype = ScalarType::kFloat32, Device device = kCPU) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = 0;
  m.dtype = dtype;
  m.device = device;
  return m;
}

// The meta function failed with an error of `kind` whose text contains `text`.
inline void ExpectErrorContains(const absl::StatusOr<MetaResult>& r, ErrorKind kind, absl::string_view text) {
  ASSERT_FALSE(r.ok()) << "expected: " << text;
  EXPECT_EQ(ErrorKindName(KindOf(r.status())), ErrorKindName(kind)) << r.status().message();
  EXPECT_TRUE(absl::StrContains(r.status().message(), text)) << r.status().message();
}
// The same for a check that returns a status.
inline void ExpectErrorContains(const absl::Status& s, ErrorKind kind, absl::string_view text) {
  ASSERT_FALSE(s.ok()) << "expected: " << text;
  EXPECT_EQ(ErrorKindName(KindOf(s)), ErrorKindName(kind)) << s.message();
  EXPECT_TRUE(absl::StrContains(s.message(), text)) << s.message();
}

}  // namespace tensord::meta_test

#endif  // TENSORD_TESTS_META_META_TEST_UTIL_H_
