// Kernel artifacts in the daemon's runtime: the operator's policy, the
// checks before load (each hostile artifact refused with its reason, before
// any of its code runs), the load from memory, kernel calls through the C
// ABI (results, errors, exceptions, scratch), and load/unload cycles.
//
// The artifacts are real: a kernel library compiled with g++ at test time,
// packed by hand (ManifestFor) so that a test can make its manifest lie.
#include "tensord/runtime/artifacts.h"

#include <cstring>
#include <string>
#include <vector>

#include "../artifact/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/artifact/artifact.h"
#include "tensord/artifact/elf_inspect.h"

namespace tensord::runtime {
namespace {

using ::testing::HasSubstr;
using testing_util::RunShell;
using testing_util::TempDir;

constexpr char kSource[] = R"SRC(
#include <tensord_kernel.h>
#include <stdexcept>
#include <cstring>

// y = x * s over any strides (float32 only).
static int32_t Scale(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const double s = env->args[1].value.f;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "mylib::scale: expected float32");
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, xo = 0, yo = 0;
    for (int d = x->ndim - 1; d >= 0; --d) {
      const int64_t k = rest % x->shape[d];
      rest /= x->shape[d];
      xo += k * x->strides[d];
      yo += k * y->strides[d];
    }
    static_cast<float*>(y->data)[yo] = static_cast<float>(static_cast<const float*>(x->data)[xo] * s);
  }
  return TD_OK;
}
TD_EXPORT int32_t mylib_scale_cpu(TdKernelEnv* env) { TD_KERNEL_TRY return Scale(env); TD_KERNEL_CATCH(env) }
TD_EXPORT int32_t mylib_fail_cpu(TdKernelEnv* env) { return td_fail(env, "x must be positive, got -1"); }
TD_EXPORT int32_t mylib_silent_cpu(TdKernelEnv*) { return 7; }
TD_EXPORT int32_t mylib_throw_cpu(TdKernelEnv*) { throw std::runtime_error("thrown past the boundary"); }
// Copies x through scratch memory: scratch must be usable and 64-byte aligned.
TD_EXPORT int32_t mylib_scratch_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const int64_t n = x->shape[0];
  float* tmp = static_cast<float*>(env->scratch(env, n * 4));
  if (tmp == nullptr) return td_fail(env, "no scratch");
  if (reinterpret_cast<uintptr_t>(tmp) % 64 != 0) return td_fail(env, "scratch is not 64-byte aligned");
  std::memcpy(tmp, x->data, n * 4);
  std::memcpy(env->outputs[0].data, tmp, n * 4);
  return TD_OK;
}

static const TdOpDecl kOps[] = {
    {"mylib::scale(Tensor x, float s) -> Tensor", "return empty(x.shape, dtype=x.dtype)", NULL, "mylib_scale_cpu", NULL},
    {"mylib::fail(Tensor x) -> Tensor", "like:clone", NULL, "mylib_fail_cpu", NULL},
    {"mylib::silent(Tensor x) -> Tensor", "like:clone", NULL, "mylib_silent_cpu", NULL},
    {"mylib::throws(Tensor x) -> Tensor", "like:clone", NULL, "mylib_throw_cpu", NULL},
    {"mylib::scratch(Tensor x) -> Tensor", "like:clone", NULL, "mylib_scratch_cpu", NULL},
};
TD_DEFINE_LIBRARY("mylib", kOps)
)SRC";

// The manifest's ops, as kOps declares them.
std::vector<ArtifactOp> DeclaredOps() {
  return {
      {"mylib::scale(Tensor x, float s) -> Tensor", "return empty(x.shape, dtype=x.dtype)", "", "mylib_scale_cpu", ""},
      {"mylib::fail(Tensor x) -> Tensor", "like:clone", "", "mylib_fail_cpu", ""},
      {"mylib::silent(Tensor x) -> Tensor", "like:clone", "", "mylib_silent_cpu", ""},
      {"mylib::throws(Tensor x) -> Tensor", "like:clone", "", "mylib_throw_cpu", ""},
      {"mylib::scratch(Tensor x) -> Tensor", "like:clone", "", "mylib_scratch_cpu", ""},
  };
}

// Compiles `source` into a shared object; its bytes (empty on failure, with
// the compiler's output added as a test failure).
std::string CompileSo(const std::string& source, const std::string& extra = "") {
  TempDir dir;
  testing_util::WriteFile(dir / "k.cc", source);
  const auto [rc, out] = RunShell("g++ -std=c++17 -O1 -shared -fPIC -fvisibility=hidden -I" TENSORD_TEST_ABI_DIR " " +
                                  extra + " " + (dir / "k.cc") + " -o " + (dir / "k.so"));
  EXPECT_EQ(rc, 0) << out;
  return testing_util::ReadFile(dir / "k.so");
}

// The library every test uses, compiled once.
const std::string& LibrarySo() {
  static const std::string* so = new std::string(CompileSo(kSource));
  return *so;
}

// An artifact of `so` whose manifest says what its ELF says, with `ops`.
Manifest ManifestFor(const std::string& so, std::vector<ArtifactOp> ops) {
  Manifest m;
  m.abi_version = TD_KERNEL_ABI_VERSION;
  m.library = "mylib";
  m.ops = std::move(ops);
  absl::StatusOr<ElfInfo> elf = InspectElf(so);
  EXPECT_TRUE(elf.ok()) << elf.status();
  if (elf.ok()) SetElfFacts(*elf, &m);
  return m;
}

std::string GoodArtifact() { return SerializeArtifact(ManifestFor(LibrarySo(), DeclaredOps()), LibrarySo()); }

ArtifactPolicy AnyPolicy() {
  ArtifactPolicy p;
  p.mode = ArtifactPolicy::Mode::kAny;
  return p;
}

// A float32 CPU tensor's data and metadata, for a kernel call.
struct HostTensor {
  TensorMeta meta;
  std::vector<float> data;
  HostTensor(Shape sizes, std::vector<float> values)
      : meta(TensorMeta::Contiguous(std::move(sizes), ScalarType::kFloat32, kCPU)), data(std::move(values)) {}
  char* base() { return reinterpret_cast<char*>(data.data()); }
};

// Calls op `index` of `lib` on CPU with `x` (and float `s` when given), into `y`.
absl::Status Call(const LoadedArtifact& lib, size_t index, HostTensor& x, HostTensor& y, const double* s = nullptr) {
  const ArtifactKernel* k = lib.kernel(index, DeviceType::kCPU);
  if (k == nullptr) return absl::NotFoundError("no kernel");
  std::vector<Value> args = {Value(&x.meta)};
  if (s != nullptr) args.push_back(Value(*s));
  KernelContext ctx;
  ctx.args = args;
  ctx.input_base = [&x](const TensorMeta* m) -> char* { return m == &x.meta ? x.base() : nullptr; };
  ctx.outputs.push_back(TensorRef{y.base(), &y.meta});
  return RunArtifactKernel(*k, ctx);
}

TEST(ArtifactStoreTest, LoadsAndRunsAKernel) {
  ArtifactStore store(AnyPolicy(), {});
  absl::StatusOr<std::string> hash = store.Add(GoodArtifact(), "test");
  ASSERT_TRUE(hash.ok()) << hash.status();
  absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = store.Load(*hash);
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ((*lib)->kernel(0, DeviceType::kCUDA), nullptr);  // no CUDA kernel declared
  ASSERT_EQ((*lib)->definitions().size(), 5u);
  EXPECT_EQ((*lib)->definitions()[0].schema, "mylib::scale(Tensor x, float s) -> Tensor");

  // A transposed (strided) input: the kernel reads it through its strides.
  HostTensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  x.meta.sizes = {3, 2};
  x.meta.strides = {1, 3};
  HostTensor y({3, 2}, std::vector<float>(6, -1));
  const double s = 2.5;
  ASSERT_TRUE(Call(**lib, 0, x, y, &s).ok());
  EXPECT_EQ(y.data, (std::vector<float>{2.5, 10, 5, 12.5, 7.5, 15}));
}

TEST(ArtifactStoreTest, KernelErrorsNameTheOp) {
  ArtifactStore store(AnyPolicy(), {});
  std::shared_ptr<LoadedArtifact> lib = *store.Load(*store.Add(GoodArtifact(), "test"));
  HostTensor x({2}, {1, 2}), y({2}, {0, 0});
  absl::Status failed = Call(*lib, 1, x, y);
  EXPECT_THAT(failed.message(), HasSubstr("mylib::fail: x must be positive, got -1"));
  absl::Status silent = Call(*lib, 2, x, y);
  EXPECT_THAT(silent.message(), HasSubstr("mylib::silent: the kernel returned status 7 without a message"));
  absl::Status thrown = Call(*lib, 3, x, y);
  EXPECT_THAT(thrown.message(), HasSubstr("mylib::throws: the kernel threw an exception: thrown past the boundary"));
  // A wrong dtype, refused by the kernel's own check.
  HostTensor xi({2}, {0, 0});
  xi.meta.dtype = ScalarType::kInt32;
  const double s = 1;
  EXPECT_THAT(Call(*lib, 0, xi, y, &s).message(), HasSubstr("mylib::scale: expected float32"));
}

TEST(ArtifactStoreTest, ScratchComesFromTheCallersAllocator) {
  ArtifactStore store(AnyPolicy(), {});
  std::shared_ptr<LoadedArtifact> lib = *store.Load(*store.Add(GoodArtifact(), "test"));
  HostTensor x({4}, {1, 2, 3, 4}), y({4}, {0, 0, 0, 0});
  // Without a scratch allocator installed the kernel gets none, and says so.
  EXPECT_THAT(Call(*lib, 4, x, y).message(), HasSubstr("no scratch"));
  class Heap final : public ScratchAllocator {
   public:
    absl::StatusOr<std::shared_ptr<char>> Allocate(int64_t bytes) override {
      ++calls;
      void* p = std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
      return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { std::free(q); });
    }
    int calls = 0;
  } heap;
  ScopedScratchAllocator scoped(&heap);
  ASSERT_TRUE(Call(*lib, 4, x, y).ok());
  EXPECT_EQ(y.data, x.data);
  EXPECT_EQ(heap.calls, 1);
}

TEST(ArtifactStoreTest, SecondLoadSharesTheObjectAndUnloadFollowsTheLastUser) {
  ArtifactStore store(AnyPolicy(), {});
  const std::string hash = *store.Add(GoodArtifact(), "test");
  EXPECT_TRUE(store.Has(hash));
  EXPECT_EQ(*store.Add(GoodArtifact(), "again"), hash);  // accepted once
  EXPECT_EQ(store.size(), 1u);
  std::shared_ptr<LoadedArtifact> a = *store.Load(hash);
  std::shared_ptr<LoadedArtifact> b = *store.Load(hash);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(store.loaded(), 1u);
  a.reset();
  EXPECT_EQ(store.loaded(), 1u);
  b.reset();
  EXPECT_EQ(store.loaded(), 0u);
  EXPECT_EQ(store.Load("0000").status().code(), absl::StatusCode::kNotFound);
}

TEST(ArtifactStoreTest, AThousandLoadCallUnloadCycles) {
  ArtifactStore store(AnyPolicy(), {});
  const std::string hash = *store.Add(GoodArtifact(), "test");
  HostTensor x({3}, {1, 2, 3}), y({3}, {0, 0, 0});
  const double s = 2;
  for (int i = 0; i < 1000; ++i) {
    std::shared_ptr<LoadedArtifact> lib = *store.Load(hash);
    ASSERT_TRUE(Call(*lib, 0, x, y, &s).ok()) << "cycle " << i;
  }
  EXPECT_EQ(y.data, (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(store.loaded(), 0u);
}

TEST(ArtifactStoreTest, EachLoadGetsItsOwnObject) {
  // Two libraries loaded one after the other: each load must get its own
  // object, whatever descriptor its in-memory file had before.
  std::string other_src = kSource;
  for (size_t at = other_src.find("mylib"); at != std::string::npos; at = other_src.find("mylib", at)) {
    other_src.replace(at, 5, "otherlib");
  }
  const std::string other_so = CompileSo(other_src);
  std::vector<ArtifactOp> other_ops = DeclaredOps();
  for (ArtifactOp& op : other_ops) {
    for (std::string* s : {&op.schema, &op.cpu_symbol}) {
      if (size_t at = s->find("mylib"); at != std::string::npos) s->replace(at, 5, "otherlib");
    }
  }
  Manifest other = ManifestFor(other_so, other_ops);
  other.library = "otherlib";
  ArtifactStore store(AnyPolicy(), {});
  const std::string a = *store.Add(GoodArtifact(), "test");
  const std::string b = *store.Add(SerializeArtifact(other, other_so), "test");
  // Round 0 keeps the first loaded while the second loads (two sessions);
  // the later rounds unload each before the next.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<LoadedArtifact>> held;
    for (const std::string& h : {a, b}) {
      absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = store.Load(h);
      ASSERT_TRUE(lib.ok()) << lib.status();
      EXPECT_EQ((*lib)->content_hash(), h);
      EXPECT_EQ((*lib)->kernel(0, DeviceType::kCPU)->op_name, h == a ? "mylib::scale" : "otherlib::scale");
      if (round == 0) held.push_back(*lib);
    }
  }
}

// ---- the operator's policy

TEST(ArtifactPolicyTest, OffRefusesEverything) {
  ArtifactPolicy p;
  p.mode = ArtifactPolicy::Mode::kOff;
  ArtifactStore store(p, {});
  absl::StatusOr<std::string> r = store.Add(GoodArtifact(), "test");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("--artifacts off"));
}

TEST(ArtifactPolicyTest, TrustedNeedsTheHashOrASignature) {
  const std::string file = GoodArtifact();
  const std::string hash = *ContentHash(file);
  {
    ArtifactStore store(ArtifactPolicy{}, {});  // trusted, nothing listed
    absl::StatusOr<std::string> r = store.Add(file, "test");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(r.status().message(), HasSubstr("--artifacts trusted"));
    EXPECT_THAT(r.status().message(), HasSubstr("neither in its allow-list (0 entries) nor signed"));
    EXPECT_THAT(r.status().message(), HasSubstr(hash));
  }
  {
    TempDir dir;
    testing_util::WriteFile(dir / "allow", "# the team's kernels\n" + hash + "  mylib.tdk\n");
    ArtifactPolicy p;
    ASSERT_TRUE(p.AddAllowList(dir / "allow").ok());
    ArtifactStore store(p, {});
    EXPECT_TRUE(store.Add(file, "test").ok());
    testing_util::WriteFile(dir / "bad", "not-a-hash\n");
    EXPECT_THAT(p.AddAllowList(dir / "bad").message(), HasSubstr(":1: expected a SHA-256"));
  }
}

TEST(ArtifactPolicyTest, TrustedAcceptsAnEd25519SignatureByAListedKey) {
  TempDir dir;
  auto [rc, out] = RunShell("openssl genpkey -algorithm ed25519 -out " + (dir / "key.pem") + " && openssl pkey -in " +
                            (dir / "key.pem") + " -pubout -out " + (dir / "key.pub") +
                            " && openssl genpkey -algorithm ed25519 -out " + (dir / "other.pem") +
                            " && openssl pkey -in " + (dir / "other.pem") + " -pubout -out " + (dir / "other.pub"));
  ASSERT_EQ(rc, 0) << out;
  const Manifest m = ManifestFor(LibrarySo(), DeclaredOps());
  const std::string hash = *ContentHash(SerializeArtifact(m, LibrarySo()));
  ArtifactPolicy p;
  ASSERT_TRUE(p.AddKey(dir / "key.pub").ok());
  ArtifactStore store(p, {});
  // Signed by a key the daemon does not list: refused.
  const std::string unsigned_file = SerializeArtifact(m, LibrarySo());
  const std::string other = *SignArtifact(unsigned_file, dir / "other.pem", "other");
  absl::StatusOr<std::string> r = store.Add(other, "test");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("none of its signatures verifies"));
  // Signed by the listed key: accepted, under the same content hash.
  absl::StatusOr<std::string> signed_file_or = SignArtifact(unsigned_file, dir / "key.pem", "team");
  ASSERT_TRUE(signed_file_or.ok()) << signed_file_or.status();
  const std::string& signed_file = *signed_file_or;
  absl::StatusOr<std::string> ok = store.Add(signed_file, "test");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, hash);
  EXPECT_THAT(p.AddKey(dir / "key.pem").message(), HasSubstr("is not an Ed25519 public key"));
  EXPECT_THAT(SignArtifact(unsigned_file, dir / "key.pub", "team").status().message(),
              HasSubstr("is not an Ed25519 private key"));
  // A second signature keeps the first and the content hash.
  absl::StatusOr<Artifact> twice = ParseArtifact(*SignArtifact(signed_file, dir / "other.pem", "other"));
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->signatures.size(), 2u);
  EXPECT_EQ(twice->content_hash, hash);
}

TEST(ArtifactPolicyTest, SizeLimit) {
  ArtifactPolicy p = AnyPolicy();
  p.max_bytes = 1000;
  ArtifactStore store(p, {});
  absl::StatusOr<std::string> r = store.Add(GoodArtifact(), "test");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("over this daemon's limit of 1000 bytes"));
}

// ---- hostile and broken artifacts: refused before any of their code runs

class HostileArtifactTest : public ::testing::Test {
 protected:
  // Adds `file` and expects a refusal whose message has `what`.
  void ExpectRefused(const std::string& file, const std::string& what) {
    absl::StatusOr<std::string> r = store_.Add(file, "test");
    ASSERT_FALSE(r.ok()) << "accepted an artifact that should say: " << what;
    EXPECT_THAT(r.status().message(), HasSubstr(what));
    EXPECT_EQ(store_.size(), 0u);
  }
  ArtifactStore store_{AnyPolicy(), {}};
};

TEST_F(HostileArtifactTest, TruncatedOrCorrupt) {
  const std::string good = GoodArtifact();
  ExpectRefused(good.substr(0, good.size() / 2), "truncated");
  std::string flipped = good;
  flipped[good.size() - 100] ^= 1;
  ExpectRefused(flipped, "SHA-256");
  ExpectRefused("garbage", "not a tensord kernel artifact");
}

TEST_F(HostileArtifactTest, NewerAbi) {
  Manifest m = ManifestFor(LibrarySo(), DeclaredOps());
  m.abi_version = TD_KERNEL_ABI_VERSION + 1;
  ExpectRefused(SerializeArtifact(m, LibrarySo()), "needs kernel ABI version 2, but this daemon runs ABI versions 1 to 1");
}

TEST_F(HostileArtifactTest, AnotherCpuArchitecture) {
  std::string so = LibrarySo();
  so[18] = 183;  // e_machine = EM_AARCH64
  so[19] = 0;
  ExpectRefused(SerializeArtifact(ManifestFor(so, DeclaredOps()), so), "was built for aarch64-linux-gnu");
}

TEST_F(HostileArtifactTest, ManifestThatLiesAboutTheObject) {
  Manifest m = ManifestFor(LibrarySo(), DeclaredOps());
  m.undefined_symbols.clear();
  ExpectRefused(SerializeArtifact(m, LibrarySo()), "the manifest disagrees with its object");
}

TEST_F(HostileArtifactTest, SymbolTheObjectLacks) {
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[0].cpu_symbol = "mylib_missing_cpu";
  ExpectRefused(SerializeArtifact(ManifestFor(LibrarySo(), ops), LibrarySo()),
                "op mylib::scale names symbol mylib_missing_cpu, which the object does not export");
}

TEST_F(HostileArtifactTest, UndefinedSymbol) {
  const std::string so = CompileSo(std::string(kSource) + "extern \"C\" void td_nowhere(); "
                                                         "TD_EXPORT void call_it() { td_nowhere(); }");
  ExpectRefused(SerializeArtifact(ManifestFor(so, DeclaredOps()), so),
                "needs symbol td_nowhere, which this daemon's libraries do not provide");
}

TEST_F(HostileArtifactTest, SymbolVersionNewerThanTheDaemonsLibc) {
  // memcpy@GLIBC_2.99 does not exist: the object names a version no glibc has.
  std::string so = LibrarySo();
  const size_t at = so.find("GLIBC_2.");
  if (at == std::string::npos) GTEST_SKIP() << "the library needs no versioned glibc symbol";
  // Rewrite the version string in .dynstr to a version this libc lacks; the
  // hash in .gnu.version_r then no longer matches, which the loader would
  // also refuse: the check must refuse it first, naming the symbol.
  so[at + 6] = '9';
  so[at + 7] = '.';
  ExpectRefused(SerializeArtifact(ManifestFor(so, DeclaredOps()), so), "which this daemon's libraries do not provide");
}

TEST_F(HostileArtifactTest, SearchPath) {
  const std::string so = CompileSo(kSource, "-Wl,-rpath,/tmp/evil");
  ExpectRefused(SerializeArtifact(ManifestFor(so, DeclaredOps()), so), "sets a library search path");
}

TEST_F(HostileArtifactTest, SchemaThatDoesNotParse) {
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[0].schema = "mylib::scale(Tensor x, float s -> Tensor";
  ExpectRefused(SerializeArtifact(ManifestFor(LibrarySo(), ops), LibrarySo()), "library.define");
}

TEST_F(HostileArtifactTest, ShapeRuleNamingAMissingInput) {
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[0].shape_rule = "return empty(y.shape)";
  ExpectRefused(SerializeArtifact(ManifestFor(LibrarySo(), ops), LibrarySo()), "'y' is not an argument of the op");
}

TEST_F(HostileArtifactTest, OpOutsideTheLibrary) {
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[0].schema = "otherlib::scale(Tensor x, float s) -> Tensor";
  ExpectRefused(SerializeArtifact(ManifestFor(LibrarySo(), ops), LibrarySo()), "is not in library mylib");
}

TEST_F(HostileArtifactTest, CudaCodeNoDeviceRuns) {
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[0].cuda_symbol = "mylib_scale_cpu";  // any exported symbol: the architectures are what is refused
  Manifest m = ManifestFor(LibrarySo(), ops);
  ArtifactStore with_gpu(AnyPolicy(), {{9, 0}});
  absl::StatusOr<std::string> r = with_gpu.Add(SerializeArtifact(m, LibrarySo()), "test");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("has CUDA code for none, which none of this daemon's GPUs (compute "
                                              "capability 9.0) can run"));
}

TEST_F(HostileArtifactTest, QueryFunctionThatDisagreesIsRefusedAtLoad) {
  // The manifest passes every check before load, but the object's own
  // declaration differs: the load refuses it.
  std::vector<ArtifactOp> ops = DeclaredOps();
  ops[1].shape_rule = "like:neg";
  ArtifactStore store(AnyPolicy(), {});
  absl::StatusOr<std::string> hash = store.Add(SerializeArtifact(ManifestFor(LibrarySo(), ops), LibrarySo()), "t");
  ASSERT_TRUE(hash.ok()) << hash.status();
  absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = store.Load(*hash);
  ASSERT_FALSE(lib.ok());
  EXPECT_THAT(lib.status().message(), HasSubstr("does not match the manifest: op 1 (mylib::fail(Tensor x) -> Tensor) differs"));
  EXPECT_EQ(store.loaded(), 0u);
}

}  // namespace
}  // namespace tensord::runtime
