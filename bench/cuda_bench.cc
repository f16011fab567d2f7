// cuda_bench — the CUDA figures of `make bench` (8, 9, 10): what a daemon's
// CUDA device gives the C++ client, each figure beside a peer that this
// binary runs on the same GPU in the same run, with no tensord in between.
// A benchmark, not a test: nothing here passes or fails on speed.
//
//   build/bin/cuda_bench [--json FILE] [--quick] [--only 8,9,10] [--tensord BIN] [--device cuda:N]
//
// Figure 8, elementwise bandwidth: c = a + b, c = a * b and c = exp(a) on
//   256 MiB float32 tensors on the device, pipelined (a block of ops, then
//   Synchronize); bytes moved per second (each input read once, the output
//   written once: 3 x 256 MiB for add and mul, 2 x for exp), in GB/s
//   (10^9 bytes), beside cudaMemcpyAsync device to device of 256 MiB (2 x
//   256 MiB moved) timed with CUDA events. Target >= 0.85.
// Figure 9, matrix products: mm of n x n by n x n for n = 4096 and 8192 in
//   float32 (TF32 off, PyTorch's default), float32 with TF32
//   (SetMathMode matmul_allow_tf32, tensord.backends.cuda.matmul.allow_tf32)
//   and bfloat16, in TFLOP/s (2 n^3 per product), beside
//   cublasGemmEx called directly on buffers of this process with the same
//   types and math mode. Target >= 0.95.
// Figure 10, transfers: upload (FromBlob onto the device + Synchronize) and
//   fetch (Tensor::Fetch of a device tensor: the bytes readable in this
//   process) of 256 MiB, in GB/s, beside cudaMemcpy host to device and device
//   to host from pinned (cudaHostAlloc) memory in this process. The daemon
//   runs on this host (Unix socket, shared memory). Target >= 0.8.
//
// The daemon is the real `tensord serve --listen unix:TMP/sock` (from
// --tensord, $TENSORD_BIN, else `tensord` beside this binary). Samples of
// tensord and of the peer alternate in blocks so that drift hits both.
// Without a GPU, or when the daemon serves no CUDA device, it prints
// "cuda_bench: SKIP: ..." with the reason and exits 0 having measured
// nothing (with --json, an empty list; scripts/gpu-check.sh fails a skip on
// a machine with a GPU).
//
// Output: a table on stdout; with --json, rows as bench/wire_bench.cc
// writes them (figure, name, unit, ours, peer, peer_name, ratio, target,
// transport, repeats, extra facts), for bench/run.py. Exit status 1 with a
// message on stderr when a call fails.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench_util.h"
#include "tensord/client/client.h"
#include "tensord/meta/math_mode.h"

namespace tc = tensord::client;
using tensord::Device;
using tensord::ScalarType;
using tensord::bench::Check;
using tensord::bench::Child;
using tensord::bench::Clock;
using tensord::bench::DaemonBinary;
using tensord::bench::Die;
using tensord::bench::Median;
using tensord::bench::ParseFigures;
using tensord::bench::PrintTable;
using tensord::bench::Row;
using tensord::bench::Seconds;
using tensord::bench::WriteJson;

namespace {

void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

void CheckBlas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) Die(absl::StrCat(what, ": ", cublasGetStatusString(s)));
}

// Device memory of this process, freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { CheckCuda(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Seconds that `fn` (work issued to `stream`) takes on the GPU, by events.
template <typename F>
double GpuSeconds(cudaStream_t stream, F fn) {
  cudaEvent_t start, stop;
  CheckCuda(cudaEventCreate(&start), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&stop), "cudaEventCreate");
  CheckCuda(cudaEventRecord(start, stream), "cudaEventRecord");
  fn();
  CheckCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
  CheckCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  CheckCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3;
}

// Waits for the current session's work (its device stream included).
void Synchronize() {
  std::shared_ptr<tc::Session> s = Check(tc::CurrentSession(), "current session");
  Check(s->Synchronize(), "synchronize");
}

// Wall seconds of `fn` followed by the session's Synchronize.
template <typename F>
double SessionSeconds(F fn) {
  const auto t0 = Clock::now();
  fn();
  Synchronize();
  return Seconds(t0, Clock::now());
}

// ---------------------------------------------------------------- figure 8

std::vector<Row> Figure8(const Device& dev, const std::string& card, bool quick) {
  const int cuda_index = dev.index;
  const int64_t n = (int64_t{256} << 20) / 4;
  const double gb = static_cast<double>(n) * 4 / 1e9;
  const int per_block = quick ? 5 : 20, blocks = quick ? 2 : 5;
  tc::Tensor a = Check(tc::Randn({n}, ScalarType::kFloat32, dev), "randn");
  tc::Tensor b = Check(tc::Randn({n}, ScalarType::kFloat32, dev), "randn");
  Synchronize();

  CheckCuda(cudaSetDevice(cuda_index), "cudaSetDevice");
  cudaStream_t stream;
  CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  DeviceBuffer src(static_cast<size_t>(n) * 4), dst(static_cast<size_t>(n) * 4);
  CheckCuda(cudaMemsetAsync(src.p, 0, static_cast<size_t>(n) * 4, stream), "cudaMemset");
  auto copies = [&] {
    for (int i = 0; i < per_block; ++i) {
      CheckCuda(cudaMemcpyAsync(dst.p, src.p, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
    }
  };
  (void)GpuSeconds(stream, copies);  // warm
  struct Op {
    const char* name;
    int tensors;  // inputs read plus the output written
  };
  std::vector<Row> rows;
  for (const Op& op : {Op{"add", 3}, Op{"mul", 3}, Op{"exp", 2}}) {
    auto ours_block = [&] {
      for (int i = 0; i < per_block; ++i) {
        if (std::strcmp(op.name, "exp") == 0) {
          (void)Check(tc::Call("exp", {a}), "exp");
        } else {
          (void)Check(tc::Call(op.name, {a, b}), op.name);
        }
      }
    };
    (void)SessionSeconds(ours_block);  // warm: the caching allocator holds the outputs' blocks from now on
    std::vector<double> ours, peer;
    for (int blk = 0; blk < blocks; ++blk) {
      ours.push_back(op.tensors * gb * per_block / SessionSeconds(ours_block));
      peer.push_back(2 * gb * per_block / GpuSeconds(stream, copies));
    }
    rows.push_back(Row{8, absl::StrCat(op.name, " 256 MiB float32 (", card, ")"), "GB/s", Median(ours),
                       Median(peer), "cudaMemcpyAsync device to device (same GPU)", ">= 0.85", "unix, shm",
                       blocks});
  }
  cudaStreamDestroy(stream);
  return rows;
}

// ---------------------------------------------------------------- figure 9

struct MatmulCase {
  const char* label;
  ScalarType dtype;
  bool tf32;
};

std::vector<Row> Figure9(const Device& dev, const std::string& card, bool quick) {
  const int cuda_index = dev.index;
  CheckCuda(cudaSetDevice(cuda_index), "cudaSetDevice");
  cudaStream_t stream;
  CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t handle;
  CheckBlas(cublasCreate(&handle), "cublasCreate");
  CheckBlas(cublasSetStream(handle, stream), "cublasSetStream");
  std::vector<Row> rows;
  std::vector<int64_t> sizes = {4096};
  if (!quick) sizes.push_back(8192);
  for (int64_t n : sizes) {
    const double tflop = 2.0 * static_cast<double>(n) * n * n / 1e12;
    const int per_block = n >= 8192 ? 3 : 10, blocks = quick ? 2 : 5;
    for (const MatmulCase& c : {MatmulCase{"float32", ScalarType::kFloat32, false},
                                MatmulCase{"float32 TF32", ScalarType::kFloat32, true},
                                MatmulCase{"bfloat16", ScalarType::kBFloat16, false}}) {
      tensord::MathMode mode;
      mode.matmul_allow_tf32 = c.tf32;
      Check(tc::SetMathMode(mode), "set math mode");
      tc::Tensor a = Check(tc::Randn({n, n}, c.dtype, dev), "randn");
      tc::Tensor b = Check(tc::Randn({n, n}, c.dtype, dev), "randn");
      auto ours_block = [&] {
        for (int i = 0; i < per_block; ++i) (void)Check(tc::Call("mm", {a, b}), "mm");
      };
      // The peer: the same product through cuBLAS on this process's buffers.
      const bool bf16 = c.dtype == ScalarType::kBFloat16;
      const size_t item = bf16 ? 2 : 4;
      DeviceBuffer pa(static_cast<size_t>(n * n) * item), pb(static_cast<size_t>(n * n) * item),
          pc(static_cast<size_t>(n * n) * item);
      CheckCuda(cudaMemsetAsync(pa.p, 0, static_cast<size_t>(n * n) * item, stream), "cudaMemset");
      CheckCuda(cudaMemsetAsync(pb.p, 0, static_cast<size_t>(n * n) * item, stream), "cudaMemset");
      CheckBlas(cublasSetMathMode(handle, c.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                "cublasSetMathMode");
      const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
      const cublasComputeType_t compute = c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      const float one = 1, zero = 0;
      const int ni = static_cast<int>(n);
      auto peer_block = [&] {
        for (int i = 0; i < per_block; ++i) {
          CheckBlas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, pb.p, t, ni, pa.p, t, ni, &zero,
                                 pc.p, t, ni, compute, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
        }
      };
      (void)SessionSeconds(ours_block);
      (void)GpuSeconds(stream, peer_block);
      std::vector<double> ours, peer;
      for (int blk = 0; blk < blocks; ++blk) {
        ours.push_back(tflop * per_block / SessionSeconds(ours_block));
        peer.push_back(tflop * per_block / GpuSeconds(stream, peer_block));
      }
      rows.push_back(Row{9, absl::StrCat("mm ", n, "^3 ", c.label, " (", card, ")"), "TFLOP/s",
                         Median(ours), Median(peer), "cublasGemmEx called directly (same GPU)", ">= 0.95",
                         "unix, shm", blocks});
    }
  }
  Check(tc::SetMathMode(tensord::MathMode()), "set math mode");
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return rows;
}

// ---------------------------------------------------------------- figure 10

std::vector<Row> Figure10(const Device& dev, const std::string& card, bool quick) {
  const int cuda_index = dev.index;
  const size_t bytes = size_t{256} << 20;
  const double gb = static_cast<double>(bytes) / 1e9;
  const int repeats = quick ? 2 : 7;
  CheckCuda(cudaSetDevice(cuda_index), "cudaSetDevice");
  void* pinned = nullptr;
  CheckCuda(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  auto* host = static_cast<float*>(pinned);
  for (size_t i = 0; i < bytes / 4; ++i) host[i] = static_cast<float>(i % 1000) * 0.001f;
  std::vector<float> src(bytes / 4);
  std::memcpy(src.data(), host, bytes);
  DeviceBuffer dbuf(bytes);
  std::vector<double> up, down, peer_up, peer_down;
  tc::Tensor t;
  for (int r = 0; r < repeats + 1; ++r) {  // the first round warms both
    auto t0 = Clock::now();
    t = Check(tc::FromBlob(src.data(), bytes, {static_cast<int64_t>(bytes / 4)}, ScalarType::kFloat32, dev),
              "upload");
    Synchronize();
    const double s_up = Seconds(t0, Clock::now());
    t0 = Clock::now();
    tc::HostData d = Check(t.Fetch(), "fetch");
    const double s_down = Seconds(t0, Clock::now());
    if (d.byte_size() != bytes || std::memcmp(d.byte_data(), src.data(), 4096) != 0) {
      Die("fetch: the bytes that came back are not the ones uploaded");
    }
    t0 = Clock::now();
    CheckCuda(cudaMemcpy(dbuf.p, pinned, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    const double p_up = Seconds(t0, Clock::now());
    t0 = Clock::now();
    CheckCuda(cudaMemcpy(pinned, dbuf.p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    const double p_down = Seconds(t0, Clock::now());
    if (r == 0) continue;
    up.push_back(gb / s_up);
    down.push_back(gb / s_down);
    peer_up.push_back(gb / p_up);
    peer_down.push_back(gb / p_down);
  }
  cudaFreeHost(pinned);
  const std::string where = absl::StrCat(" 256 MiB (", card, ", same host)");
  return {Row{10, "upload" + where, "GB/s", Median(up), Median(peer_up), "cudaMemcpy from pinned memory", ">= 0.8",
              "unix, shm", repeats},
          Row{10, "fetch" + where, "GB/s", Median(down), Median(peer_down), "cudaMemcpy to pinned memory", ">= 0.8",
              "unix, shm", repeats}};
}

void Usage() {
  std::fprintf(stderr,
               "usage: cuda_bench [--json FILE] [--quick] [--only 8,9,10] [--tensord BIN] [--device cuda:N]\n"
               "  figure 8: elementwise GB/s beside cudaMemcpy device to device; figure 9: mm TFLOP/s beside\n"
               "  cublasGemmEx; figure 10: upload/fetch GB/s beside cudaMemcpy from pinned memory.\n"
               "  The daemon binary: --tensord, else $TENSORD_BIN, else tensord beside this binary.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // As in the daemon and wire_bench: Debian's abseil records lock order in
  // every Mutex acquisition unless told not to.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string json_path, daemon_bin, device_name = "cuda:0";
  bool quick = false;
  std::set<int> only = {8, 9, 10};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--json") {
      json_path = next();
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--tensord") {
      daemon_bin = next();
    } else if (a == "--device") {
      device_name = next();
    } else if (a == "--only") {
      std::optional<std::set<int>> figures = ParseFigures(next(), {8, 9, 10});
      if (!figures.has_value()) return 2;
      only = *std::move(figures);
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      Usage();
      return 2;
    }
  }
  const Device dev = Check(tensord::ParseDevice(device_name), "--device");
  if (dev.type != tensord::DeviceType::kCUDA) Die(absl::StrCat("--device takes a cuda device, not ", device_name));
  daemon_bin = DaemonBinary(daemon_bin);
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count <= dev.index) {
    std::printf("cuda_bench: SKIP: no CUDA device %s in this process: %s\n", device_name.c_str(),
                e != cudaSuccess ? cudaGetErrorString(e) : absl::StrCat(count, " device(s)").c_str());
    if (!json_path.empty()) WriteJson(json_path, {});
    return 0;
  }

  char tmpl[] = "/tmp/tensord-cuda-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string dir = tmpl;
  std::vector<Row> rows;
  bool skipped = false;
  {
    Child daemon({daemon_bin, "serve", "--listen", "unix:" + dir + "/tensord.sock"}, dir + "/tensord.log");
    const std::string listening = daemon.WaitForLine("tensord: listening on ", 60000);
    if (listening.empty()) Die(absl::StrCat("tensord did not start; see ", dir, "/tensord.log"));
    std::shared_ptr<tc::Session> s = Check(tc::Session::Connect("unix:" + dir + "/tensord.sock"), "connect");
    if (!s->daemon_info().Serves(dev)) {
      std::printf("cuda_bench: SKIP: the daemon does not serve %s: %s\n", device_name.c_str(),
                  s->daemon_info().cuda_unavailable_reason.c_str());
      skipped = true;
    } else {
      tc::SessionGuard use(s);
      // Rows name the card: "add 256 MiB float32 (cuda:0 NVIDIA H100 80GB HBM3)".
      std::string card = device_name;
      for (const tc::DeviceInfo& d : s->daemon_info().device_info) {
        if (d.device == dev) card = absl::StrCat(device_name, " ", d.description);
      }
      std::printf("cuda_bench: on %s\n", card.c_str());
      if (only.count(8)) {
        for (Row& r : Figure8(dev, card, quick)) rows.push_back(std::move(r));
      }
      if (only.count(9)) {
        for (Row& r : Figure9(dev, card, quick)) rows.push_back(std::move(r));
      }
      if (only.count(10)) {
        for (Row& r : Figure10(dev, card, quick)) rows.push_back(std::move(r));
      }
    }
    s.reset();
    tc::ShutdownAll();
  }
  for (const char* f : {"/tensord.log", "/tensord.sock"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());
  if (!skipped) PrintTable(rows);
  if (!json_path.empty()) WriteJson(json_path, rows);  // [] when skipped
  return 0;
}
