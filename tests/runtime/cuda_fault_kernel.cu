// A kernel that writes through an address no allocation owns: the GPU fault
// (an illegal address, a sticky CUDA error) that cuda_backend_test.cc
// provokes in a child process to see the backend report the device failed.
#include <cuda_runtime_api.h>

namespace {

__global__ void WriteThroughABadAddress(int* p) { *p = 42; }

}  // namespace

// Launches it on `stream` (a cudaStream_t); returns the launch's error code
// (cudaSuccess: the fault comes when the kernel runs).
int TensordTestLaunchIllegalWrite(void* stream) {
  WriteThroughABadAddress<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<int*>(0x10));
  return static_cast<int>(cudaPeekAtLastError());
}
