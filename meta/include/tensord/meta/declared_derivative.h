// tensord/meta/declared_derivative.h — an op's derivative written in table
// ops, as data: what an op defined at run time (tensord.library.define) or
// loaded from a kernel artifact's manifest carries so that autograd
// differentiates it with no native code of its own. The daemon's autograd
// runs it (one table op per call, recorded under create_graph, so double
// backward works); the client reads from it which inputs get a gradient and
// which saved tensors the backward reads, as it does from a built-in op's
// record. The language (docs/custom-ops.md has the guide), in the spirit of
// PyTorch's derivatives.yaml:
//
//   u = x + bias                          # a local, computed once, when first needed
//   d = 0.5 * (1 + erf(u * 0.7071067811865476)) + u * exp(-0.5 * u * u) * 0.3989422804014327
//   x: grad * d                           # the gradient of argument x
//   bias: grad * d                        # broadcast: the engine sums it to bias's shape
//   a, b: mylib::f_backward(grad, a, b)   # one op of several outputs gives several gradients
//
// Statements, one per line (or separated by ';'; '#' starts a comment):
//   NAME = EXPR            a local for the lines below
//   ARG: EXPR              the gradient of tensor argument ARG (one line per argument at most)
//   ARG, ARG, ...: EXPR    the gradients of several arguments from an op with as many outputs
// A differentiable tensor argument without a line gets no gradient (as a
// built-in op's `nograd`). Lines run in order, each only when one of its
// arguments needs a gradient; a local runs when a line first needs it.
// Expressions:
//   grad (the gradient of output 0), grads[i]; result (output 0), results[i];
//   the op's arguments by name (tensors, and int, float, bool, Scalar, int[],
//   str, ScalarType arguments); ints, floats, True, False, None, "strings",
//   lists of ints [a, b]; dtype names (float32, ...);
//   + - * / and unary - (on tensors: add, sub, mul, div and neg with
//   PyTorch's type promotion; on two numbers: Python's arithmetic);
//   op(args..., name=value): a built-in op by base name (the first overload,
//   in table order, whose argument types fit) or full name (`sum.dim_IntList`),
//   or an op defined at run time by its full name (`mylib::f_backward`),
//   found when the derivative runs; f(...)[i] picks output i of an op with
//   several. Ops that write in place are refused.
// A gradient need not have its argument's shape or dtype when it broadcasts
// to it: autograd sums over the broadcast dims and casts (as for built-ins).
#ifndef TENSORD_META_DECLARED_DERIVATIVE_H_
#define TENSORD_META_DECLARED_DERIVATIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/value.h"

namespace tensord {

// A derivative's text is at most this long.
inline constexpr size_t kMaxDeclaredDerivativeBytes = 16 << 10;

// A value while a derivative runs: one of the host's tensors (by the handle
// the host gave it) or a non-tensor Value.
struct DerivativeValue {
  bool is_tensor = false;
  int tensor = -1;
  Value value;
};

// What running a derivative needs of its caller (the daemon's autograd).
// Tensors are the host's, named by handles (small ints) the host hands out.
// A method that fails records its error in the host (failed() is then
// true) and returns -1 / nothing; the run stops there.
class DerivativeHost {
 public:
  virtual ~DerivativeHost() = default;
  // The gradient of forward output `output` (a zero tensor of its meta when
  // none flowed to it).
  virtual int Grad(size_t output) = 0;
  // The saved tensor argument `arg` (a schema index).
  virtual int Input(int arg) = 0;
  // The saved forward output `output`.
  virtual int Output(size_t output) = 0;
  // The non-tensor argument `arg` (a schema index), as the forward got it.
  virtual Value Arg(int arg) = 0;
  // Whether tensor argument `arg` needs a gradient.
  virtual bool Needs(int arg) = 0;
  // An op defined at run time by full name ("mylib::f"), or nullptr.
  virtual const OpEntry* FindOp(absl::string_view full_name) = 0;
  // Runs `op` on `args` (bound in schema order, defaults filled) and returns
  // handles of its outputs.
  virtual std::vector<int> Call(const OpEntry& op, std::vector<DerivativeValue> args) = 0;
  virtual bool failed() const = 0;
};

class DeclaredDerivative {
 public:
  // Parses and checks `text` for an op with `schema`: built-in ops are
  // resolved now (an unknown op, or one no overload of which takes the
  // argument types, fails here, listing the overloads). RuntimeError naming
  // the line and column for text that does not parse, a name that is
  // nothing the language knows, a line for an argument that is not a
  // differentiable tensor (or twice for one), an expression of the wrong
  // type (a gradient must be a tensor), grads[i] / results[i] past the
  // schema's returns, text over kMaxDeclaredDerivativeBytes, or no line at all.
  static absl::StatusOr<std::shared_ptr<const DeclaredDerivative>> Compile(const FunctionSchema& schema,
                                                                           absl::string_view text);
  ~DeclaredDerivative();

  // Runs the lines whose arguments need a gradient; returns one handle per
  // schema argument (-1 where none is given). Errors: the host's (then
  // failed() is true and the status is only a marker), and RuntimeError
  // naming `op` and the line for a run-time op that is not defined, does
  // not take the arguments, or gives another number of outputs than used.
  absl::StatusOr<std::vector<int>> Run(absl::string_view op, DerivativeHost& host) const;

  const std::string& text() const { return text_; }
  // What the derivative reads of the saved tensors, per argument that needs
  // a gradient, in the order Run reads them; plus a `nograd` item per
  // differentiable argument without a line. What PredictSavedReads,
  // FormulaGivesGradient and FormulaMayReadInput read for the op.
  const std::vector<SavedReadsItem>& reads_rule() const { return reads_; }
  // The full names of the ops defined at run time that the derivative
  // calls (a kernel artifact's builder checks that its library has them).
  const std::vector<std::string>& extension_calls() const { return extension_calls_; }

  struct Program;  // the checked statements (declared_derivative.cc)

 private:
  DeclaredDerivative() = default;
  std::string text_;
  std::unique_ptr<Program> program_;
  std::vector<SavedReadsItem> reads_;
  std::vector<std::string> extension_calls_;
};

}  // namespace tensord

#endif  // TENSORD_META_DECLARED_DERIVATIVE_H_
