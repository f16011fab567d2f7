// tests/meta/meta_test_util.h — what the meta tests share: a dense TensorMeta
// and a call of an op's meta function by full name with positional and
// keyword arguments bound by the schema, as client and daemon bind them.
//
//   absl::StatusOr<MetaResult> r = meta_test::Call("add.Tensor", {&a, &b}, {{"alpha", Scalar::Int(2)}});
#ifndef TENSORD_TESTS_META_META_TEST_UTIL_H_
#define TENSORD_TESTS_META_META_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

}  // namespace tensord::meta_test

#endif  // TENSORD_TESTS_META_META_TEST_UTIL_H_
