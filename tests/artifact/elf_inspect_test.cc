// InspectElf on shared objects compiled here with g++ (and nvcc when
// present): what they need (symbols, versions, libraries, search paths),
// what they export, their fat binary's architectures; and broken copies of
// them (truncated, byte-flipped, patched headers) that must fail or pass,
// never crash.
#include "tensord/artifact/elf_inspect.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace tensord {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using testing_util::HaveNvcc;
using testing_util::kNvcc;
using testing_util::ReadFile;
using testing_util::RunShell;
using testing_util::TempDir;
using testing_util::WriteFile;

// A C-linkage library: libm and libc calls, a weak undefined hook, an
// exported and a hidden function.
constexpr const char* kCSource = R"(
#include <math.h>
#include <string.h>
extern "C" {
__attribute__((weak)) int td_optional_hook(int);
__attribute__((visibility("hidden"))) int td_hidden(int x) { return x + 1; }
__attribute__((visibility("default"))) float td_exported(float* d, const float* s, int n) {
  memcpy(d, s, (size_t)n * sizeof(float));
  return expf(d[0]) + (float)td_hidden(td_optional_hook ? td_optional_hook(n) : n);
}
}
)";

// A library that needs the C++ runtime.
constexpr const char* kCxxSource = R"(
#include <stdexcept>
#include <string>
extern "C" __attribute__((visibility("default"))) int td_cxx(const char* s) {
  std::string t(s);
  if (t.empty()) throw std::runtime_error("empty");
  return static_cast<int>(t.size());
}
)";

class ElfInspectTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    WriteFile(*dir_ / "c.cc", kCSource);
    WriteFile(*dir_ / "cxx.cc", kCxxSource);
    WriteFile(*dir_ / "main.cc", "int main() { return 0; }\n");
    const auto [rc, out] = RunShell("cd " + dir_->path() +
                                    " && g++ -shared -fPIC -O2 -fvisibility=hidden -o libc_test.so c.cc -lm"
                                    " -Wl,-soname,libtdtest.so.1 -Wl,-rpath,/opt/td/lib:/opt/td/lib2"
                                    " && g++ -shared -fPIC -O2 -o libcxx_test.so cxx.cc"
                                    " && g++ -shared -fPIC -O2 -o libexecstack.so c.cc -lm -Wl,-z,execstack"
                                    " -Wl,--no-warn-execstack"
                                    " && g++ -O2 -o exe_pie main.cc && g++ -O2 -no-pie -o exe_nopie main.cc");
    build_log_ = new std::string(out);
    built_ = rc == 0;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete build_log_;
  }
  void SetUp() override { ASSERT_TRUE(built_) << *build_log_; }

  static std::string Lib(const std::string& name) { return ReadFile(*dir_ / name); }

  static const ElfSymbolRef* FindUndefined(const ElfInfo& info, const std::string& name) {
    for (const ElfSymbolRef& r : info.undefined) {
      if (r.name == name) return &r;
    }
    return nullptr;
  }

  static TempDir* dir_;
  static std::string* build_log_;
  static bool built_;
};
TempDir* ElfInspectTest::dir_ = nullptr;
std::string* ElfInspectTest::build_log_ = nullptr;
bool ElfInspectTest::built_ = false;

TEST_F(ElfInspectTest, ReadsWhatACLibraryNeedsAndExports) {
  absl::StatusOr<ElfInfo> info = InspectElf(Lib("libc_test.so"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->target_triple, HostTargetTriple());
  EXPECT_THAT(info->needed, AllOf(Contains("libm.so.6"), Contains("libc.so.6")));
  EXPECT_EQ(info->soname, "libtdtest.so.1");
  EXPECT_THAT(info->rpath, ElementsAre("/opt/td/lib", "/opt/td/lib2"));
  EXPECT_FALSE(info->has_executable_stack);

  const ElfSymbolRef* expf = FindUndefined(*info, "expf");
  ASSERT_NE(expf, nullptr);
  EXPECT_THAT(expf->version, StartsWith("GLIBC_"));
  EXPECT_EQ(expf->library, "libm.so.6");
  EXPECT_FALSE(expf->weak);
  const ElfSymbolRef* memcpy_ref = FindUndefined(*info, "memcpy");
  ASSERT_NE(memcpy_ref, nullptr);
  EXPECT_THAT(memcpy_ref->version, StartsWith("GLIBC_"));
  EXPECT_EQ(memcpy_ref->library, "libc.so.6");
  const ElfSymbolRef* hook = FindUndefined(*info, "td_optional_hook");
  ASSERT_NE(hook, nullptr);
  EXPECT_TRUE(hook->weak);
  EXPECT_EQ(hook->version, "");
  EXPECT_EQ(hook->library, "");

  EXPECT_THAT(info->undefined_symbols, AllOf(Contains("expf"), Contains("memcpy"), Not(Contains("td_optional_hook"))));
  EXPECT_TRUE(std::is_sorted(info->undefined_symbols.begin(), info->undefined_symbols.end()));
  EXPECT_THAT(info->defined_functions, AllOf(Contains("td_exported"), Not(Contains("td_hidden"))));
  EXPECT_THAT(info->glibc_versions, AllOf(Contains(expf->version), Contains(memcpy_ref->version)));
  EXPECT_THAT(info->glibcxx_versions, IsEmpty());
  EXPECT_THAT(info->cuda_sm, IsEmpty());
  EXPECT_THAT(info->cuda_ptx, IsEmpty());
}

TEST_F(ElfInspectTest, VersionsSortByNumber) {
  absl::StatusOr<ElfInfo> info = InspectElf(Lib("libc_test.so"));
  ASSERT_TRUE(info.ok()) << info.status();
  // GLIBC_2.2.5 (x86-64's base) sorts before GLIBC_2.14 (memcpy's).
  auto pos = [&](const std::string& v) {
    return std::find(info->glibc_versions.begin(), info->glibc_versions.end(), v) - info->glibc_versions.begin();
  };
  const std::vector<std::string>& v = info->glibc_versions;
  if (std::find(v.begin(), v.end(), "GLIBC_2.2.5") != v.end() &&
      std::find(v.begin(), v.end(), "GLIBC_2.14") != v.end()) {
    EXPECT_LT(pos("GLIBC_2.2.5"), pos("GLIBC_2.14"));
  }
}

TEST_F(ElfInspectTest, CxxLibraryNeedsLibstdcxxVersions) {
  absl::StatusOr<ElfInfo> info = InspectElf(Lib("libcxx_test.so"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->needed, Contains("libstdc++.so.6"));
  EXPECT_THAT(info->glibcxx_versions, Contains(StartsWith("GLIBCXX_")));
  bool from_libstdcxx = false;
  for (const ElfSymbolRef& r : info->undefined) {
    if (r.library == "libstdc++.so.6" && absl::StartsWith(r.version, "GLIBCXX_")) from_libstdcxx = true;
  }
  EXPECT_TRUE(from_libstdcxx);
  EXPECT_THAT(info->defined_functions, Contains("td_cxx"));
}

TEST_F(ElfInspectTest, ExecutableStackIsReported) {
  absl::StatusOr<ElfInfo> info = InspectElf(Lib("libexecstack.so"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->has_executable_stack);
}

TEST_F(ElfInspectTest, TripleComesFromEMachine) {
  std::string bytes = Lib("libc_test.so");
  const uint16_t aarch64 = 183;  // EM_AARCH64
  std::memcpy(bytes.data() + 18, &aarch64, 2);
  absl::StatusOr<ElfInfo> info = InspectElf(bytes);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->target_triple, "aarch64-linux-gnu");
  const uint16_t odd = 4242;
  std::memcpy(bytes.data() + 18, &odd, 2);
  info = InspectElf(bytes);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->target_triple, "unknown-4242");
}

TEST_F(ElfInspectTest, RefusesWhatIsNotA64BitSharedObject) {
  absl::StatusOr<ElfInfo> info = InspectElf("#!/bin/sh\necho hello\n");
  EXPECT_THAT(info.status().message(), HasSubstr("artifact payload: not an ELF file"));
  info = InspectElf("");
  EXPECT_THAT(info.status().message(), HasSubstr("not an ELF file"));

  info = InspectElf(Lib("exe_nopie"));
  EXPECT_THAT(info.status().message(), HasSubstr("is an executable, not a shared object (e_type 2)"));
  info = InspectElf(Lib("exe_pie"));
  EXPECT_THAT(info.status().message(), AllOf(HasSubstr("executable"), HasSubstr("DF_1_PIE")));

  std::string bytes = Lib("libc_test.so");
  bytes[4] = 1;  // EI_CLASS = ELFCLASS32
  EXPECT_THAT(InspectElf(bytes).status().message(), HasSubstr("is 32-bit"));
  bytes = Lib("libc_test.so");
  bytes[5] = 2;  // EI_DATA = ELFDATA2MSB
  EXPECT_THAT(InspectElf(bytes).status().message(), HasSubstr("not little-endian"));
  bytes = Lib("libc_test.so");
  const uint16_t rel = 1;  // ET_REL
  std::memcpy(bytes.data() + 16, &rel, 2);
  EXPECT_THAT(InspectElf(bytes).status().message(), HasSubstr("relocatable object"));
}

TEST_F(ElfInspectTest, TruncatedCopiesFailAndNeverCrash) {
  const std::string bytes = Lib("libc_test.so");
  uint64_t shoff = 0;
  uint16_t shnum = 0;
  std::memcpy(&shoff, bytes.data() + 0x28, 8);
  std::memcpy(&shnum, bytes.data() + 0x3c, 2);
  const size_t tables_end = shoff + 64 * shnum;
  ASSERT_LE(tables_end, bytes.size());
  const size_t step = std::max<size_t>(1, bytes.size() / 400);
  for (size_t cut = 0; cut < bytes.size(); cut += step) {
    absl::StatusOr<ElfInfo> info = InspectElf(absl::string_view(bytes).substr(0, cut));
    if (cut < tables_end) {
      EXPECT_FALSE(info.ok()) << "a copy cut at " << cut << " of " << bytes.size() << " bytes was read";
    }
  }
  EXPECT_THAT(InspectElf(bytes.substr(0, tables_end - 1)).status().message(), HasSubstr("truncated"));
}

TEST_F(ElfInspectTest, ByteFlippedCopiesNeverCrash) {
  for (const char* lib : {"libc_test.so", "libcxx_test.so"}) {
    const std::string bytes = Lib(lib);
    std::string copy = bytes;
    // Every byte of the headers and dynamic tables, each one flipped alone.
    for (size_t i = 0; i < bytes.size(); ++i) {
      copy[i] = static_cast<char>(~bytes[i]);
      (void)InspectElf(copy);
      copy[i] = bytes[i];
    }
    // Then a few bytes at once, set to values that make counts and offsets large.
    std::mt19937 rng(42);
    const char values[] = {'\x00', '\x01', '\x7f', '\x80', '\xff'};
    for (int round = 0; round < 2000; ++round) {
      copy = bytes;
      for (int k = 0; k < 4; ++k) {
        copy[rng() % copy.size()] = values[rng() % sizeof values];
      }
      (void)InspectElf(copy);
    }
  }
}

// nvcc's fat binaries: machine code and PTX per architecture.
class ElfInspectCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveNvcc()) GTEST_SKIP() << "no nvcc";
  }
  std::string Build(const std::string& gencode) {
    WriteFile(dir_ / "k.cu", "__global__ void k(float* x) { x[0] = 1; }\n");
    const auto [rc, out] = RunShell("cd " + dir_.path() + " && " + kNvcc +
                                    " -shared -Xcompiler -fPIC " + gencode + " k.cu -o k.so");
    EXPECT_EQ(rc, 0) << out;
    return ReadFile(dir_ / "k.so");
  }
  TempDir dir_;
};

TEST_F(ElfInspectCudaTest, ReadsCubinAndPtxArchitectures) {
  const std::string so =
      Build("-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90");
  absl::StatusOr<ElfInfo> info = InspectElf(so);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->cuda_sm, ElementsAre(80));
  EXPECT_THAT(info->cuda_ptx, ElementsAre(90));

  const std::string both = Build("-gencode arch=compute_90,code=[sm_90,compute_90]");
  info = InspectElf(both);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->cuda_sm, ElementsAre(90));
  EXPECT_THAT(info->cuda_ptx, ElementsAre(90));

  // Broken fat binaries: every byte of .nv_fatbin's headers region flipped,
  // one at a time; each copy fails or reads, never crashes.
  const size_t at = so.find("\x50\xed\x55\xba");
  ASSERT_NE(at, std::string::npos);
  std::string copy = so;
  for (size_t i = at; i < std::min(so.size(), at + 4096); ++i) {
    copy[i] = static_cast<char>(~so[i]);
    (void)InspectElf(copy);
    copy[i] = so[i];
  }
  // A container that claims more bytes than its section holds.
  copy = so;
  const uint64_t huge = 1ull << 40;
  std::memcpy(copy.data() + at + 8, &huge, 8);
  EXPECT_THAT(InspectElf(copy).status().message(), HasSubstr(".nv_fatbin"));
}

}  // namespace
}  // namespace tensord
