// Error kinds: a Status payload tags TypeError; the other kinds map to codes.
#include "tensord/meta/errors.h"

#include "absl/strings/cord.h"

namespace tensord {
namespace {
constexpr char kKindPayload[] = "tensord/kind";
}

absl::Status RuntimeErr(absl::string_view msg) { return absl::InvalidArgumentError(msg); }
absl::Status TypeErr(absl::string_view msg) {
  absl::Status s = absl::InvalidArgumentError(msg);
  s.SetPayload(kKindPayload, absl::Cord("TypeError"));
  return s;
}
absl::Status IndexErr(absl::string_view msg) { return absl::OutOfRangeError(msg); }
absl::Status NotImplementedErr(absl::string_view msg) { return absl::UnimplementedError(msg); }
absl::Status OutOfMemoryErr(absl::string_view msg) { return absl::ResourceExhaustedError(msg); }
absl::Status InternalErr(absl::string_view msg) { return absl::InternalError(msg); }

ErrorKind KindOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return s.GetPayload(kKindPayload).has_value() ? ErrorKind::kType : ErrorKind::kRuntime;
    case absl::StatusCode::kOutOfRange:
      return ErrorKind::kIndex;
    case absl::StatusCode::kUnimplemented:
      return ErrorKind::kNotImplemented;
    case absl::StatusCode::kResourceExhausted:
      return ErrorKind::kOutOfMemory;
    case absl::StatusCode::kInternal:
      return ErrorKind::kInternal;
    default:
      return ErrorKind::kRuntime;
  }
}

absl::string_view ErrorKindName(ErrorKind k) {
  switch (k) {
    case ErrorKind::kRuntime: return "RuntimeError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kIndex: return "IndexError";
    case ErrorKind::kNotImplemented: return "NotImplementedError";
    case ErrorKind::kOutOfMemory: return "MemoryError";
    case ErrorKind::kInternal: return "InternalError";
  }
  return "RuntimeError";
}

absl::Status MakeError(ErrorKind kind, absl::string_view msg) {
  switch (kind) {
    case ErrorKind::kRuntime: return RuntimeErr(msg);
    case ErrorKind::kType: return TypeErr(msg);
    case ErrorKind::kIndex: return IndexErr(msg);
    case ErrorKind::kNotImplemented: return NotImplementedErr(msg);
    case ErrorKind::kOutOfMemory: return OutOfMemoryErr(msg);
    case ErrorKind::kInternal: return InternalErr(msg);
  }
  return RuntimeErr(msg);
}

absl::Status WithContext(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return MakeError(KindOf(s), absl::StrCat(prefix, s.message()));
}

}  // namespace tensord
