// kernels/cuda/random_call.h — what one random launch is, as the host side
// (random_kernels.h) describes it to the device side (random.cu): fill one
// tensor with uniform, normal or integer draws from the session's Philox
// state. Plain C++ (no CUDA header), so host code builds calls and the host
// tests run them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_RANDOM_CALL_H_
#define TENSORD_KERNELS_CUDA_RANDOM_CALL_H_

#include <cstdint>

#include "offset_calculator.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

enum class RandomOp : int {
  kUniform,  // [a, b): rand, rand_like, uniform_
  kNormal,   // mean a, standard deviation b: randn, randn_like, normal_
  kRandint,  // [low, low + range): randint, randint.low
};

struct RandomCall {
  RandomOp op = RandomOp::kUniform;
  ScalarType dtype = ScalarType::kFloat32;  // the output's
  char* out = nullptr;
  // One operand (the output), built with BuildLogicalGeometry: the linear
  // index is the element's row-major index, the `i` of its Philox counter,
  // so a seed gives the same values whatever the output's strides.
  ElementwiseGeometry geometry;
  // Philox's key and the counter offset of this call (random_kernels.h's
  // TakePhiloxState): element i uses the one 128-bit block at counter
  // (offset, i).
  uint64_t seed = 0;
  uint64_t offset = 0;
  double a = 0, b = 1;  // kUniform: from, to; kNormal: mean, std
  int64_t low = 0;      // kRandint
  uint64_t range = 1;   // kRandint: high - low, >= 1
};

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in random.cu, built only with CUDA.
int LaunchRandomCuda(const RandomCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_RANDOM_CALL_H_
