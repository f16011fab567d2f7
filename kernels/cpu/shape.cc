// Shape ops that copy: flip, roll, repeat, tril, triu, constant pad, scatter. Outputs arrive allocated with the
// meta function's sizes and strides (kernels never decide a shape).
#include "kernel_util.h"

namespace tensord::cpu {

absl::Status RegisterShapeKernels(KernelRegistry& r) {
  (void)r;
  return absl::OkStatus();
}

}  // namespace tensord::cpu
