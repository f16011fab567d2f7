// tensord/meta/schema.h — PyTorch-style op schemas, parsed once and used by
// the client (to bind Python/C++ arguments) and the daemon (to validate what
// arrives on the wire) alike.
//
//   auto s = ParseSchema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
//   s->name == "add", s->overload == "Tensor", s->arguments[2].kwarg_only == true
//
// Supported argument types: Tensor, Tensor?, Tensor[], Tensor?[], Scalar,
// Scalar?, int, int?, SymInt (= int), int[], int[N], int[]?, SymInt[],
// float, float?, float[], bool, bool?, str, str?, ScalarType?, Device?.
// Alias annotations `Tensor(a)` / `Tensor(a!)` are recorded: an op whose
// return carries the same alias set as an input is a view of that input.
#ifndef TENSORD_META_SCHEMA_H_
#define TENSORD_META_SCHEMA_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/value.h"

namespace tensord {

enum class ArgType {
  kTensor, kTensorList, kOptionalTensorList, kScalar, kInt, kIntList, kFloat,
  kFloatList, kBool, kString, kDtype, kDevice,
};

struct Argument {
  std::string name;
  ArgType type = ArgType::kTensor;
  bool optional = false;       // `T?`: None is accepted
  int fixed_len = 0;           // int[2] -> 2; a single int is broadcast to it
  bool kwarg_only = false;     // after `*`
  std::optional<Value> default_value;  // parsed default; None for `=None`
  std::string alias;           // "a" for Tensor(a) / Tensor(a!)
  bool is_write = false;       // `!`
};

struct Return {
  std::string name;            // may be empty
  ArgType type = ArgType::kTensor;
  std::string alias;
};

struct FunctionSchema {
  std::string name;            // "add"
  std::string overload;        // "Tensor" or ""
  std::vector<Argument> arguments;
  std::vector<Return> returns;

  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
  // Index of the argument named `name`, or -1.
  int ArgIndex(absl::string_view name) const;
  // For each return: index of the argument it aliases, or -1.
  std::vector<int> ReturnAliases() const;
  std::string ToString() const;  // canonical text (re-parses to the same schema)
};

// Parses one schema string. InvalidArgument with the position on bad syntax.
absl::StatusOr<FunctionSchema> ParseSchema(absl::string_view text);

// Checks that `values` (one per argument, in schema order, defaults already
// filled) have kinds the schema accepts. Used by the daemon on every call
// from the wire. Error: "add.Tensor: argument 'other' expected Tensor, got int".
absl::Status ValidateArgs(const FunctionSchema& schema, absl::Span<const Value> values);

// Binds positional values and keyword values to the schema, filling defaults,
// converting where PyTorch does (int -> float, int -> int[N], int/float/bool
// -> Scalar). TypeError-style messages as InvalidArgument:
// "add() missing required argument 'other'", "add() got an unexpected keyword argument 'x'".
absl::StatusOr<std::vector<Value>> BindArgs(
    const FunctionSchema& schema, std::vector<Value> positional,
    std::vector<std::pair<std::string, Value>> kwargs);

}  // namespace tensord

#endif  // TENSORD_META_SCHEMA_H_
