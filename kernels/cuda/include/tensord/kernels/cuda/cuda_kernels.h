// tensord/kernels/cuda/cuda_kernels.h — the CUDA kernels (kernels/cuda/),
// built only with the CUDA toolkit (the kernels_cuda target,
// TENSORD_HAVE_CUDA). The CUDA backend registers them at start-up:
//
//   KernelRegistry reg;
//   TD_RETURN_IF_ERROR(RegisterCudaKernels(reg));
//   KernelFn k = reg.Find(DeviceType::kCUDA, op.id);   // nullptr: no CUDA kernel yet
//
// A CUDA kernel reads its arguments as the op's CPU kernel does (the same
// checks, errors and dtypes), issues its work to ctx.stream (a
// cudaStream_t; every input and output pointer is device memory on
// ctx.device, which must be the current device) and returns before the work
// has run: an error it returns is one found before launching (a bad
// argument, a failed launch: an internal error naming the op); an error
// while the kernel runs surfaces at the stream's next synchronisation, and
// a bad index is recorded in ctx.error_word (device_error.h). Temporaries
// come from the calling thread's ScratchAllocator, which must hand out
// memory of ctx.device whose reuse is ordered after the stream's work
// (else cudaMallocAsync on the stream). docs/adding-an-op.md says how to
// add one; tests/kernels/cuda_missing_ops.txt lists the ops still without.
#ifndef TENSORD_KERNELS_CUDA_CUDA_KERNELS_H_
#define TENSORD_KERNELS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "tensord/kernels/registry.h"

namespace tensord {

// Registers every CUDA kernel for DeviceType::kCUDA. Returns the first
// registration error (a build bug: a kernel for an op the table lacks, or
// registered twice). Calls no CUDA API: it works on a machine without a GPU.
absl::Status RegisterCudaKernels(KernelRegistry& registry);

// OK when cuBLAS (libcublas.so.13, loaded with dlopen at the first call of
// this or of a floating matrix product) is usable; else a RuntimeError
// saying why (the dlopen error), for the daemon to report at start-up. The
// daemon runs without it: only the floating matrix products fail, each
// with that reason.
absl::Status CudaBlasAvailable();

}  // namespace tensord

#endif  // TENSORD_KERNELS_CUDA_CUDA_KERNELS_H_
