// The checks before a backward walks its graph (tensord::CheckBackwardRoots),
// which the client's meta engine and the daemon both run: PyTorch's words,
// in PyTorch's order.
#include <vector>

#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/autograd_rules.h"

namespace tensord {
namespace {

using meta_test::Dense;
using meta_test::ExpectErrorContains;

TEST(CheckBackwardRootsTest, AScalarRootTakesAnImplicitGradient) {
  const TensorMeta loss = Dense({});
  EXPECT_TRUE(CheckBackwardRoots({BackwardRoot{&loss, true, nullptr}}, 0).ok());
  const TensorMeta one = Dense({1, 1});
  EXPECT_TRUE(CheckBackwardRoots({BackwardRoot{&one, true, nullptr}}, 0).ok());
}

TEST(CheckBackwardRootsTest, ANonScalarRootNeedsAGivenGradientOfItsShape) {
  const TensorMeta y = Dense({3}), g = Dense({3}), wrong = Dense({2});
  ExpectErrorContains(CheckBackwardRoots({BackwardRoot{&y, true, nullptr}}, 0), ErrorKind::kRuntime,
                      "grad can be implicitly created only for scalar outputs");
  EXPECT_TRUE(CheckBackwardRoots({BackwardRoot{&y, true, &g}}, 1).ok());
  ExpectErrorContains(CheckBackwardRoots({BackwardRoot{&y, true, &wrong}}, 1), ErrorKind::kRuntime,
                      "Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and output[0] has a shape "
                      "of torch.Size([3]).");
}

TEST(CheckBackwardRootsTest, EveryRootMustRequireGrad) {
  const TensorMeta a = Dense({}), b = Dense({});
  ExpectErrorContains(CheckBackwardRoots({BackwardRoot{&a, true, nullptr}, BackwardRoot{&b, false, nullptr}}, 0),
                      ErrorKind::kRuntime,
                      "element 1 of tensors does not require grad and does not have a grad_fn");
}

TEST(CheckBackwardRootsTest, GivenGradientsMatchTheRootsInNumber) {
  const TensorMeta a = Dense({2}), b = Dense({2});
  ExpectErrorContains(CheckBackwardRoots({BackwardRoot{&a, true, &a}, BackwardRoot{&b, true, nullptr}}, 1),
                      ErrorKind::kRuntime, "got 2 tensors and 1 gradients");
}

}  // namespace
}  // namespace tensord
