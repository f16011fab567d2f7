// Artifact kernels in a worker process (--artifact-isolation process): a
// kernel that segfaults, aborts or never returns ends only its worker, the
// call fails naming the op, the next call starts a new worker, another
// session's worker goes on; results equal the in-process ones; a worker
// ends with its owner; the daemon runs none of an isolated artifact's code.
//
// The worker is the tensord binary (`tensord artifact-worker FD`): the one
// built beside this test ($TENSORD_BIN when set).
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../artifact/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/artifact/artifact.h"
#include "tensord/artifact/elf_inspect.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/artifact_worker.h"
#include "tensord/runtime/artifacts.h"

namespace tensord::runtime {
namespace {

using ::testing::HasSubstr;
using testing_util::RunShell;
using testing_util::TempDir;

constexpr char kSource[] = R"SRC(
#include <tensord_kernel.h>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

// (y, z) = (a * x + b, neg ? -x : x) over any strides of x, float32; `dims`
// must be x's sizes (an int[] argument that crosses too).
static int32_t Affine(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const double a = env->args[1].value.f;
  const TdScalar b = env->args[2].value.scalar;
  const TdIntList dims = env->args[3].value.ints;
  const bool neg = env->args[4].value.b != 0;
  if (env->num_outputs != 2) return td_fail(env, "expected two outputs");
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "expected float32");
  if (dims.size != x->ndim) return td_fail(env, "dims does not match x");
  for (int d = 0; d < x->ndim; ++d) {
    if (dims.data[d] != x->shape[d]) return td_fail(env, "dims does not match x");
  }
  const double bv = b.kind == TD_ARG_FLOAT ? b.value.f : static_cast<double>(b.value.i);
  DLTensor* y = &env->outputs[0];
  DLTensor* z = &env->outputs[1];
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, xo = 0, yo = 0, zo = 0;
    for (int d = x->ndim - 1; d >= 0; --d) {
      const int64_t k = rest % x->shape[d];
      rest /= x->shape[d];
      xo += k * x->strides[d];
      yo += k * y->strides[d];
      zo += k * z->strides[d];
    }
    const float v = static_cast<const float*>(x->data)[xo];
    static_cast<float*>(y->data)[yo] = static_cast<float>(a * v + bv);
    static_cast<float*>(z->data)[zo] = neg ? -v : v;
  }
  return TD_OK;
}
TD_EXPORT int32_t iso_affine_cpu(TdKernelEnv* env) { TD_KERNEL_TRY return Affine(env); TD_KERNEL_CATCH(env) }
TD_EXPORT int32_t iso_segv_cpu(TdKernelEnv*) {
  volatile int* p = reinterpret_cast<volatile int*>(16);  // not mapped: a real SIGSEGV
  *p = 1;
  return TD_OK;
}
TD_EXPORT int32_t iso_abort_cpu(TdKernelEnv*) { std::abort(); }
TD_EXPORT int32_t iso_spin_cpu(TdKernelEnv*) {
  for (volatile unsigned long i = 0;; i = i + 1) {
  }
}
// Forks a child that keeps the worker's end of the socket open, then
// crashes: the daemon must see the worker's end all the same.
TD_EXPORT int32_t iso_forksegv_cpu(TdKernelEnv*) {
  if (fork() == 0) {
    for (;;) pause();
  }
  volatile int* p = reinterpret_cast<volatile int*>(16);
  *p = 1;
  return TD_OK;
}
TD_EXPORT int32_t iso_fail_cpu(TdKernelEnv* env) { return td_fail(env, "x must be positive, got -1"); }
TD_EXPORT int32_t iso_throw_cpu(TdKernelEnv*) { throw std::runtime_error("thrown past the boundary"); }
// Copies x through scratch memory, which the worker gives.
TD_EXPORT int32_t iso_scratch_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const int64_t n = x->shape[0];
  float* tmp = static_cast<float*>(env->scratch(env, n * 4));
  if (tmp == nullptr) return td_fail(env, "no scratch");
  std::memcpy(tmp, x->data, n * 4);
  std::memcpy(env->outputs[0].data, tmp, n * 4);
  return TD_OK;
}

static const TdOpDecl kOps[] = {
    {"iso::affine(Tensor x, float a, Scalar b, int[] dims, bool neg) -> (Tensor, Tensor)",
     "return empty(x.shape), empty(x.shape)", NULL, "iso_affine_cpu", NULL},
    {"iso::segv(Tensor x) -> Tensor", "like:clone", NULL, "iso_segv_cpu", NULL},
    {"iso::abort(Tensor x) -> Tensor", "like:clone", NULL, "iso_abort_cpu", NULL},
    {"iso::spin(Tensor x) -> Tensor", "like:clone", NULL, "iso_spin_cpu", NULL},
    {"iso::fail(Tensor x) -> Tensor", "like:clone", NULL, "iso_fail_cpu", NULL},
    {"iso::throws(Tensor x) -> Tensor", "like:clone", NULL, "iso_throw_cpu", NULL},
    {"iso::scratch(Tensor x) -> Tensor", "like:clone", NULL, "iso_scratch_cpu", NULL},
    {"iso::forksegv(Tensor x) -> Tensor", "like:clone", NULL, "iso_forksegv_cpu", NULL},
};
TD_DEFINE_LIBRARY("iso", kOps)
)SRC";

enum Op : size_t { kAffine, kSegv, kAbort, kSpin, kFail, kThrows, kScratch, kForkSegv };

std::vector<ArtifactOp> DeclaredOps() {
  return {
      {"iso::affine(Tensor x, float a, Scalar b, int[] dims, bool neg) -> (Tensor, Tensor)",
       "return empty(x.shape), empty(x.shape)", "", "iso_affine_cpu", ""},
      {"iso::segv(Tensor x) -> Tensor", "like:clone", "", "iso_segv_cpu", ""},
      {"iso::abort(Tensor x) -> Tensor", "like:clone", "", "iso_abort_cpu", ""},
      {"iso::spin(Tensor x) -> Tensor", "like:clone", "", "iso_spin_cpu", ""},
      {"iso::fail(Tensor x) -> Tensor", "like:clone", "", "iso_fail_cpu", ""},
      {"iso::throws(Tensor x) -> Tensor", "like:clone", "", "iso_throw_cpu", ""},
      {"iso::scratch(Tensor x) -> Tensor", "like:clone", "", "iso_scratch_cpu", ""},
      {"iso::forksegv(Tensor x) -> Tensor", "like:clone", "", "iso_forksegv_cpu", ""},
  };
}

std::string CompileSo(const std::string& source) {
  TempDir dir;
  testing_util::WriteFile(dir / "k.cc", source);
  const auto [rc, out] = RunShell("g++ -std=c++17 -O1 -shared -fPIC -fvisibility=hidden -I" TENSORD_TEST_ABI_DIR " " +
                                  (dir / "k.cc") + " -o " + (dir / "k.so"));
  EXPECT_EQ(rc, 0) << out;
  return testing_util::ReadFile(dir / "k.so");
}

std::string ArtifactOf(const std::string& so) {
  Manifest m;
  m.abi_version = TD_KERNEL_ABI_VERSION;
  m.library = "iso";
  m.ops = DeclaredOps();
  absl::StatusOr<ElfInfo> elf = InspectElf(so);
  EXPECT_TRUE(elf.ok()) << elf.status();
  if (elf.ok()) SetElfFacts(*elf, &m);
  return SerializeArtifact(m, so);
}

const std::string& Library() {
  static const std::string* file = new std::string(ArtifactOf(CompileSo(kSource)));
  return *file;
}

std::string WorkerBinary() {
  if (const char* env = std::getenv("TENSORD_BIN"); env != nullptr && *env != '\0') return env;
  return (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "bin" / "tensord").string();
}

ArtifactPolicy Policy(ArtifactPolicy::Isolation isolation) {
  ArtifactPolicy p;
  p.mode = ArtifactPolicy::Mode::kAny;
  p.isolation = isolation;
  p.call_timeout = absl::Seconds(1);
  p.worker_binary = WorkerBinary();
  return p;
}

// Whether process `pid` is gone: neither running nor a zombie left unreaped.
bool Gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// Processes of process group `pgid` that still run (zombies left to an
// init that does not reap, as in some containers, do not count).
int LiveInGroup(pid_t pgid) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing_util::ReadFile(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
        state != 'Z') {
      ++n;
    }
  }
  return n;
}

// A float32 CPU tensor: its storage and metadata.
struct HostTensor {
  TensorMeta meta;
  std::vector<float> data;
  HostTensor(Shape sizes, std::vector<float> values)
      : meta(TensorMeta::Contiguous(std::move(sizes), ScalarType::kFloat32, kCPU)), data(std::move(values)) {}
  char* base() { return reinterpret_cast<char*>(data.data()); }
};

// A session's view of one artifact: its store, the loaded artifact and,
// under isolation, its worker and the per-op kernels that go there (as a
// server session makes them).
class Session {
 public:
  explicit Session(ArtifactStore* store)
      : store_(store), lib_(*store->Load(*store->Add(Library(), "test"))), worker_(store, MemoryAccount::Create(0)) {
    for (size_t i = 0; i < DeclaredOps().size(); ++i) {
      ArtifactKernel k;
      k.op_name = lib_->op_name(i);
      k.worker = &worker_;
      k.artifact = lib_.get();
      k.op_index = i;
      kernels_.push_back(k);
    }
  }
  const ArtifactKernel& kernel(size_t i) {
    if (store_->policy().isolation == ArtifactPolicy::Isolation::kProcess) return kernels_[i];
    return *lib_->kernel(i, DeviceType::kCPU);
  }
  // Op `i` on x into y (one input, one output).
  absl::Status Call(size_t i, HostTensor& x, HostTensor& y) {
    std::vector<Value> args = {Value(&x.meta)};
    KernelContext ctx;
    ctx.args = args;
    ctx.input_base = [&x](const TensorMeta* m) -> char* { return m == &x.meta ? x.base() : nullptr; };
    ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
    return RunArtifactKernel(kernel(i), ctx);
  }
  // iso::affine(x, a, b, x's sizes, neg) into y, z.
  absl::Status Affine(HostTensor& x, double a, Scalar b, bool neg, HostTensor& y, HostTensor& z) {
    std::vector<Value> args = {Value(&x.meta), Value(a), Value(b), Value(x.meta.sizes), Value(neg)};
    KernelContext ctx;
    ctx.args = args;
    ctx.input_base = [&x](const TensorMeta* m) -> char* { return m == &x.meta ? x.base() : nullptr; };
    ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
    ctx.outputs.push_back(TensorRef{z.base(), &z.meta});
    return RunArtifactKernel(kernel(kAffine), ctx);
  }
  ArtifactWorker& worker() { return worker_; }
  const LoadedArtifact& lib() const { return *lib_; }

 private:
  ArtifactStore* store_;
  std::shared_ptr<LoadedArtifact> lib_;
  ArtifactWorker worker_;
  std::vector<ArtifactKernel> kernels_;
};

TEST(ArtifactIsolationTest, ResultsEqualInProcess) {
  ArtifactStore in_process(Policy(ArtifactPolicy::Isolation::kNone), {});
  ArtifactStore isolated(Policy(ArtifactPolicy::Isolation::kProcess), {});
  Session a(&in_process), b(&isolated);
  EXPECT_TRUE(a.lib().object_loaded());
  EXPECT_FALSE(b.lib().object_loaded());  // the daemon runs none of its code
  // A strided input: a transposed view at a storage offset, in a storage
  // larger than what it addresses.
  std::vector<float> values(40);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  for (Scalar s : {Scalar::Float(0.25), Scalar::Int(-3)}) {
    for (bool neg : {false, true}) {
      std::vector<std::vector<float>> got[2];
      for (Session* session : {&a, &b}) {
        HostTensor x({4, 6}, values);
        x.meta.sizes = {6, 4};
        x.meta.strides = {1, 6};
        x.meta.storage_offset = 3;
        HostTensor y({6, 4}, std::vector<float>(24, -1)), z({6, 4}, std::vector<float>(24, -1));
        z.meta.strides = {1, 6};  // an output with strides of its own
        ASSERT_TRUE(session->Affine(x, 1.5, s, neg, y, z).ok());
        got[session == &b].push_back(y.data);
        got[session == &b].push_back(z.data);
        EXPECT_EQ(x.data, values);  // inputs stay as they were
      }
      EXPECT_EQ(got[0], got[1]);
      EXPECT_EQ(got[0][0][0], static_cast<float>(1.5 * values[3] + s.to_double()));
    }
  }
  // Scratch memory comes from the worker; an empty tensor crosses.
  HostTensor x({5}, {1, 2, 3, 4, 5}), y({5}, std::vector<float>(5, 0));
  ASSERT_TRUE(b.Call(kScratch, x, y).ok());
  EXPECT_EQ(y.data, x.data);
  HostTensor e({0}, {}), f({0}, {});
  EXPECT_TRUE(b.Call(kScratch, e, f).ok());
  EXPECT_EQ(b.worker().starts(), 1);
}

TEST(ArtifactIsolationTest, KernelErrorsReadAsInProcess) {
  ArtifactStore in_process(Policy(ArtifactPolicy::Isolation::kNone), {});
  ArtifactStore isolated(Policy(ArtifactPolicy::Isolation::kProcess), {});
  Session a(&in_process), b(&isolated);
  for (size_t op : {kFail, kThrows}) {
    HostTensor x({2}, {1, 2}), y({2}, {0, 0});
    const absl::Status want = a.Call(op, x, y);
    const absl::Status got = b.Call(op, x, y);
    EXPECT_FALSE(got.ok());
    EXPECT_EQ(got, want);
  }
  HostTensor x({2}, {1, 2}), y({2}, {0, 0});
  EXPECT_THAT(b.Call(kFail, x, y).message(), HasSubstr("iso::fail: x must be positive, got -1"));
  // What the ABI refuses is refused alike, with its kind (NotImplementedError).
  HostTensor f8({2}, {0, 0});
  f8.meta.dtype = ScalarType::kFloat8_e4m3fn;
  const absl::Status want = a.Call(kScratch, f8, y);
  EXPECT_EQ(tensord::KindOf(want), tensord::ErrorKind::kNotImplemented);
  EXPECT_EQ(b.Call(kScratch, f8, y), want);
  EXPECT_EQ(b.worker().starts(), 1);  // a kernel's error leaves its worker running
}

TEST(ArtifactIsolationTest, HostileKernelsEndOnlyTheirWorker) {
  ArtifactStore store(Policy(ArtifactPolicy::Isolation::kProcess), {});
  Session s(&store), other(&store);
  HostTensor x({3}, {1, 2, 3}), y({3}, {0, 0, 0}), z({3}, {0, 0, 0});
  ASSERT_TRUE(other.Affine(x, 2, Scalar::Int(0), false, y, z).ok());
  const pid_t other_pid = other.worker().pid();
  ASSERT_GT(other_pid, 0);
  struct Case {
    Op op;
    const char* what;
  };
  const Case cases[] = {
      {kSegv, "iso::segv: the kernel ended its artifact worker process: signal 11 (Segmentation fault)"},
      {kAbort, "iso::abort: the kernel ended its artifact worker process: signal 6 (Aborted)"},
      {kSpin, "iso::spin: the kernel ran past the time limit of 1s (--artifact-call-timeout), and its artifact "
              "worker process was killed"},
  };
  ASSERT_TRUE(s.Affine(x, 1, Scalar::Int(1), false, y, z).ok());
  int starts = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const pid_t pid = s.worker().pid();
    ASSERT_GT(pid, 0);
    const absl::Status st = s.Call(c.op, x, y);
    EXPECT_EQ(tensord::KindOf(st), tensord::ErrorKind::kRuntime);
    EXPECT_THAT(st.message(), HasSubstr(c.what));
    EXPECT_TRUE(Gone(pid));  // killed if need be, and reaped
    EXPECT_EQ(s.worker().pid(), 0);
    // The next call starts a new worker and runs.
    ASSERT_TRUE(s.Affine(x, 1, Scalar::Int(1), false, y, z).ok());
    EXPECT_EQ(y.data, (std::vector<float>{2, 3, 4}));
    EXPECT_EQ(s.worker().starts(), ++starts);
  }
  // The other session's worker went on all along.
  EXPECT_EQ(other.worker().pid(), other_pid);
  ASSERT_TRUE(other.Affine(x, 3, Scalar::Int(0), true, y, z).ok());
  EXPECT_EQ(y.data, (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(z.data, (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(other.worker().starts(), 1);
}

TEST(ArtifactIsolationTest, AKernelThatForksCannotHideItsWorkersEnd) {
  ArtifactPolicy policy = Policy(ArtifactPolicy::Isolation::kProcess);
  policy.call_timeout = absl::Hours(1);  // the end must be seen, not timed out
  ArtifactStore store(policy, {});
  Session s(&store);
  HostTensor x({1}, {1}), y({1}, {0}), z({1}, {0});
  ASSERT_TRUE(s.Affine(x, 1, Scalar::Int(0), false, y, z).ok());
  const pid_t pid = s.worker().pid();
  const absl::Status st = s.Call(kForkSegv, x, y);
  EXPECT_THAT(st.message(), HasSubstr("iso::forksegv: the kernel ended its artifact worker process: signal 11"));
  // Its child was killed with it: SIGKILL to the group, which the child
  // (not the daemon's to wait for) takes a moment to act on.
  for (int i = 0; i < 1000 && LiveInGroup(pid) != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(LiveInGroup(pid), 0);
  ASSERT_TRUE(s.Affine(x, 1, Scalar::Int(0), false, y, z).ok());
  EXPECT_EQ(s.worker().starts(), 2);
}

TEST(ArtifactIsolationTest, TheWorkerEndsWithItsSession) {
  ArtifactStore store(Policy(ArtifactPolicy::Isolation::kProcess), {});
  pid_t pid = 0;
  {
    Session s(&store);
    EXPECT_EQ(s.worker().pid(), 0);  // started at the first call, not before
    HostTensor x({1}, {1}), y({1}, {0}), z({1}, {0});
    ASSERT_TRUE(s.Affine(x, 1, Scalar::Int(0), false, y, z).ok());
    pid = s.worker().pid();
    ASSERT_GT(pid, 0);
    EXPECT_FALSE(Gone(pid));
  }
  EXPECT_TRUE(Gone(pid));
}

TEST(ArtifactIsolationTest, ALibraryWhoseLoadCrashesFailsItsCallsOnly) {
  // A constructor that aborts: under isolation the daemon never runs it;
  // the worker does, and the call fails saying the load ended the worker.
  const std::string file =
      ArtifactOf(CompileSo(std::string(kSource) + "__attribute__((constructor)) static void Boom() { std::abort(); }"));
  ArtifactStore store(Policy(ArtifactPolicy::Isolation::kProcess), {});
  std::shared_ptr<LoadedArtifact> lib = *store.Load(*store.Add(file, "test"));
  EXPECT_FALSE(lib->object_loaded());
  ArtifactWorker worker(&store, MemoryAccount::Create(0));
  ArtifactKernel k;
  k.op_name = lib->op_name(kFail);
  k.worker = &worker;
  k.artifact = lib.get();
  k.op_index = kFail;
  HostTensor x({1}, {1}), y({1}, {0});
  std::vector<Value> args = {Value(&x.meta)};
  KernelContext ctx;
  ctx.args = args;
  ctx.input_base = [&x](const TensorMeta*) -> char* { return x.base(); };
  ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
  const absl::Status st = RunArtifactKernel(k, ctx);
  EXPECT_THAT(st.message(), HasSubstr("iso::fail: loading the kernel's library ended its artifact worker process: "
                                      "signal 6 (Aborted)"));
  EXPECT_EQ(worker.pid(), 0);
}

TEST(ArtifactIsolationTest, SharedMemoryIsChargedToTheSession) {
  ArtifactStore store(Policy(ArtifactPolicy::Isolation::kProcess), {});
  std::shared_ptr<LoadedArtifact> lib = *store.Load(*store.Add(Library(), "test"));
  std::shared_ptr<MemoryAccount> account = MemoryAccount::Create(1 << 20);  // 1 MiB: the arena's least size
  ArtifactWorker worker(&store, account);
  ArtifactKernel k;
  k.op_name = lib->op_name(kScratch);
  k.worker = &worker;
  k.artifact = lib.get();
  k.op_index = kScratch;
  HostTensor x({1 << 18}, std::vector<float>(1 << 18, 1)), y({1 << 18}, std::vector<float>(1 << 18, 0));  // 1 MiB each
  std::vector<Value> args = {Value(&x.meta)};
  KernelContext ctx;
  ctx.args = args;
  ctx.input_base = [&x](const TensorMeta*) -> char* { return x.base(); };
  ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
  const absl::Status st = RunArtifactKernel(k, ctx);
  EXPECT_EQ(tensord::KindOf(st), tensord::ErrorKind::kOutOfMemory) << st;
  EXPECT_THAT(st.message(), HasSubstr("artifact worker's shared memory"));
}

TEST(ArtifactIsolationTest, AClosingSessionStopsWaitingForItsKernel) {
  ArtifactPolicy policy = Policy(ArtifactPolicy::Isolation::kProcess);
  policy.call_timeout = absl::Hours(1);
  ArtifactStore store(policy, {});
  Session s(&store);
  std::atomic<bool> closing{false};
  s.worker().set_cancelled([&closing] { return closing.load(); });
  std::thread closer([&closing] {
    absl::SleepFor(absl::Milliseconds(300));
    closing.store(true);
  });
  HostTensor x({1}, {1}), y({1}, {0});
  const absl::Status st = s.Call(kSpin, x, y);
  closer.join();
  EXPECT_THAT(st.message(), HasSubstr("iso::spin: cancelled (the session is closing)"));
  EXPECT_EQ(s.worker().pid(), 0);
}

TEST(ArtifactIsolationTest, ALargeCallsSharedMemoryIsGivenBackAfterASmallOne) {
  ArtifactStore store(Policy(ArtifactPolicy::Isolation::kProcess), {});
  std::shared_ptr<LoadedArtifact> lib = *store.Load(*store.Add(Library(), "test"));
  std::shared_ptr<MemoryAccount> account = MemoryAccount::Create(0);
  ArtifactWorker worker(&store, account);
  ArtifactKernel k;
  k.op_name = lib->op_name(kScratch);
  k.worker = &worker;
  k.artifact = lib.get();
  k.op_index = kScratch;
  auto call = [&](int64_t n) {
    HostTensor x({n}, std::vector<float>(static_cast<size_t>(n), 2)), y({n}, std::vector<float>(static_cast<size_t>(n)));
    std::vector<Value> args = {Value(&x.meta)};
    KernelContext ctx;
    ctx.args = args;
    ctx.input_base = [&x](const TensorMeta*) -> char* { return x.base(); };
    ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
    const absl::Status st = RunArtifactKernel(k, ctx);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(y.data, x.data);
  };
  call(9 << 20);  // 36 MiB in, 36 out
  EXPECT_GT(account->bookkeeping_bytes(), 64 << 20);
  call(16);
  EXPECT_EQ(account->bookkeeping_bytes(), 0);
  call(16);  // a new, small arena
  EXPECT_EQ(account->bookkeeping_bytes(), 1 << 20);
  EXPECT_EQ(worker.starts(), 1);
}

}  // namespace
}  // namespace tensord::runtime
