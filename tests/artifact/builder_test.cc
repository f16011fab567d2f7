// BuildArtifact on real sources (g++, and nvcc when present): the artifact
// it writes, its cache, and the errors a kernel author meets, each naming
// what is wrong. Builds are shared through a static fixture: g++ is slow.
#include "tensord/artifact/builder.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/artifact/artifact.h"
#include "tensord/artifact/elf_inspect.h"
#include "test_util.h"

namespace tensord {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::HaveNvcc;
using testing_util::kNvcc;
using testing_util::ReadFile;
using testing_util::RunShell;
using testing_util::TempDir;
using testing_util::WriteFile;

// A CPU kernel mylib::scale with a declared rule: the example of
// tensord_kernel.h. Tests derive broken variants by replacing its parts.
constexpr const char* kScaleSource = R"SRC(
#include <tensord_kernel.h>
#include <string.h>

static int32_t scale(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const float s = (float)env->args[1].value.f;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "scale: expected float32");
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  if (s == 1.0f) {
    memcpy(y->data, x->data, (size_t)n * sizeof(float));
    return TD_OK;
  }
  for (int64_t i = 0; i < n; ++i) ((float*)y->data)[i] = s * ((const float*)x->data)[i];
  return TD_OK;
}
TD_EXPORT int32_t mylib_scale_cpu(TdKernelEnv* env) { return scale(env); }

static const TdOpDecl kOps[] = {
    {"mylib::scale(Tensor x, float s) -> Tensor",
     "return empty(x.shape, dtype=x.dtype, layout=like(x))",
     NULL,
     "mylib_scale_cpu", NULL},
};
TD_DEFINE_LIBRARY("mylib", kOps)
)SRC";

std::string Variant(absl::string_view from, absl::string_view to) {
  return absl::StrReplaceAll(kScaleSource, {{from, to}});
}

class BuilderTest : public ::testing::Test {
 protected:
  // One real build, shared: the artifact and its cache entry.
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    WriteFile(*dir_ / "scale.cc", kScaleSource);
    BuildOptions o = Options("scale.cc", "mylib.tdk");
    o.cache_dir = *dir_ / "cache";
    first_ = new absl::StatusOr<BuildResult>(BuildArtifact(o));
  }
  static void TearDownTestSuite() {
    delete first_;
    delete dir_;
  }

  static BuildOptions Options(const std::string& source, const std::string& output) {
    BuildOptions o;
    o.name = "mylib";
    o.sources = {*dir_ / source};
    o.output = *dir_ / output;
    return o;
  }
  // Builds `source_text` as a fresh file; gives the error's message.
  static std::string BuildError(const std::string& file, const std::string& source_text) {
    WriteFile(*dir_ / file, source_text);
    absl::StatusOr<BuildResult> r = BuildArtifact(Options(file, file + ".tdk"));
    if (r.ok()) return "built without an error";
    return std::string(r.status().message());
  }

  static TempDir* dir_;
  static absl::StatusOr<BuildResult>* first_;
};
TempDir* BuilderTest::dir_ = nullptr;
absl::StatusOr<BuildResult>* BuilderTest::first_ = nullptr;

TEST_F(BuilderTest, BuildsAnArtifactFromACpuKernel) {
  ASSERT_TRUE(first_->ok()) << first_->status();
  EXPECT_FALSE((*first_)->from_cache);
  absl::StatusOr<Artifact> a = ParseArtifact(ReadFile(*dir_ / "mylib.tdk"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->content_hash, (*first_)->content_hash);
  const Manifest& m = a->manifest;
  EXPECT_EQ(m.library, "mylib");
  EXPECT_EQ(m.abi_version, 1u);
  ASSERT_EQ(m.ops.size(), 1u);
  EXPECT_EQ(m.ops[0].schema, "mylib::scale(Tensor x, float s) -> Tensor");
  EXPECT_EQ(m.ops[0].shape_rule, "return empty(x.shape, dtype=x.dtype, layout=like(x))");
  EXPECT_EQ(m.ops[0].derivative, "");
  EXPECT_EQ(m.ops[0].cpu_symbol, "mylib_scale_cpu");
  EXPECT_EQ(m.ops[0].cuda_symbol, "");
  EXPECT_EQ(m.target_triple, HostTargetTriple());
  EXPECT_THAT(m.needed, Contains("libc.so.6"));
  EXPECT_THAT(m.glibc_versions, Contains(::testing::StartsWith("GLIBC_")));
  EXPECT_THAT(m.cuda_sm, IsEmpty());
  EXPECT_EQ(m.source_hash.size(), 64u);
  EXPECT_THAT(m.builder, AllOf(HasSubstr("tensord "), HasSubstr("g++")));

  // The payload is the object, and it exports the kernel.
  absl::StatusOr<ElfInfo> elf = InspectElf(a->payload);
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_THAT(elf->defined_functions, AllOf(Contains("mylib_scale_cpu"), Contains("tensord_library")));
}

TEST_F(BuilderTest, SecondBuildComesFromTheCache) {
  ASSERT_TRUE(first_->ok()) << first_->status();
  BuildOptions o = Options("scale.cc", "again.tdk");
  o.cache_dir = *dir_ / "cache";
  absl::StatusOr<BuildResult> r = BuildArtifact(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->from_cache);
  EXPECT_EQ(r->content_hash, (*first_)->content_hash);
  EXPECT_EQ(r->manifest.source_hash, (*first_)->manifest.source_hash);
  EXPECT_EQ(ReadFile(*dir_ / "again.tdk"), ReadFile(*dir_ / "mylib.tdk"));
}

TEST_F(BuilderTest, ChangedSourceOrFlagsChangeTheSourceHash) {
  ASSERT_TRUE(first_->ok()) << first_->status();
  std::filesystem::create_directories(*dir_ / "sub");  // the same name in another directory
  WriteFile(*dir_ / "sub/scale.cc", Variant("(float)env->args[1].value.f;", "(float)env->args[1].value.f * 0.5f;"));
  BuildOptions o = Options("sub/scale.cc", "changed.tdk");
  o.cache_dir = *dir_ / "cache";
  absl::StatusOr<BuildResult> r = BuildArtifact(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->from_cache);
  EXPECT_NE(r->manifest.source_hash, (*first_)->manifest.source_hash);

  // A header it includes changes the hash too (the cache must not go stale).
  WriteFile(*dir_ / "sub/factor.h", "#define FACTOR 2.0f\n");
  WriteFile(*dir_ / "sub/scale.cc", "#include \"factor.h\"\n" + Variant("(float)env->args[1].value.f;",
                                                                        "(float)env->args[1].value.f * FACTOR;"));
  absl::StatusOr<BuildResult> h1 = BuildArtifact(o);
  ASSERT_TRUE(h1.ok()) << h1.status();
  WriteFile(*dir_ / "sub/factor.h", "#define FACTOR 3.0f\n");
  absl::StatusOr<BuildResult> h2 = BuildArtifact(o);
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_FALSE(h2->from_cache);
  EXPECT_NE(h1->manifest.source_hash, h2->manifest.source_hash);
}

TEST_F(BuilderTest, CompileErrorCarriesTheCompilersMessage) {
  const std::string e = BuildError("broken.cc", Variant("return TD_OK;", "return TD_OK; this_is_not_cpp"));
  EXPECT_THAT(e, AllOf(HasSubstr("build-kernel: g++ failed (exit status 1) compiling broken.cc:"),
                       HasSubstr("this_is_not_cpp")));
}

TEST_F(BuilderTest, DeclarationErrorsNameWhatIsWrong) {
  EXPECT_THAT(BuildError("badschema.cc", Variant("(Tensor x, float s) -> Tensor", "(Tensor x, float s -> Tensor")),
              AllOf(HasSubstr("build-kernel: op 'mylib::scale(Tensor x, float s -> Tensor'"), HasSubstr("schema")));
  EXPECT_THAT(BuildError("badrule.cc", Variant("empty(x.shape,", "empty(y.shape,")),
              AllOf(HasSubstr("mylib::scale"), HasSubstr("'y' is not an argument")));
  EXPECT_THAT(BuildError("otherns.cc", Variant("{\"mylib::scale(", "{\"x::scale(")),
              HasSubstr("build-kernel: op 'x::scale' is not in library 'mylib'"));
  EXPECT_THAT(BuildError("notexported.cc", Variant("TD_EXPORT int32_t mylib_scale_cpu", "int32_t mylib_scale_cpu")),
              HasSubstr("build-kernel: op 'mylib::scale' names CPU symbol 'mylib_scale_cpu', which the object "
                        "does not export (mark it TD_EXPORT)"));
  EXPECT_THAT(BuildError("nosymbol.cc", Variant("\"mylib_scale_cpu\", NULL}", "NULL, NULL}")),
              HasSubstr("names no kernel"));
  EXPECT_THAT(BuildError("otherlib.cc", Variant("TD_DEFINE_LIBRARY(\"mylib\"", "TD_DEFINE_LIBRARY(\"yourlib\"")),
              HasSubstr("names library 'yourlib', not 'mylib'"));
  EXPECT_THAT(BuildError("noquery.cc", Variant("TD_DEFINE_LIBRARY(\"mylib\", kOps)", "")),
              HasSubstr("exports no tensord_library()"));
  // What no daemon would take is refused at the build, not after shipping.
  EXPECT_THAT(BuildError("deriv.cc", Variant("like(x))\",\n     NULL,", "like(x))\",\n     \"x: grad * t\",")),
              HasSubstr("mylib::scale): derivative line 1, column 11: 't' is not an argument"));
  EXPECT_THAT(BuildError("derivcall.cc", Variant("like(x))\",\n     NULL,", "like(x))\",\n     \"x: mylib::nope(grad)\",")),
              HasSubstr("the derivative of 'mylib::scale' calls 'mylib::nope', which is not an op of library 'mylib'"));
  WriteFile(*dir_ / "rpath.cc", kScaleSource);
  BuildOptions rpath = Options("rpath.cc", "rpath.tdk");
  rpath.extra_ldflags = {"-Wl,-rpath,/tmp/elsewhere"};
  absl::StatusOr<BuildResult> r = BuildArtifact(rpath);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("RPATH/RUNPATH '/tmp/elsewhere'"));
}

TEST_F(BuilderTest, BadOptionsAreRefused) {
  BuildOptions o = Options("scale.cc", "x.tdk");
  o.sources = {*dir_ / "scale.f90"};
  EXPECT_THAT(BuildArtifact(o).status().message(), HasSubstr("is not .c, .cc, .cpp, .cxx or .cu"));
  o = Options("scale.cc", "x.tdk");
  o.name = "";
  EXPECT_THAT(BuildArtifact(o).status().message(), HasSubstr("no library name"));
  o = Options("missing.cc", "x.tdk");
  EXPECT_THAT(BuildArtifact(o).status().message(), HasSubstr("cannot read source"));
}

// The command line: `tensord build-kernel` on the same source, then
// `tensord inspect-kernel` on what it wrote.
TEST_F(BuilderTest, CommandLineBuildsAndInspects) {
  const char* bin = std::getenv("TENSORD_BIN");
  if (bin == nullptr || !std::filesystem::exists(bin)) GTEST_SKIP() << "TENSORD_BIN not set (run under ctest)";
  ASSERT_TRUE(first_->ok()) << first_->status();
  const std::string out = *dir_ / "cli.tdk";
  auto [rc, text] = RunShell(std::string(bin) + " build-kernel -o " + out + " --name mylib --cache " + (*dir_ / "cache") + " " +
                             (*dir_ / "scale.cc"));
  ASSERT_EQ(rc, 0) << text;
  EXPECT_THAT(text, HasSubstr((*first_)->content_hash));
  std::tie(rc, text) = RunShell(std::string(bin) + " inspect-kernel " + out);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_THAT(text, AllOf(HasSubstr("\"library\": \"mylib\""), HasSubstr("mylib_scale_cpu"),
                          HasSubstr((*first_)->content_hash)));
  WriteFile(*dir_ / "broken.tdk", "not an artifact");
  std::tie(rc, text) = RunShell(std::string(bin) + " inspect-kernel " + (*dir_ / "broken.tdk"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(text, HasSubstr("not a tensord kernel artifact"));
}

TEST_F(BuilderTest, CudaSourceGivesTheArchitecturesAsked) {
  if (!HaveNvcc()) GTEST_SKIP() << "no nvcc";
  WriteFile(*dir_ / "scale_cuda.cu", R"SRC(
#include <tensord_kernel.h>
#include <cuda_runtime.h>
__global__ void scale_kernel(float* y, const float* x, float s, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}
TD_EXPORT int32_t mylib_scale_cuda(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)env->stream>>>(
      (float*)env->outputs[0].data, (const float*)x->data, (float)env->args[1].value.f, n);
  return cudaGetLastError() == cudaSuccess ? TD_OK : td_fail(env, "launch failed");
}
static const TdOpDecl kOps[] = {
    {"mylib::scale(Tensor x, float s) -> Tensor", "return empty(x.shape, dtype=x.dtype)", NULL, NULL,
     "mylib_scale_cuda"},
};
TD_DEFINE_LIBRARY("mylib", kOps)
)SRC");
  BuildOptions o = Options("scale_cuda.cu", "cuda.tdk");
  o.cuda_archs = {"80", "90"};
  absl::StatusOr<BuildResult> r = BuildArtifact(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->manifest.cuda_sm, ElementsAre(80, 90));
  EXPECT_THAT(r->manifest.cuda_ptx, ElementsAre(90));
  EXPECT_EQ(r->manifest.ops[0].cuda_symbol, "mylib_scale_cuda");
  EXPECT_THAT(r->manifest.builder, HasSubstr("release"));
}

}  // namespace
}  // namespace tensord
