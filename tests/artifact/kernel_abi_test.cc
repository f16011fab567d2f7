// The kernel ABI's layout is a promise to every artifact already built:
// these offsets and sizes may only grow at the ends of structs, never move.
// A change that moves one breaks every shipped kernel silently, so it must
// fail here first.
#include "tensord_kernel.h"

#include <cstddef>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"

namespace {

TEST(KernelAbiTest, VersionOneLayoutIsFrozen) {
  EXPECT_EQ(TD_KERNEL_ABI_VERSION, 1);
  // TdArg: kind, reserved, an 8-byte-aligned union of 16 bytes.
  EXPECT_EQ(offsetof(TdArg, kind), 0u);
  EXPECT_EQ(offsetof(TdArg, value), 8u);
  EXPECT_EQ(sizeof(TdArg), 24u);
  EXPECT_EQ(sizeof(TdScalar), 16u);
  // TdKernelEnv, version 1.
  EXPECT_EQ(offsetof(TdKernelEnv, abi_version), 0u);
  EXPECT_EQ(offsetof(TdKernelEnv, size), 4u);
  EXPECT_EQ(offsetof(TdKernelEnv, op_name), 8u);
  EXPECT_EQ(offsetof(TdKernelEnv, num_args), 16u);
  EXPECT_EQ(offsetof(TdKernelEnv, num_outputs), 20u);
  EXPECT_EQ(offsetof(TdKernelEnv, args), 24u);
  EXPECT_EQ(offsetof(TdKernelEnv, outputs), 32u);
  EXPECT_EQ(offsetof(TdKernelEnv, stream), 40u);
  EXPECT_EQ(offsetof(TdKernelEnv, scratch), 48u);
  EXPECT_EQ(offsetof(TdKernelEnv, set_error), 56u);
  EXPECT_EQ(offsetof(TdKernelEnv, daemon_private), 64u);
  EXPECT_EQ(sizeof(TdKernelEnv), 72u);
  // TdOpDecl and TdLibrary.
  EXPECT_EQ(sizeof(TdOpDecl), 40u);
  EXPECT_EQ(offsetof(TdOpDecl, cuda_symbol), 32u);
  EXPECT_EQ(offsetof(TdLibrary, name), 8u);
  EXPECT_EQ(offsetof(TdLibrary, num_ops), 16u);
  EXPECT_EQ(offsetof(TdLibrary, ops), 24u);
  // DLPack 0.6's DLTensor, which crosses the boundary as it is.
  EXPECT_EQ(sizeof(DLTensor), 48u);
}

int32_t Fails(TdKernelEnv* env) { return td_fail(env, "bad"); }

TEST(KernelAbiTest, TdFailSetsTheMessageAndReturnsAnError) {
  static const char* seen = nullptr;
  TdKernelEnv env{};
  env.set_error = [](TdKernelEnv*, const char* m) { seen = m; };
  EXPECT_EQ(Fails(&env), TD_ERROR);
  EXPECT_STREQ(seen, "bad");
}

int32_t Throws(TdKernelEnv* env) {
  TD_KERNEL_TRY
  throw std::runtime_error("boom");
  TD_KERNEL_CATCH(env)
}

TEST(KernelAbiTest, KernelCatchTurnsAnExceptionIntoAFailure) {
  static std::string seen;
  TdKernelEnv env{};
  env.set_error = [](TdKernelEnv*, const char* m) { seen = m; };
  EXPECT_EQ(Throws(&env), TD_ERROR);
  EXPECT_EQ(seen, "boom");
}

}  // namespace
