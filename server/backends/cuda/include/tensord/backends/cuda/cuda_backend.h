// tensord/backends/cuda/cuda_backend.h — an NVIDIA GPU as a runtime Backend:
// cuda:N's memory (a runtime::CachingAllocator over cudaMalloc), one CUDA
// stream per session (CudaStream: copies through pinned staging buffers,
// kernel launches, events, the per-stream error word read at each
// Synchronize), and the kernels registered for DeviceType::kCUDA. No CUDA
// header here: the daemon (server/src) includes this file and must not see
// the device API (tests/python/test_layers.py).
//
//   CudaDiscovery d = DiscoverCudaDevices();
//   absl::StatusOr<std::unique_ptr<CudaBackend>> gpu = CudaBackend::Create(d.devices[0]);
//   devices.Add(*std::move(gpu));                    // cuda:0, after the cpu
//   Stream* s = *streams.For(*devices.Find({DeviceType::kCUDA, 0}));
//
// A GPU fault (a CUDA "sticky" error: an illegal address, a trap, an
// uncorrectable ECC error) seen by any call here is reported with
// runtime::ReportDeviceFailure before the call returns its error: the
// context is unusable for every session until the process restarts.
#ifndef TENSORD_BACKENDS_CUDA_CUDA_BACKEND_H_
#define TENSORD_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/backends/cuda/discovery.h"
#include "tensord/kernels/device_error.h"
#include "tensord/kernels/device_error_status.h"  // DeviceErrorToStatus: the word as the CPU's error
#include "tensord/kernels/registry.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/caching_allocator.h"

namespace tensord::backends {

struct CudaBackendOptions {
  // Copies between host memory and the GPU go through pinned (page-locked)
  // staging buffers of this many bytes, two per stream, allocated on the
  // stream's first such copy and kept (pooled by the backend) after it.
  size_t staging_chunk_bytes = size_t{8} << 20;
  // Most stream resources (pinned staging pairs and error-word buffers) the
  // backend keeps for the next session's stream once a stream goes;
  // beyond it they are freed.
  size_t max_pooled_streams = 8;
  runtime::CachingAllocatorOptions allocator;
};

class CudaStream;

class CudaBackend final : public runtime::Backend {
 public:
  // The backend of the GPU `info` describes (DiscoverCudaDevices). Makes no
  // CUDA context yet (the first stream or allocation does, lazily, so a
  // daemon that never uses a GPU never pays for its context).
  // FailedPrecondition when this build has neither machine code nor PTX the
  // GPU can run, naming its compute capability and the build's
  // architectures.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaDeviceInfo& info,
                                                             CudaBackendOptions options = {});
  ~CudaBackend() override;

  Device device() const override;
  // "NVIDIA H100 80GB HBM3" (what torch.cuda.get_device_name gives).
  std::string description() const override;
  int64_t total_memory_bytes() const override;
  // cudaMemGetInfo's free bytes once the GPU's context exists (the
  // allocator mapped memory); before, the total.
  int64_t free_memory_bytes() const override;
  // {major, minor}: {9, 0} for an H100.
  std::pair<int, int> capability() const override;
  const std::shared_ptr<runtime::DeviceAllocator>& allocator() const override { return allocator_; }
  bool host_addressable() const override { return false; }
  // A CudaStream for the session whose MemoryAccount::id() is `owner`: the
  // allocator zeroes that session's blocks on it and caches its freed
  // blocks for it until the stream goes (owner 0, no session's: neither).
  // InternalError naming the device when CUDA cannot make the stream or
  // the owner has a stream here already.
  absl::StatusOr<std::unique_ptr<runtime::Stream>> CreateStream(uint64_t owner) const override;
  KernelFn FindKernel(uint32_t op_id) const override;
  // The allocator's EmptyCache: segments no storage uses go back to the
  // device (after synchronizing it). Returns their bytes.
  int64_t Trim() override;

  runtime::CachingAllocator& caching_allocator() const { return *caching_; }
  // Streams whose resources wait in the pool (tests).
  size_t pooled_streams() const;

  // What the backend, its memory source, its streams and events share:
  // the device, the owner -> stream map, the pool of stream resources.
  struct Shared;

 private:
  CudaBackend(const CudaDeviceInfo& info, CudaBackendOptions options);

  const CudaDeviceInfo info_;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<runtime::CachingAllocator> caching_;
  std::shared_ptr<runtime::DeviceAllocator> allocator_;  // the same object
  KernelRegistry kernels_;
};

// A session's stream on one GPU (cudaStreamCreateWithFlags with
// cudaStreamNonBlocking: it never waits for the legacy default stream, nor
// another session's stream for it).
//
// Copies between host and device memory go through the stream's two pinned
// staging buffers, a chunk at a time, alternating: the host's memcpy of one
// chunk overlaps the DMA of the other. CopyFromHost returns once every
// chunk is staged and its DMA issued (the host bytes may change as soon as
// it returns); CopyToHost returns once the bytes are in `host_dst` (it
// waits for the work issued before it, as every caller synchronizes right
// after it anyway: no deferred staging-to-host copy to track until the next
// Synchronize or Event). CopyWithin is one cudaMemcpyAsync (overlapping
// ranges: in pieces that never overlap).
//
// Launch gives the kernel the stream (KernelContext::stream) and its error
// word (KernelContext::error_word, a DeviceErrorWord in device memory) and
// returns the kernel's status, or a launch error CUDA reports.
// Synchronize waits for the stream, then reads the error word: a bad index
// a kernel recorded there comes back as the IndexError the CPU kernel
// would have raised (DeviceErrorToStatus), and the word is zeroed for the
// next one.
//
// Used by one thread at a time (its session's); its Events may be waited
// for anywhere and outlive it. The destructor synchronizes the stream,
// detaches its owner from the allocator and gives its resources back.
class CudaStream final : public runtime::Stream {
 public:
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Device device() const override;
  void* native_handle() const override { return stream_; }  // a cudaStream_t
  absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) override;
  absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) override;
  absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) override;
  absl::Status Launch(KernelFn kernel, KernelContext& ctx) override;
  absl::StatusOr<std::shared_ptr<runtime::Event>> Record() override;
  // A CudaEvent (of any GPU): cudaStreamWaitEvent, nothing waits on the
  // host. Any other device's event: waited for here, on the host.
  absl::Status Wait(const std::shared_ptr<runtime::Event>& event) override;
  absl::Status Synchronize() override;

  // The device address of the stream's DeviceErrorWord.
  void* error_word() const { return word_.data; }
  uint64_t owner() const { return owner_; }

  struct Resources;  // pinned staging buffers, their events, the pinned copy of the error word

 private:
  friend class CudaBackend;
  CudaStream(std::shared_ptr<CudaBackend::Shared> shared, std::shared_ptr<runtime::CachingAllocator> allocator,
             uint64_t owner);
  // Makes the CUDA stream, registers the owner, takes the error word and
  // the resources; on failure the destructor undoes what was done.
  absl::Status Init();
  // The staging buffers, allocated on first use.
  absl::Status EnsureStaging();

  const std::shared_ptr<CudaBackend::Shared> shared_;
  const std::shared_ptr<runtime::CachingAllocator> allocator_;
  const uint64_t owner_;
  void* stream_ = nullptr;          // cudaStream_t
  bool registered_ = false;         // in the owner -> stream map, attached to the allocator
  runtime::DeviceAllocator::Block word_;
  std::unique_ptr<Resources> res_;
};

// Whether CUDA error `code` (a cudaError_t) is one the CUDA runtime
// documents as leaving the process's context unusable ("sticky": an
// illegal address, a trap, an assert, a launch failure or timeout, an
// uncorrectable ECC or NVLink error, a contained fault, ...).
bool IsStickyCudaError(int code);

// Whether a build for `architectures` (CMAKE_CUDA_ARCHITECTURES, entries
// separated by ';' or ',': "80-real", "90-virtual", "90" = both) has code a
// GPU of compute capability major.minor runs: machine code of the same
// major version and no newer minor one, or PTX of no newer version (which
// the driver compiles). FailedPrecondition naming both otherwise.
absl::Status CheckCudaArchitectures(absl::string_view architectures, int major, int minor);

// The architectures this build's CUDA code was compiled for
// (CMAKE_CUDA_ARCHITECTURES at configure time), "80-real,90-real,90-virtual".
absl::string_view BuiltCudaArchitectures();

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_CUDA_CUDA_BACKEND_H_
