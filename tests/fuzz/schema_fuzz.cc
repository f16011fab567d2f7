// Fuzz target: the op schema parser (meta/src/schema.cc), which reads schema
// strings such as "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor".
// Any input must give a schema or an error status, never a crash; a parsed
// schema must also survive what the op table does with it (print, alias
// lookup) and re-parse from its printed text without crashing. Exact
// round-trip equality is not asserted: schemas come from the compiled-in op
// table, and its texts are checked by meta_tests.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensord/meta/schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tensord::FunctionSchema> schema = tensord::ParseSchema(text);
  if (!schema.ok()) return 0;
  (void)schema->ReturnAliases();
  (void)schema->ArgIndex("self");
  (void)schema->full_name();
  (void)tensord::ParseSchema(schema->ToString());
  return 0;
}
