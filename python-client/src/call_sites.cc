// Call sites of tensord._C: naming the innermost Python frame outside the
// tensord package.
#include "call_sites.h"

#include <frameobject.h>

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tensord::python {
namespace {

// "file.py:42" of a code object at an instruction offset, memoised: finding
// a line walks the code's line table, a cost on every streamed op otherwise.
// Keys hold a reference to their code object (an address is never reused
// while cached); the cache is emptied when it grows past kMaxSites. Guarded
// by the GIL.
const std::string& SiteText(PyCodeObject* code, int lasti, const char* fn, PyFrameObject* f) {
  constexpr size_t kMaxSites = 4096;
  using Key = std::pair<PyCodeObject*, int>;
  static auto* cache = new absl::flat_hash_map<Key, std::string>();  // leaked: outlives interpreter teardown
  auto it = cache->find(Key(code, lasti));
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxSites) {
    for (auto& [k, v] : *cache) Py_DECREF(k.first);
    cache->clear();
  }
  const char* base = std::strrchr(fn, '/');
  Py_INCREF(code);
  return cache->emplace(Key(code, lasti), absl::StrCat(base ? base + 1 : fn, ":", PyFrame_GetLineNumber(f)))
      .first->second;
}

}  // namespace

tc::CallSite PyCallSite() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  const std::string& pkg = Types().package_dir;
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const char* fn = PyUnicode_AsUTF8(code->co_filename);
    if (fn == nullptr) {
      PyErr_Clear();
      fn = "?";
    }
    const bool inside = !pkg.empty() && std::strncmp(fn, pkg.c_str(), pkg.size()) == 0;
    if (!inside) {
      tc::CallSite site{SiteText(code, PyFrame_GetLasti(f), fn, f)};
      Py_DECREF(code);
      Py_DECREF(f);
      return site;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(f);
    f = back;
  }
  return tc::CallSite{"<python>"};
}

}  // namespace tensord::python
