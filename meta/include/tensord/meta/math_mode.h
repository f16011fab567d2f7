// tensord/meta/math_mode.h — a session's numerics switches: PyTorch's
// torch.backends flags that let kernels trade float32 precision for speed.
// The client keeps them (tensord.backends.cuda.matmul.allow_tf32,
// tensord.backends.cudnn.allow_tf32, tensord.set_float32_matmul_precision)
// and sends them to its sessions (SetMathMode in tensord.proto); the daemon
// hands them to every kernel (KernelContext::math). Per session, so one
// user's choice never changes another's results on a shared daemon. CPU
// kernels ignore them.
#ifndef TENSORD_META_MATH_MODE_H_
#define TENSORD_META_MATH_MODE_H_

namespace tensord {

struct MathMode {
  // float32 matrix products (mm, bmm, addmm, matmul, linear, ...) may use
  // TF32 tensor cores (10-bit mantissas in the products). Off by default, as
  // torch.backends.cuda.matmul.allow_tf32.
  bool matmul_allow_tf32 = false;
  // float32 convolutions may use TF32. On by default, as
  // torch.backends.cudnn.allow_tf32.
  bool conv_allow_tf32 = true;

  bool operator==(const MathMode& o) const {
    return matmul_allow_tf32 == o.matmul_allow_tf32 && conv_allow_tf32 == o.conv_allow_tf32;
  }
  bool operator!=(const MathMode& o) const { return !(*this == o); }
};

}  // namespace tensord

#endif  // TENSORD_META_MATH_MODE_H_
