// Call sites of tensord._C: the "file.py:42" of the Python code behind a
// call, for error messages and the daemon's record of where an op came from.
#ifndef TENSORD_PYTHON_CLIENT_SRC_CALL_SITES_H_
#define TENSORD_PYTHON_CLIENT_SRC_CALL_SITES_H_

#include <string>

#include "binding.h"

namespace tensord::python {

// "file.py:42" of the innermost frame outside the tensord package.
// The package is Types().package_dir (no frame is skipped before the package
// has registered it); "<python>" when no frame is left. Needs the GIL;
// raises nothing.
tc::CallSite PyCallSite();

// The call site of one op call from Python, named only when the call leaves
// for the daemon (a pure meta call never walks the frames). The op call runs
// holding the GIL (it is plain CPU work until then); Materialize releases it
// for what follows (the session may block), and the destructor takes it back.
class DeferredPySite final : public tc::CallSite::Source {
 public:
  DeferredPySite() = default;
  DeferredPySite(const DeferredPySite&) = delete;
  DeferredPySite& operator=(const DeferredPySite&) = delete;
  ~DeferredPySite() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  std::string Materialize() override {
    if (!named_) {
      text_ = PyCallSite().text;
      named_ = true;
      saved_ = PyEval_SaveThread();
    }
    return text_;
  }

 private:
  std::string text_;
  bool named_ = false;
  PyThreadState* saved_ = nullptr;
};

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_CLIENT_SRC_CALL_SITES_H_
