// An NVIDIA GPU behind the runtime's Backend interface, on the CUDA runtime
// API (cudart, linked statically): its memory source for the caching
// allocator, its streams and events, and the detection of GPU faults.
#include "tensord/backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tensord/kernels/cuda/cuda_kernels.h"
#include "tensord/kernels/device_error_status.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/runtime/log.h"

#ifndef TENSORD_CUDA_ARCHITECTURES
#define TENSORD_CUDA_ARCHITECTURES ""
#endif

namespace tensord::backends {

using runtime::Log;
using runtime::LogLevel;

// ---- what the backend's parts share ---------------------------------------------

struct CudaStream::Resources {
  char* staging[2] = {nullptr, nullptr};  // pinned, staging_chunk_bytes each (EnsureStaging)
  cudaEvent_t staged[2] = {nullptr, nullptr};  // recorded after the last DMA that used staging[i]
  DeviceErrorWord* host_word = nullptr;   // pinned: Synchronize reads the error word into it
};

struct CudaBackend::Shared {
  Shared(const CudaDeviceInfo& info, const CudaBackendOptions& o)
      : index(info.index), device{DeviceType::kCUDA, info.index}, options(o) {}
  ~Shared();

  const int index;
  const Device device;
  const CudaBackendOptions options;

  std::mutex mu;  // guards what follows
  absl::flat_hash_map<uint64_t, cudaStream_t> streams;  // owner -> its stream on this device
  std::vector<std::unique_ptr<CudaStream::Resources>> pool;  // idle: no work uses them

  cudaStream_t StreamOf(uint64_t owner) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = streams.find(owner);
    return it == streams.end() ? nullptr : it->second;
  }
  // The resources of a stream that went, for the next stream (freed
  // beyond the pool's size).
  void GiveBack(std::unique_ptr<CudaStream::Resources> r);
  // Idle resources, or new ones (their events and pinned error word).
  absl::StatusOr<std::unique_ptr<CudaStream::Resources>> Take();
  // Frees resources no work uses (with the device set).
  void Free(CudaStream::Resources& r);
};

namespace {

// Sets the calling thread's current device for a scope and restores the one
// it had: every CUDA call of the backend runs under one, since CUDA's
// calls act on the thread's current device and a session's thread may
// use several GPUs.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) : index_(index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != index_) set_ = cudaSetDevice(index_);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != index_ && set_ == cudaSuccess) {
      if (cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // cudaSetDevice's result (success when the device was current already).
  cudaError_t status() const { return set_; }

 private:
  const int index_;
  int previous_ = -1;
  cudaError_t set_ = cudaSuccess;
};

// Errors of finding the driver or making a device's context: they say the
// device cannot be used from here at all, and come back the same after a
// restart.
bool IsCudaSetupError(cudaError_t e) {
  switch (e) {
    case cudaErrorInitializationError:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDeviceUninitialized:
      return true;
    default:
      return false;
  }
}

// The error state after CUDA call `what` returned `e` on `device`: clears
// the thread's last error, and when the context is unusable (a sticky
// error, or a probe that fails after it) reports the device failed. The
// error to return: InternalError naming the device, the call and CUDA's
// words. Called with the device set.
absl::Status CudaFailed(const Device& device, cudaError_t e, absl::string_view what) {
  (void)cudaGetLastError();
  std::string why = cudaGetErrorString(e);
  // A sticky error stays: the next call that reaches the context returns
  // it again (cudaGetLastError cannot clear it). cudaMemGetInfo is such a
  // call, cheap, and harmless on a healthy context: an error it returns too
  // (or a sticky one of its own) means the context is gone. Errors of
  // setting up a context (no driver, a GPU taken by another process in
  // exclusive mode) persist as well, but a restart would not cure them:
  // they are the call's error, not a fault. The runtime unloading at
  // process exit is neither.
  bool failed = IsStickyCudaError(static_cast<int>(e));
  if (!failed && e != cudaErrorCudartUnloading && e != cudaErrorMemoryAllocation && !IsCudaSetupError(e)) {
    size_t free_bytes = 0, total_bytes = 0;
    const cudaError_t probe = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (probe != cudaSuccess) {
      (void)cudaGetLastError();
      if (IsStickyCudaError(static_cast<int>(probe)) || (probe == e && !IsCudaSetupError(probe))) {
        failed = true;
        why = cudaGetErrorString(probe);
      }
    }
  }
  if (failed) runtime::ReportDeviceFailure(device, why);
  return InternalErr(absl::StrCat(device.ToString(), ": ", what, ": ", cudaGetErrorString(e), " (",
                                  cudaGetErrorName(e), ")"));
}

#define TD_CUDA_RETURN_IF_ERROR(device, expr, what)                                     \
  do {                                                                                \
    const cudaError_t td_cuda_e_ = (expr);                                            \
    if (td_cuda_e_ != cudaSuccess) return CudaFailed((device), td_cuda_e_, (what));   \
  } while (0)

// For calls whose error has no caller to go to (destructors, Unmap): the
// fault is still reported, and the error logged.
void LogIfFailed(const Device& device, cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading) return;
  const absl::Status s = CudaFailed(device, e, what);
  Log(LogLevel::kWarning, s.message());
}

// A point in a CudaStream's order (cudaEventDisableTiming: no timestamp,
// the cheaper event).
class CudaEvent final : public runtime::Event {
 public:
  CudaEvent(std::shared_ptr<CudaBackend::Shared> shared, cudaEvent_t event)
      : shared_(std::move(shared)), event_(event) {}
  ~CudaEvent() override {
    DeviceGuard g(shared_->index);
    LogIfFailed(shared_->device, cudaEventDestroy(event_), "cudaEventDestroy");
  }
  bool Query() const override {
    DeviceGuard g(shared_->index);
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    (void)CudaFailed(shared_->device, e, "cudaEventQuery");
    return true;  // nothing left to wait for: Synchronize says what failed
  }
  absl::Status Synchronize() const override {
    DeviceGuard g(shared_->index);
    TD_CUDA_RETURN_IF_ERROR(shared_->device, g.status(), "cudaSetDevice");
    TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaEventSynchronize(event_), "cudaEventSynchronize");
    return absl::OkStatus();
  }
  cudaEvent_t event() const { return event_; }

 private:
  const std::shared_ptr<CudaBackend::Shared> shared_;
  const cudaEvent_t event_;
};

// The caching allocator's memory on one GPU.
class CudaMemorySource final : public runtime::DeviceMemorySource {
 public:
  CudaMemorySource(std::shared_ptr<CudaBackend::Shared> shared, int64_t total_bytes)
      : shared_(std::move(shared)), total_bytes_(total_bytes) {}

  Device device() const override { return shared_->device; }
  int64_t total_bytes() const override { return total_bytes_; }

  absl::StatusOr<char*> Map(size_t nbytes) override {
    DeviceGuard g(shared_->index);
    TD_CUDA_RETURN_IF_ERROR(shared_->device, g.status(), "cudaSetDevice");
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes);
    if (e == cudaErrorMemoryAllocation) {
      // Not sticky: cleared, and the allocator gives back its cache and
      // retries once.
      (void)cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      std::string room;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        room = absl::StrCat(" (", runtime::FormatBytes(static_cast<int64_t>(free_bytes)), " free of ",
                            runtime::FormatBytes(static_cast<int64_t>(total_bytes)), ")");
      } else {
        (void)cudaGetLastError();
      }
      return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", runtime::FormatBytes(static_cast<int64_t>(nbytes)),
                                                       " on ", shared_->device.ToString(), ": out of memory", room));
    }
    TD_CUDA_RETURN_IF_ERROR(shared_->device, e, absl::StrCat("cudaMalloc of ", nbytes, " bytes"));
    return static_cast<char*>(p);
  }

  void Unmap(char* base, size_t nbytes) override {
    DeviceGuard g(shared_->index);
    LogIfFailed(shared_->device, cudaFree(base), absl::StrCat("cudaFree of ", nbytes, " bytes"));
  }

  absl::Status Zero(char* p, size_t n, uint64_t owner) override {
    DeviceGuard g(shared_->index);
    TD_CUDA_RETURN_IF_ERROR(shared_->device, g.status(), "cudaSetDevice");
    if (cudaStream_t s = shared_->StreamOf(owner); s != nullptr) {
      TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaMemsetAsync(p, 0, n, s), "cudaMemsetAsync");
      return absl::OkStatus();
    }
    // An owner without a stream here: zeroed before anyone's later work by
    // waiting for it (the sessions' streams do not wait for the legacy
    // default stream).
    TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaMemsetAsync(p, 0, n, nullptr), "cudaMemsetAsync");
    TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    return absl::OkStatus();
  }

  absl::Status Synchronize() override {
    DeviceGuard g(shared_->index);
    TD_CUDA_RETURN_IF_ERROR(shared_->device, g.status(), "cudaSetDevice");
    TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<CudaBackend::Shared> shared_;
  const int64_t total_bytes_;
};

}  // namespace

// ---- Shared ----------------------------------------------------------------------

void CudaBackend::Shared::Free(CudaStream::Resources& r) {
  DeviceGuard g(index);
  for (int i = 0; i < 2; ++i) {
    if (r.staged[i] != nullptr) LogIfFailed(device, cudaEventDestroy(r.staged[i]), "cudaEventDestroy");
    if (r.staging[i] != nullptr) LogIfFailed(device, cudaFreeHost(r.staging[i]), "cudaFreeHost");
    r.staged[i] = nullptr;
    r.staging[i] = nullptr;
  }
  if (r.host_word != nullptr) LogIfFailed(device, cudaFreeHost(r.host_word), "cudaFreeHost");
  r.host_word = nullptr;
}

CudaBackend::Shared::~Shared() {
  for (auto& r : pool) Free(*r);
}

void CudaBackend::Shared::GiveBack(std::unique_ptr<CudaStream::Resources> r) {
  if (r == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (pool.size() < options.max_pooled_streams) {
      pool.push_back(std::move(r));
      return;
    }
  }
  Free(*r);
}

absl::StatusOr<std::unique_ptr<CudaStream::Resources>> CudaBackend::Shared::Take() {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!pool.empty()) {
      std::unique_ptr<CudaStream::Resources> r = std::move(pool.back());
      pool.pop_back();
      return r;
    }
  }
  auto r = std::make_unique<CudaStream::Resources>();
  absl::Status s = [&]() -> absl::Status {
    for (int i = 0; i < 2; ++i) {
      TD_CUDA_RETURN_IF_ERROR(device, cudaEventCreateWithFlags(&r->staged[i], cudaEventDisableTiming),
                              "cudaEventCreateWithFlags");
    }
    void* word = nullptr;
    TD_CUDA_RETURN_IF_ERROR(device, cudaHostAlloc(&word, sizeof(DeviceErrorWord), cudaHostAllocDefault),
                            "cudaHostAlloc of the error word's host copy");
    r->host_word = static_cast<DeviceErrorWord*>(word);
    std::memset(r->host_word, 0, sizeof(DeviceErrorWord));
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    Free(*r);
    return s;
  }
  return r;
}

// ---- CudaBackend -----------------------------------------------------------------

CudaBackend::CudaBackend(const CudaDeviceInfo& info, CudaBackendOptions options)
    : info_(info), shared_(std::make_shared<Shared>(info, options)) {
  caching_ = std::make_shared<runtime::CachingAllocator>(
      std::make_unique<CudaMemorySource>(shared_, info.total_memory_bytes), options.allocator);
  allocator_ = caching_;
}

CudaBackend::~CudaBackend() = default;

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaDeviceInfo& info,
                                                                 CudaBackendOptions options) {
  if (absl::Status s = CheckCudaArchitectures(BuiltCudaArchitectures(), info.major, info.minor); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cuda:", info.index, " (", info.name, "): ", s.message()));
  }
  if (options.staging_chunk_bytes == 0) options.staging_chunk_bytes = CudaBackendOptions{}.staging_chunk_bytes;
  std::unique_ptr<CudaBackend> b(new CudaBackend(info, std::move(options)));
  // The CUDA kernels (kernels/cuda/); an op without one is "not implemented
  // on cuda" (tests/kernels/cuda_missing_ops.txt lists them). Registering
  // touches no GPU.
  if (absl::Status s = RegisterCudaKernels(b->kernels_); !s.ok()) return s;
  // cuBLAS is loaded at run time: without it the daemon still serves the
  // GPU, and only the floating matrix products fail, each saying why.
  if (absl::Status blas = CudaBlasAvailable(); !blas.ok()) {
    Log(LogLevel::kWarning, "cuda:", info.index, ": matrix products will fail: ", blas.message());
  }
  return b;
}

Device CudaBackend::device() const { return shared_->device; }

std::string CudaBackend::description() const { return info_.name; }

std::pair<int, int> CudaBackend::capability() const { return {info_.major, info_.minor}; }

int64_t CudaBackend::free_memory_bytes() const {
  // cudaMemGetInfo needs the GPU's context, and making one costs hundreds of
  // MiB of the GPU: it is asked only once the allocator has mapped memory
  // (the context exists then). Before, nothing of this daemon is there and
  // the total is the answer (other processes' use is not seen until then).
  if (caching_->reserved_bytes() == 0) return Backend::free_memory_bytes();
  DeviceGuard g(info_.index);
  size_t free_bytes = 0, total_bytes = 0;
  if (g.status() != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return Backend::free_memory_bytes();
  }
  return static_cast<int64_t>(free_bytes);
}

int64_t CudaBackend::total_memory_bytes() const { return info_.total_memory_bytes; }

KernelFn CudaBackend::FindKernel(uint32_t op_id) const { return kernels_.Find(DeviceType::kCUDA, op_id); }

int64_t CudaBackend::Trim() { return caching_->EmptyCache(); }

size_t CudaBackend::pooled_streams() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->pool.size();
}

absl::StatusOr<std::unique_ptr<runtime::Stream>> CudaBackend::CreateStream(uint64_t owner) const {
  std::unique_ptr<CudaStream> s(new CudaStream(shared_, caching_, owner));
  TD_RETURN_IF_ERROR(s->Init());  // on failure ~CudaStream undoes what Init did
  return std::unique_ptr<runtime::Stream>(std::move(s));
}

// ---- CudaStream ------------------------------------------------------------------

CudaStream::CudaStream(std::shared_ptr<CudaBackend::Shared> shared,
                       std::shared_ptr<runtime::CachingAllocator> allocator, uint64_t owner)
    : shared_(std::move(shared)), allocator_(std::move(allocator)), owner_(owner) {}

absl::Status CudaStream::Init() {
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  cudaStream_t s = nullptr;
  TD_CUDA_RETURN_IF_ERROR(dev, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
  // Owner 0 is no session's: nothing is cached for it, and its blocks are
  // zeroed before anyone's later work (CudaMemorySource::Zero).
  if (owner_ != 0) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    // The allocator orders reuse of an owner's blocks by its one stream
    // per device: a second would break that.
    if (!shared_->streams.emplace(owner_, s).second) {
      return InternalErr(absl::StrCat(dev.ToString(), ": session ", owner_, " already has a stream on this device"));
    }
    registered_ = true;
  }
  if (registered_) allocator_->AttachOwner(owner_);
  // The word is zeroed on this stream (the owner's) before anything else
  // runs on it.
  TD_ASSIGN_OR_RETURN(word_, allocator_->Allocate(sizeof(DeviceErrorWord), /*zero_fill=*/true, owner_));
  TD_ASSIGN_OR_RETURN(res_, shared_->Take());
  return absl::OkStatus();
}

CudaStream::~CudaStream() {
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  if (stream_ != nullptr) {
    LogIfFailed(dev, cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
  }
  // The stream's work is done (or the device failed): its word and its
  // owner's cached blocks may serve anyone.
  if (word_.data != nullptr) allocator_->Free(word_, sizeof(DeviceErrorWord), owner_);
  if (registered_) {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->streams.erase(owner_);
    }
    allocator_->DetachOwner(owner_);
  }
  if (stream_ != nullptr) {
    LogIfFailed(dev, cudaStreamDestroy(static_cast<cudaStream_t>(stream_)), "cudaStreamDestroy");
  }
  shared_->GiveBack(std::move(res_));
}

Device CudaStream::device() const { return shared_->device; }

absl::Status CudaStream::EnsureStaging() {
  if (res_->staging[0] != nullptr && res_->staging[1] != nullptr) return absl::OkStatus();
  const size_t chunk = shared_->options.staging_chunk_bytes;
  for (int i = 0; i < 2; ++i) {
    if (res_->staging[i] != nullptr) continue;
    void* p = nullptr;
    TD_CUDA_RETURN_IF_ERROR(shared_->device, cudaHostAlloc(&p, chunk, cudaHostAllocDefault),
                            absl::StrCat("cudaHostAlloc of a ", runtime::FormatBytes(static_cast<int64_t>(chunk)),
                                         " staging buffer"));
    res_->staging[i] = static_cast<char*>(p);
  }
  return absl::OkStatus();
}

absl::Status CudaStream::CopyFromHost(char* device_dst, const char* host_src, size_t n) {
  if (n == 0) return absl::OkStatus();
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  TD_RETURN_IF_ERROR(EnsureStaging());
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  const size_t chunk = shared_->options.staging_chunk_bytes;
  int i = 0;
  for (size_t done = 0; done < n; done += chunk, i ^= 1) {
    const size_t len = std::min(chunk, n - done);
    // The DMA that last read this buffer (of this copy or an earlier one)
    // must be done before the buffer is written again; meanwhile the other
    // buffer's DMA runs.
    TD_CUDA_RETURN_IF_ERROR(dev, cudaEventSynchronize(res_->staged[i]), "cudaEventSynchronize (staging)");
    std::memcpy(res_->staging[i], host_src + done, len);
    TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(device_dst + done, res_->staging[i], len, cudaMemcpyHostToDevice, s),
                            absl::StrCat("cudaMemcpyAsync of ", len, " bytes to the device"));
    TD_CUDA_RETURN_IF_ERROR(dev, cudaEventRecord(res_->staged[i], s), "cudaEventRecord (staging)");
  }
  return absl::OkStatus();
}

absl::Status CudaStream::CopyToHost(char* host_dst, const char* device_src, size_t n) {
  if (n == 0) return absl::OkStatus();
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  TD_RETURN_IF_ERROR(EnsureStaging());
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  const size_t chunk = shared_->options.staging_chunk_bytes;
  // Chunk k's DMA goes into buffer k % 2; while it runs, chunk k - 1 is
  // copied from the other buffer to the host. A buffer is written by DMA
  // only after the host has copied its previous chunk out (the loop lands
  // chunk k - 2 before it issues chunk k).
  size_t prev_offset = 0, prev_len = 0;
  int prev = -1;
  const auto land = [&](int b, size_t offset, size_t len) -> absl::Status {
    TD_CUDA_RETURN_IF_ERROR(dev, cudaEventSynchronize(res_->staged[b]), "cudaEventSynchronize (staging)");
    std::memcpy(host_dst + offset, res_->staging[b], len);
    return absl::OkStatus();
  };
  int i = 0;
  for (size_t done = 0; done < n; done += chunk, i ^= 1) {
    const size_t len = std::min(chunk, n - done);
    TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(res_->staging[i], device_src + done, len, cudaMemcpyDeviceToHost, s),
                            absl::StrCat("cudaMemcpyAsync of ", len, " bytes from the device"));
    TD_CUDA_RETURN_IF_ERROR(dev, cudaEventRecord(res_->staged[i], s), "cudaEventRecord (staging)");
    if (prev >= 0) TD_RETURN_IF_ERROR(land(prev, prev_offset, prev_len));
    prev = i;
    prev_offset = done;
    prev_len = len;
  }
  return land(prev, prev_offset, prev_len);
}

absl::Status CudaStream::CopyWithin(char* device_dst, const char* device_src, size_t n) {
  if (n == 0 || device_dst == device_src) return absl::OkStatus();
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  const uintptr_t d = reinterpret_cast<uintptr_t>(device_dst), r = reinterpret_cast<uintptr_t>(device_src);
  const size_t distance = d > r ? d - r : r - d;
  if (distance >= n) {
    TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(device_dst, device_src, n, cudaMemcpyDeviceToDevice, s),
                            absl::StrCat("cudaMemcpyAsync of ", n, " bytes within the device"));
    return absl::OkStatus();
  }
  // Overlapping (cudaMemcpy's ranges may not): in pieces of `distance`
  // bytes, each of which overlaps no piece still to be read, taken from the
  // end when the destination lies above the source (as memmove does); the
  // stream runs them in order. Few pieces when the distance is large; a
  // short one goes through a block of the owner's, reused only by its
  // stream, so in order as well.
  if (distance >= n / 64) {
    for (size_t k = 0; k < n; k += distance) {
      const size_t len = std::min(distance, n - k);
      const size_t off = d > r ? n - k - len : k;
      TD_CUDA_RETURN_IF_ERROR(
          dev, cudaMemcpyAsync(device_dst + off, device_src + off, len, cudaMemcpyDeviceToDevice, s),
          absl::StrCat("cudaMemcpyAsync of ", len, " bytes within the device"));
    }
    return absl::OkStatus();
  }
  TD_ASSIGN_OR_RETURN(runtime::DeviceAllocator::Block tmp,
                      allocator_->Allocate(static_cast<int64_t>(n), /*zero_fill=*/false, owner_));
  absl::Status st = [&]() -> absl::Status {
    TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(tmp.data, device_src, n, cudaMemcpyDeviceToDevice, s),
                            absl::StrCat("cudaMemcpyAsync of ", n, " bytes within the device"));
    TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(device_dst, tmp.data, n, cudaMemcpyDeviceToDevice, s),
                            absl::StrCat("cudaMemcpyAsync of ", n, " bytes within the device"));
    return absl::OkStatus();
  }();
  allocator_->Free(tmp, static_cast<int64_t>(n), owner_);
  return st;
}

absl::Status CudaStream::Launch(KernelFn kernel, KernelContext& ctx) {
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  ctx.stream = stream_;
  ctx.error_word = word_.data;
  absl::Status s = kernel(ctx);
  // A launch the device refused (too many resources, no kernel image for
  // this GPU) is reported here; a fault while it runs, at a later call.
  if (const cudaError_t e = cudaPeekAtLastError(); e != cudaSuccess) {
    return CudaFailed(dev, e, absl::StrCat("launching the kernel of ", ctx.op != nullptr ? ctx.op->full_name() : "an op"));
  }
  return s;
}

absl::StatusOr<std::shared_ptr<runtime::Event>> CudaStream::Record() {
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  cudaEvent_t e = nullptr;
  TD_CUDA_RETURN_IF_ERROR(dev, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  auto event = std::make_shared<CudaEvent>(shared_, e);  // destroys `e` from here on
  TD_CUDA_RETURN_IF_ERROR(dev, cudaEventRecord(e, static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
  return std::shared_ptr<runtime::Event>(std::move(event));
}

absl::Status CudaStream::Wait(const std::shared_ptr<runtime::Event>& event) {
  if (event == nullptr) return absl::OkStatus();
  if (const auto* ce = dynamic_cast<const CudaEvent*>(event.get()); ce != nullptr) {
    const Device& dev = shared_->device;
    DeviceGuard g(shared_->index);
    TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
    TD_CUDA_RETURN_IF_ERROR(dev, cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), ce->event(), 0),
                            "cudaStreamWaitEvent");
    return absl::OkStatus();
  }
  // Another device's point: nothing on this GPU can wait for it, so the
  // host does before issuing more here.
  return event->Synchronize();
}

absl::Status CudaStream::Synchronize() {
  const Device& dev = shared_->device;
  DeviceGuard g(shared_->index);
  TD_CUDA_RETURN_IF_ERROR(dev, g.status(), "cudaSetDevice");
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  TD_CUDA_RETURN_IF_ERROR(dev, cudaMemcpyAsync(res_->host_word, word_.data, sizeof(DeviceErrorWord),
                                               cudaMemcpyDeviceToHost, s),
                          "cudaMemcpyAsync of the error word");
  TD_CUDA_RETURN_IF_ERROR(dev, cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (res_->host_word->code == kNoDeviceError) return absl::OkStatus();
  const DeviceErrorWord word = *res_->host_word;
  std::memset(res_->host_word, 0, sizeof(DeviceErrorWord));
  // Zeroed in stream order: the next kernel records into a clean word.
  TD_CUDA_RETURN_IF_ERROR(dev, cudaMemsetAsync(word_.data, 0, sizeof(DeviceErrorWord), s),
                          "cudaMemsetAsync of the error word");
  return DeviceErrorToStatus(word);
}

// ---- device-free helpers ---------------------------------------------------------

bool IsStickyCudaError(int code) {
  // The codes whose documentation (driver_types.h) says the process is left
  // in an inconsistent state and must be restarted, and the uncorrectable
  // hardware errors.
  switch (code) {
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

absl::string_view BuiltCudaArchitectures() { return TENSORD_CUDA_ARCHITECTURES; }

absl::Status CheckCudaArchitectures(absl::string_view architectures, int major, int minor) {
  const int cc = major * 10 + minor;
  bool any = false;
  for (absl::string_view entry : absl::StrSplit(architectures, absl::ByAnyChar(",;"), absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    bool real = true, virt = true;
    if (absl::ConsumeSuffix(&entry, "-real")) {
      virt = false;
    } else if (absl::ConsumeSuffix(&entry, "-virtual")) {
      real = false;
    }
    // "90a": features of that GPU alone (its code runs on 9.0 only);
    // "100f": of its family (the same major version).
    const bool specific = absl::ConsumeSuffix(&entry, "a");
    (void)absl::ConsumeSuffix(&entry, "f");
    int arch = 0;
    if (!absl::SimpleAtoi(entry, &arch) || arch <= 0) continue;  // "native", "all": not known here
    any = true;
    if (specific) {
      if (arch == cc) return absl::OkStatus();
      continue;
    }
    // Machine code runs on its major version, at its minor or a later one;
    // PTX is compiled by the driver for its own version or any later GPU.
    if (real && arch / 10 == major && arch % 10 <= minor) return absl::OkStatus();
    if (virt && arch <= cc) return absl::OkStatus();
  }
  if (!any) return absl::OkStatus();  // nothing known to compare with: let the driver decide
  return absl::FailedPreconditionError(
      absl::StrCat("compute capability ", major, ".", minor, " runs none of this build's CUDA code (built for ",
                   architectures, "); rebuild with CMAKE_CUDA_ARCHITECTURES including ", cc));
}

}  // namespace tensord::backends
