// tensord/meta/errors.h — how tensord says what went wrong. Every error is an
// absl::Status; its *kind* tells a client which Python exception to raise
// (the mapping a PyTorch user expects), and survives the wire.
//
//   return RuntimeErr("matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)");
//   TD_ASSIGN_OR_RETURN(int64_t d, WrapDim("sum", dim, rank));
#ifndef TENSORD_META_ERRORS_H_
#define TENSORD_META_ERRORS_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tensord {

// The exception a client raises for a Status: RuntimeError (shape, dtype and
// value errors: InvalidArgument), TypeError (InvalidArgument tagged as such:
// wrong argument kinds), IndexError (OutOfRange), NotImplementedError
// (Unimplemented: data-dependent ops on meta, unsupported device/dtype),
// MemoryError (ResourceExhausted), RuntimeError for everything else.
enum class ErrorKind { kRuntime, kType, kIndex, kNotImplemented, kOutOfMemory, kInternal };

absl::Status RuntimeErr(absl::string_view msg);
absl::Status TypeErr(absl::string_view msg);
absl::Status IndexErr(absl::string_view msg);
absl::Status NotImplementedErr(absl::string_view msg);
absl::Status OutOfMemoryErr(absl::string_view msg);
// Our bug, not the user's (an invariant that did not hold).
absl::Status InternalErr(absl::string_view msg);

ErrorKind KindOf(const absl::Status& s);
// "RuntimeError", "TypeError", "IndexError", "NotImplementedError",
// "MemoryError", "InternalError".
absl::string_view ErrorKindName(ErrorKind k);
// Rebuilds a Status from what crossed the wire.
absl::Status MakeError(ErrorKind kind, absl::string_view msg);
// Same kind, message prefixed: "while running call 17 (x.py:3): <msg>".
absl::Status WithContext(const absl::Status& s, absl::string_view prefix);

}  // namespace tensord

#define TD_CONCAT_INNER_(a, b) a##b
#define TD_CONCAT_(a, b) TD_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define TD_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status td_status_ = (expr);          \
    if (!td_status_.ok()) return td_status_;     \
  } while (0)

// `TD_ASSIGN_OR_RETURN(auto x, StatusOrExpr());`
#define TD_ASSIGN_OR_RETURN(lhs, expr) \
  TD_ASSIGN_OR_RETURN_IMPL_(TD_CONCAT_(td_statusor_, __LINE__), lhs, expr)
#define TD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

// User-error check inside a function returning Status/StatusOr:
// TD_CHECK(a == b, "matmul: ...", a, " != ", b);
#define TD_CHECK(cond, ...) \
  do {                      \
    if (!(cond)) return ::tensord::RuntimeErr(::absl::StrCat(__VA_ARGS__)); \
  } while (0)

// Internal invariant: reports an internal error, never aborts.
#define TD_INTERNAL_CHECK(cond, ...) \
  do {                               \
    if (!(cond)) return ::tensord::InternalErr(::absl::StrCat("internal: ", __FILE__, ":", __LINE__, ": ", #cond, " ", ##__VA_ARGS__)); \
  } while (0)

#endif  // TENSORD_META_ERRORS_H_
