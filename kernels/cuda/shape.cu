// The CUDA shape kernels (shape.cuh): remaps (flip, roll, repeat,
// constant_pad_nd, tril, triu) and sequences (arange, linspace).
#include "shape.cuh"

namespace tensord::cuda {

int LaunchRemapCuda(const RemapCall& call, void* stream) { return DispatchRemap<CudaShapeEngine>(call, stream); }

int LaunchSequenceCuda(const SequenceCall& call, void* stream) {
  return DispatchSequence<CudaShapeEngine>(call, stream);
}

}  // namespace tensord::cuda
