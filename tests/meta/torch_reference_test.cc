// Meta functions against PyTorch 1.13 (CPU): every line of
// torch_reference_cases.inc is one op call whose expected outputs (sizes,
// strides, storage_offset, dtype, aliasing) or error were recorded by running
// the same call in torch. To add cases, edit gen_torch_reference_cases.py in
// this folder and run it with /usr/bin/python3 (it rewrites the .inc file).
//
// Line format:  op | positional args | keyword args | expectation
//   args:   t:SIZES:STRIDES:OFFSET:DTYPE   a tensor (SIZES/STRIDES "2,3"; "" for 0-dim)
//           [ARG+ARG+...]                  a list of tensors ("_" is None)
//           i:3  f:2.5  b:1  l:1,2  n  d:float32  dev:meta  s:floor (a string)
//   kwargs: name=ARG;name=ARG
//   expect: ok:SIZES:STRIDES:OFFSET:DTYPE@ALIAS+...   or   err:KIND:exact:MESSAGE / err:KIND:any:MESSAGE
//           (exact: our message must contain torch's; any: only the kind must match)
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord {
namespace {

const char kCases[] =
#include "torch_reference_cases.inc"
    ;

Shape ParseInts(absl::string_view s) {
  Shape out;
  if (s.empty()) return out;
  for (absl::string_view p : absl::StrSplit(s, ',')) {
    int64_t v = 0;
    EXPECT_TRUE(absl::SimpleAtoi(p, &v)) << "bad int '" << p << "'";
    out.push_back(v);
  }
  return out;
}

ScalarType ParseType(absl::string_view s) {
  absl::StatusOr<ScalarType> t = ParseDtype(s);
  EXPECT_TRUE(t.ok()) << s;
  return t.ok() ? *t : ScalarType::kFloat32;
}

// Tensors live in a deque so that Values can point at them.
struct CaseParser {
  std::deque<TensorMeta> tensors;

  TensorMeta* Tensor(absl::string_view spec) {  // "SIZES:STRIDES:OFFSET:DTYPE"
    std::vector<absl::string_view> f = absl::StrSplit(spec, ':');
    EXPECT_EQ(f.size(), 4u) << spec;
    if (f.size() != 4) return nullptr;
    TensorMeta m;
    m.sizes = ParseInts(f[0]);
    m.strides = ParseInts(f[1]);
    EXPECT_TRUE(absl::SimpleAtoi(f[2], &m.storage_offset));
    m.dtype = ParseType(f[3]);
    m.device = kCPU;
    tensors.push_back(m);
    return &tensors.back();
  }

  Value Arg(absl::string_view a) {
    if (a == "n") return Value();
    if (absl::ConsumePrefix(&a, "[")) {
      absl::ConsumeSuffix(&a, "]");
      TensorList list;
      if (!a.empty()) {
        for (absl::string_view e : absl::StrSplit(a, '+')) {
          if (e == "_") {
            list.push_back(nullptr);
          } else {
            absl::ConsumePrefix(&e, "t:");
            list.push_back(Tensor(e));
          }
        }
      }
      return Value(std::move(list));
    }
    if (absl::ConsumePrefix(&a, "t:")) return Value(static_cast<const TensorMeta*>(Tensor(a)));
    if (absl::ConsumePrefix(&a, "i:")) {
      int64_t v = 0;
      EXPECT_TRUE(absl::SimpleAtoi(a, &v)) << a;
      return Value(v);
    }
    if (absl::ConsumePrefix(&a, "f:")) return Value(std::strtod(std::string(a).c_str(), nullptr));
    if (absl::ConsumePrefix(&a, "b:")) return Value(a == "1");
    if (absl::ConsumePrefix(&a, "l:")) return Value(ParseInts(a));
    if (absl::ConsumePrefix(&a, "d:")) return Value(ParseType(a));
    if (absl::ConsumePrefix(&a, "s:")) return Value(std::string(a));
    if (absl::ConsumePrefix(&a, "dev:")) {
      absl::StatusOr<Device> d = ParseDevice(a);
      EXPECT_TRUE(d.ok()) << a;
      return Value(d.ok() ? *d : kCPU);
    }
    ADD_FAILURE() << "bad argument '" << a << "'";
    return Value();
  }
};

ErrorKind KindFromName(absl::string_view name) {
  if (name == "IndexError") return ErrorKind::kIndex;
  if (name == "TypeError") return ErrorKind::kType;
  if (name == "NotImplementedError") return ErrorKind::kNotImplemented;
  return ErrorKind::kRuntime;
}

void RunCase(absl::string_view line) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(" | ", 3));
  ASSERT_EQ(parts.size(), 4u) << line;
  const OpEntry* entry = OpTable::Get().Find(parts[0]);
  ASSERT_NE(entry, nullptr) << "no op " << parts[0];

  CaseParser p;
  std::vector<Value> positional;
  for (absl::string_view a : absl::StrSplit(parts[1], ';', absl::SkipEmpty())) positional.push_back(p.Arg(a));
  std::vector<std::pair<std::string, Value>> kwargs;
  for (absl::string_view kv : absl::StrSplit(parts[2], ';', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> nv = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    kwargs.emplace_back(std::string(nv.first), p.Arg(nv.second));
  }
  absl::StatusOr<std::vector<Value>> bound = BindArgs(entry->schema, positional, kwargs);
  ASSERT_TRUE(bound.ok()) << bound.status();
  absl::StatusOr<MetaResult> r = OpTable::Get().RunMeta(*entry, *bound);

  absl::string_view expect = parts[3];
  if (absl::ConsumePrefix(&expect, "err:")) {
    std::vector<absl::string_view> e = absl::StrSplit(expect, absl::MaxSplits(':', 2));
    ASSERT_EQ(e.size(), 3u) << expect;
    ASSERT_FALSE(r.ok()) << "expected " << e[0] << ": " << e[2] << "\n  got " << r->outputs[0].ToString();
    EXPECT_EQ(std::string(ErrorKindName(KindOf(r.status()))), std::string(ErrorKindName(KindFromName(e[0])))) << r.status().message();
    if (e[1] == "exact") {
      EXPECT_NE(r.status().message().find(e[2]), absl::string_view::npos)
          << "torch: " << e[2] << "\n  ours: " << r.status().message();
    }
    return;
  }
  ASSERT_TRUE(absl::ConsumePrefix(&expect, "ok:")) << expect;
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<absl::string_view> outs;  // none: a list return with no elements
  if (!expect.empty()) outs = absl::StrSplit(expect, '+');
  ASSERT_EQ(r->outputs.size(), outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> ma = absl::StrSplit(outs[i], '@');
    CaseParser q;
    const TensorMeta* want = q.Tensor(ma.first);
    ASSERT_NE(want, nullptr);
    int alias = 0;
    ASSERT_TRUE(absl::SimpleAtoi(ma.second, &alias));
    TensorMeta got = r->outputs[i];
    EXPECT_EQ(got.sizes, want->sizes) << "output " << i;
    EXPECT_EQ(got.strides, want->strides) << "output " << i << " " << got.ToString();
    EXPECT_EQ(got.storage_offset, want->storage_offset) << "output " << i;
    EXPECT_EQ(std::string(DtypeName(got.dtype)), std::string(DtypeName(want->dtype))) << "output " << i;
    EXPECT_EQ(got.device, kCPU) << "output " << i;
    EXPECT_EQ(r->alias_of[i], alias) << "output " << i;
  }
}

TEST(TorchReference, EveryRecordedCallMatches) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(kCases, '\n', absl::SkipWhitespace())) {
    if (absl::StartsWith(line, "#")) continue;
    SCOPED_TRACE(line);
    RunCase(line);
    ++n;
  }
  EXPECT_GT(n, 500);
}

}  // namespace
}  // namespace tensord
