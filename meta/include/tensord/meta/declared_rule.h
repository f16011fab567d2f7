// tensord/meta/declared_rule.h — declarative shape rules: the shape, dtype
// and layout of an op's outputs written as a few lines of a small,
// Python-like language over its arguments, so that a client computes them
// with no native code of the op's author (ops defined at run time, kernel
// artifacts' manifests). The language (docs/custom-ops.md has the guide):
//
//   check bias.dim() == 1 and bias.size(0) == x.size(-1), "bias must be [{x.size(-1)}], got {bias.shape}"
//   n = x.size(-1)
//   return empty(broadcast(x, bias), dtype=promote(x, bias), layout=like(x))
//
// Statements, one per line (or separated by ';'; '#' starts a comment):
//   check COND, "MESSAGE"    fails the call with RuntimeError "<op>: MESSAGE"
//                            when COND is false; {EXPR} in MESSAGE shows a value
//   NAME = EXPR              a local value for the lines below
//   return OUT, ...          the outputs, one per return of the schema; the
//                            rule's last statement
// Expressions, evaluated with Python's meaning:
//   ints, True, False, None; the op's arguments by name (a Tensor, Tensor[],
//   int, float, bool, Scalar, int[], ScalarType or str argument); dtype names
//   (float32, int64, bool, ...); + - * // % on ints, + on shapes (concatenation);
//   == != < <= > >=, `is None`, `is not None`, and/or/not, A if C else B;
//   [a, b, *shape] (lists of ints, * splices a shape), s[i], s[i:j];
//   t.shape, t.dtype, t.ndim, t.dim(), t.size(), t.size(d), t.numel();
//   len(s), prod(s), min(a, b, ...), max(a, b, ...); a Tensor[] ts: len(ts),
//   ts[i] (None for an absent element of a Tensor?[]);
//   broadcast(t or shape or ts, ...) NumPy broadcasting (PyTorch's error text),
//   matmul(a, b)                     torch.matmul's output shape and checks,
//   reduce(t or shape, dims, keepdim=False)   dims an int, a list or None (all),
//   promote(t or number or ts, ...)  torch.result_type,
//   is_floating_point(t or dtype),
//   empty(shape, dtype=..., layout=...)   an output: dtype by default the
//       promotion of every tensor argument; layout `contiguous` (the default),
//       `like(t)` (t's memory format when the shape is t's, as empty_like) or
//       `elementwise` (the strides an elementwise op's output gets from the
//       tensor arguments of that shape).
// Outputs are on the tensor arguments' device (two devices: PyTorch's
// "Expected all tensors to be on the same device" error; a 0-dim cpu tensor
// may join). Errors while evaluating name the op: IndexError for a dim out of
// range (as PyTorch's), RuntimeError for the rest, e.g. "mylib::f: shape rule
// line 2: x.size(d): d is a bool, not an int".
#ifndef TENSORD_META_DECLARED_RULE_H_
#define TENSORD_META_DECLARED_RULE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord {

struct MetaResult;

// How an error about the text of a rule or a declared derivative shows
// character `c`: 'x' for printable ASCII, else its byte ("byte 0xC3"), so
// that the message stays valid UTF-8 whatever the text holds.
std::string ShowTextChar(char c);

// A rule's text is at most this long.
inline constexpr size_t kMaxDeclaredRuleBytes = 16 << 10;

class DeclaredShapeRule {
 public:
  // Parses `text` for an op with `schema`. RuntimeError naming the line and
  // column for text that does not parse; for a name that is neither an
  // argument of the schema, a local defined above, a dtype nor a function of
  // the language; for a rule that does not end with `return` or returns
  // other than one output per return of the schema; for an argument type the
  // language does not read (float[], Device); for text over
  // kMaxDeclaredRuleBytes.
  static absl::StatusOr<std::shared_ptr<const DeclaredShapeRule>> Compile(const FunctionSchema& schema,
                                                                          absl::string_view text);
  ~DeclaredShapeRule();

  // The outputs for `args` (bound in schema order, defaults filled, kinds
  // validated), each a fresh tensor (alias_of -1). Errors name `op`.
  absl::StatusOr<MetaResult> Run(absl::string_view op, absl::Span<const Value> args) const;

  const std::string& text() const { return text_; }

  struct Program;  // the parsed statements (declared_rule.cc)

 private:
  DeclaredShapeRule() = default;
  std::string text_;
  std::unique_ptr<Program> program_;
};

}  // namespace tensord

#endif  // TENSORD_META_DECLARED_RULE_H_
