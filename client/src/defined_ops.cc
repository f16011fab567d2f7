// The process's ops defined at run time (tensord.library.define).
#include "tensord/client/ops.h"

namespace tensord::client {
namespace {

ExtensionOps& Registry() {
  static ExtensionOps* ops = new ExtensionOps();  // leaked: sessions and threads may outlive exit's destructors
  return *ops;
}

}  // namespace

absl::StatusOr<const OpEntry*> DefineOp(absl::string_view schema, absl::string_view shape_rule) {
  return Registry().Define(schema, shape_rule);
}

const ExtensionOps& DefinedOps() { return Registry(); }

}  // namespace tensord::client
