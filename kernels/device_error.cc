// DeviceErrorToStatus (tensord/kernels/device_error_status.h): the CPU
// kernels' index errors (kernels/cpu/index.cc, scatter.cc, shape.cc) rebuilt
// from an error word.
#include "tensord/kernels/device_error_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"

namespace tensord {
namespace {

// "index_select" for the op `op_id` of the built-in table; "op 1234" when
// the table has no such op (a kernel's bug).
std::string OpName(uint32_t op_id) {
  const OpTable& table = OpTable::Get();
  if (op_id < table.size()) return table.at(op_id).name();
  return absl::StrCat("op ", op_id);
}

}  // namespace

absl::Status DeviceErrorToStatus(const DeviceErrorWord& word) {
  switch (word.code) {
    case kNoDeviceError:
      return absl::OkStatus();
    case kIndexOutOfBounds: {
      const std::string op = OpName(word.op_id);
      const std::string what =
          absl::StrCat("index ", word.value, " is out of bounds for dimension ", word.dim, " with size ", word.size);
      // As the CPU kernels and PyTorch: gather's text has no prefix and,
      // like the scatters', is a RuntimeError; the others are IndexErrors.
      if (op == "gather") return RuntimeErr(what);
      if (op == "scatter_add" || op == "scatter") return RuntimeErr(absl::StrCat(op, "(): ", what));
      if (op == "index") return IndexErr(what);
      return IndexErr(absl::StrCat(op, "(): ", what));
    }
    case kTargetOutOfBounds:
      return IndexErr(absl::StrCat("Target ", word.value, " is out of bounds."));
    case kPoolIndexOutOfBounds:
      return IndexErr(absl::StrCat(OpName(word.op_id), ": index ", word.value, " out of range for an input plane of ",
                                   word.dim, "x", word.size));
    case kSourceTooShort:
      return RuntimeErr(absl::StrCat(OpName(word.op_id), ": Number of elements of source < number of ones in mask (",
                                     word.size, " < ", word.value, ")"));
    default:
      return InternalErr(absl::StrCat(OpName(word.op_id), ": its kernel recorded the unknown device error code ",
                                      word.code, " (value ", word.value, ", dim ", word.dim, ", size ", word.size,
                                      ")"));
  }
}

}  // namespace tensord
