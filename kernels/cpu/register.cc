// RegisterCpuKernels: one call per kernel file. Explicit calls rather than
// static registrars, which the linker drops from static libraries.
#include "kernel_util.h"
#include "tensord/kernels/registry.h"

namespace tensord {

absl::Status RegisterCpuKernels(KernelRegistry& registry) {
  TD_RETURN_IF_ERROR(cpu::RegisterFactoryKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterUnaryKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterBinaryKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterReduceKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterMatmulKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterCopyKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterIndexKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterNnKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterScatterKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterScanKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterShapeKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterConvKernels(registry));
  TD_RETURN_IF_ERROR(cpu::RegisterOptimKernels(registry));
  return absl::OkStatus();
}

}  // namespace tensord
