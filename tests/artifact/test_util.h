// Helpers for the artifact tests that compile real shared objects: a
// temporary directory, file I/O and running a compiler.
#ifndef TENSORD_TESTS_ARTIFACT_TEST_UTIL_H_
#define TENSORD_TESTS_ARTIFACT_TEST_UTIL_H_

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace tensord::testing_util {

// A fresh directory under the test's temp dir, removed with its contents
// when destroyed.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/td_artifact_XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `command` through the shell (test inputs only: paths from TempDir)
// and gives its exit status and stdout+stderr.
inline std::pair<int, std::string> RunShell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline constexpr const char* kNvcc = "/usr/local/cuda/bin/nvcc";
inline bool HaveNvcc() { return ::access(kNvcc, X_OK) == 0; }

}  // namespace tensord::testing_util

#endif  // TENSORD_TESTS_ARTIFACT_TEST_UTIL_H_
