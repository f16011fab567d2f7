// The builder and the daemon agree: an artifact that `tensord build-kernel`
// (BuildArtifact) writes passes every check the daemon's ArtifactStore makes
// before it loads one, loads, and resolves its kernels.
#include <string>

#include "../artifact/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/artifact/builder.h"
#include "tensord/runtime/artifacts.h"

namespace tensord::runtime {
namespace {

using testing_util::TempDir;
using testing_util::WriteFile;

TEST(ArtifactBuildTest, BuiltArtifactPassesTheDaemonsChecksAndLoads) {
  TempDir dir;
  WriteFile(dir / "twice.cc", R"SRC(
#include <tensord_kernel.h>
#include <cstring>
TD_EXPORT int32_t mylib_twice_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "mylib::twice: expected float32");
  for (int64_t i = 0; i < n; ++i) {
    static_cast<float*>(env->outputs[0].data)[i] = 2 * static_cast<const float*>(x->data)[i];
  }
  return TD_OK;
}
static const TdOpDecl kOps[] = {
    {"mylib::twice(Tensor x) -> Tensor", "return empty(x.shape, dtype=x.dtype)", NULL,
     "mylib_twice_cpu", nullptr},
};
TD_DEFINE_LIBRARY("mylib", kOps)
)SRC");
  BuildOptions o;
  o.name = "mylib";
  o.sources = {dir / "twice.cc"};
  o.output = dir / "mylib.tdk";
  absl::StatusOr<BuildResult> built = BuildArtifact(o);
  ASSERT_TRUE(built.ok()) << built.status();

  ArtifactPolicy policy;
  policy.mode = ArtifactPolicy::Mode::kAny;
  ArtifactStore store(policy, {});
  absl::StatusOr<std::string> hash = store.Add(testing_util::ReadFile(o.output), "test");
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, built->content_hash);
  absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = store.Load(*hash);
  ASSERT_TRUE(lib.ok()) << lib.status();
  ASSERT_NE((*lib)->kernel(0, DeviceType::kCPU), nullptr);
  EXPECT_NE((*lib)->kernel(0, DeviceType::kCPU)->fn, nullptr);
  ASSERT_EQ((*lib)->definitions().size(), 1u);
  EXPECT_EQ((*lib)->definitions()[0].schema, "mylib::twice(Tensor x) -> Tensor");
}

}  // namespace
}  // namespace tensord::runtime
