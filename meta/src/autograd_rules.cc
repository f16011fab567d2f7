#include "tensord/meta/autograd_rules.h"

#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"

namespace tensord {

bool IsDifferentiableDtype(ScalarType dtype) { return IsFloating(dtype); }

const std::vector<bool>& DifferentiableArgs(const OpEntry& op) {
  // Computed once per table entry; the table is immutable after startup.
  static const auto* table = [] {
    static const absl::flat_hash_set<std::string> kNonDiffNames = {"index", "indices", "mask", "condition",
                                                                  "target"};
    const OpTable& t = OpTable::Get();
    auto* v = new std::vector<std::vector<bool>>(t.size());
    for (const OpEntry& e : t.entries()) {
      std::vector<bool>& d = (*v)[e.id];
      d.resize(e.schema.arguments.size(), false);
      if (e.has(kNotDifferentiable)) continue;
      for (size_t i = 0; i < e.schema.arguments.size(); ++i) {
        const Argument& a = e.schema.arguments[i];
        const bool tensorish = a.type == ArgType::kTensor || a.type == ArgType::kTensorList;
        d[i] = tensorish && !kNonDiffNames.contains(a.name);
      }
    }
    return v;
  }();
  return (*table)[op.id];
}

std::string GradFnName(const OpEntry& op) {
  std::string name = op.name();
  if (!name.empty() && name.back() == '_') name.pop_back();
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c);
    upper = false;
  }
  return out + "Backward0";
}

}  // namespace tensord
