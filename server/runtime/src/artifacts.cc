// Kernel artifacts in the daemon: policy, checks before load, the load from
// a sealed in-memory file, and calls through the plain-C ABI.
#include "tensord/runtime/artifacts.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tensord/artifact/elf_inspect.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_registry.h"
#include "tensord/runtime/artifact_worker.h"
#include "tensord/runtime/log.h"

namespace tensord::runtime {
namespace {

// DLPack 0.8's code for bool (Debian's DLPack 0.6 has none): what newer
// frameworks write, so an author's check reads the same everywhere.
constexpr uint8_t kDLBoolCode = 6;

std::string ShortHash(absl::string_view hash) { return std::string(hash.substr(0, 12)); }

std::string Describe(const Manifest& m, absl::string_view hash) {
  return absl::StrCat("artifact ", m.library.empty() ? "(unnamed)" : m.library, " (sha256 ", ShortHash(hash), ")");
}

// The shape rule as ExtensionOps::Define takes it.
std::string DefineRule(const std::string& rule) {
  return absl::StartsWith(rule, "like:") ? rule : absl::StrCat("rule:", rule);
}

bool VerifyEd25519(const std::string& raw_key, absl::string_view message, absl::string_view signature) {
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                              reinterpret_cast<const unsigned char*>(raw_key.data()), raw_key.size());
  if (key == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                             reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok;
}

// Whether CUDA code with machine code `sm` and PTX `ptx` runs on a device of
// compute capability major.minor: machine code of the same major version
// and no newer minor one, or PTX of no newer version (the driver compiles
// it). The rule the daemon's own kernels are checked by.
bool CudaRuns(const std::vector<int>& sm, const std::vector<int>& ptx, int major, int minor) {
  const int cc = major * 10 + minor;
  for (int s : sm) {
    if (s / 10 == major && s % 10 <= minor) return true;
  }
  for (int p : ptx) {
    if (p <= cc) return true;
  }
  return false;
}

std::string ArchList(const std::vector<int>& sm, const std::vector<int>& ptx) {
  std::vector<std::string> parts;
  for (int s : sm) parts.push_back(absl::StrCat("sm_", s));
  for (int p : ptx) parts.push_back(absl::StrCat("compute_", p));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

}  // namespace

// ------------------------------------------------------------------ policy

absl::StatusOr<ArtifactPolicy::Mode> ArtifactPolicy::ParseMode(absl::string_view text) {
  if (text == "off") return Mode::kOff;
  if (text == "trusted") return Mode::kTrusted;
  if (text == "any") return Mode::kAny;
  return absl::InvalidArgumentError(absl::StrCat("--artifacts must be off, trusted or any, not '", text, "'"));
}

absl::StatusOr<ArtifactPolicy::Isolation> ArtifactPolicy::ParseIsolation(absl::string_view text) {
  if (text == "none") return Isolation::kNone;
  if (text == "process") return Isolation::kProcess;
  return absl::InvalidArgumentError(absl::StrCat("--artifact-isolation must be none or process, not '", text, "'"));
}

absl::string_view ArtifactPolicy::IsolationName(Isolation i) {
  return i == Isolation::kProcess ? "process" : "none";
}

absl::string_view ArtifactPolicy::ModeName(Mode m) {
  switch (m) {
    case Mode::kOff: return "off";
    case Mode::kTrusted: return "trusted";
    case Mode::kAny: return "any";
  }
  return "?";
}

absl::Status ArtifactPolicy::AddAllowList(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the artifact allow-list ", path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view s = line;
    if (const size_t hash = s.find('#'); hash != absl::string_view::npos) s = s.substr(0, hash);
    s = absl::StripAsciiWhitespace(s);
    if (s.empty()) continue;
    // The first word: `sha256sum` output ("<hash>  mylib.tdk") works as it is.
    s = s.substr(0, s.find_first_of(" \t"));
    const std::string h = absl::AsciiStrToLower(s);
    if (h.size() != 64 || h.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": expected a SHA-256 in hex (64 digits), got '",
                                                     s.substr(0, 80), "'"));
    }
    allowed_hashes.insert(h);
  }
  return absl::OkStatus();
}

absl::Status ArtifactPolicy::AddKey(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot read the artifact key ", path));
  EVP_PKEY* key = PEM_read_PUBKEY(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(key);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not an Ed25519 public key in PEM (make one with `openssl genpkey -algorithm ed25519 "
                           "-out key.pem && openssl pkey -in key.pem -pubout -out key.pub`)"));
  }
  unsigned char raw[32];
  size_t len = sizeof(raw);
  const bool ok = EVP_PKEY_get_raw_public_key(key, raw, &len) == 1 && len == 32;
  EVP_PKEY_free(key);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the Ed25519 key's bytes"));
  keys.emplace_back(path, std::string(reinterpret_cast<char*>(raw), 32));
  return absl::OkStatus();
}

// ------------------------------------------------------------------ loaded objects

LoadedArtifact::~LoadedArtifact() {
  if (handle_ != nullptr) dlclose(handle_);
}

const ArtifactKernel* LoadedArtifact::kernel(size_t op_index, DeviceType device) const {
  const std::vector<ArtifactKernel>& v = device == DeviceType::kCUDA ? cuda_ : cpu_;
  if (op_index >= v.size() || v[op_index].fn == nullptr) return nullptr;
  return &v[op_index];
}

std::string LoadedArtifact::op_name(size_t op_index) const {
  if (op_index >= manifest_.ops.size()) return "";
  const std::string& schema = manifest_.ops[op_index].schema;
  return schema.substr(0, schema.find('('));
}

bool LoadedArtifact::declares_kernel(size_t op_index, DeviceType device) const {
  if (op_index >= manifest_.ops.size()) return false;
  const ArtifactOp& op = manifest_.ops[op_index];
  return !(device == DeviceType::kCUDA ? op.cuda_symbol : op.cpu_symbol).empty();
}

// ------------------------------------------------------------------ the store

ArtifactStore::ArtifactStore(ArtifactPolicy policy, std::vector<std::pair<int, int>> cuda_capabilities)
    : policy_(std::move(policy)), cuda_capabilities_(std::move(cuda_capabilities)) {}

ArtifactStore::~ArtifactStore() {
  if (!link_dir_.empty()) rmdir(link_dir_.c_str());
}

bool ArtifactStore::Has(absl::string_view hash) const {
  absl::MutexLock l(&mu_);
  return entries_.contains(hash);
}

size_t ArtifactStore::size() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

size_t ArtifactStore::loaded() const {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [h, e] : entries_) n += e->loaded.expired() ? 0 : 1;
  return n;
}

absl::Status ArtifactStore::CheckBeforeLoad(const Artifact& a) const {
  const Manifest& m = a.manifest;
  const std::string what = Describe(m, a.content_hash);
  if (m.abi_version == 0 || m.abi_version > TD_KERNEL_ABI_VERSION) {
    return RuntimeErr(absl::StrCat(what, " needs kernel ABI version ", m.abi_version,
                                   ", but this daemon runs ABI versions 1 to ", TD_KERNEL_ABI_VERSION,
                                   m.abi_version == 0 ? "" : " (rebuild it with this tensord's tensord_kernel.h)"));
  }
  absl::StatusOr<ElfInfo> elf = InspectElf(a.payload);
  if (!elf.ok()) return RuntimeErr(absl::StrCat(what, ": ", elf.status().message()));
  if (elf->target_triple != HostTargetTriple()) {
    return RuntimeErr(absl::StrCat(what, " was built for ", elf->target_triple, ", but this daemon runs on ",
                                   HostTargetTriple()));
  }
  Manifest from_elf = m;
  SetElfFacts(*elf, &from_elf);
  if (ManifestToJson(from_elf) != ManifestToJson(m)) {
    return RuntimeErr(absl::StrCat(what, ": the manifest disagrees with its object (target, library or symbol "
                                         "versions, needed libraries, undefined symbols or CUDA architectures differ "
                                         "from what the object's ELF says)"));
  }
  if (!elf->rpath.empty()) {
    return RuntimeErr(absl::StrCat(what, " sets a library search path (RPATH/RUNPATH '", elf->rpath[0],
                                   "'): artifacts may only need libraries the daemon's loader finds by name"));
  }
  if (m.library.empty()) return RuntimeErr(absl::StrCat(what, ": the manifest names no library"));
  if (m.ops.empty()) return RuntimeErr(absl::StrCat(what, " declares no ops"));

  // Every needed library by name, found where the daemon's loader looks.
  // Libraries the daemon has not loaded yet are opened here, with their
  // own constructors: system libraries, never the artifact's code.
  std::vector<std::pair<std::string, void*>> libs;
  absl::Cleanup close_libs = [&libs] {
    for (auto& [name, h] : libs) dlclose(h);
  };
  for (const std::string& lib : elf->needed) {
    if (lib.find('/') != std::string::npos) {
      return RuntimeErr(absl::StrCat(what, " needs a library by path ('", lib,
                                     "'): artifacts may only need libraries the daemon's loader finds by name"));
    }
    void* h = dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (h == nullptr) {
      return RuntimeErr(absl::StrCat(what, " needs library ", lib, ", which this daemon's loader cannot find"));
    }
    libs.emplace_back(lib, h);
  }
  for (const ElfSymbolRef& s : elf->undefined) {
    if (s.weak) continue;
    bool found = false;
    auto look = [&](void* h) {
      return (s.version.empty() ? dlsym(h, s.name.c_str()) : dlvsym(h, s.name.c_str(), s.version.c_str())) != nullptr;
    };
    for (auto& [name, h] : libs) {
      if (!s.library.empty() && name != s.library) continue;
      if (look(h)) {
        found = true;
        break;
      }
    }
    // Then the daemon's global scope, which the loader searches first: a
    // symbol the dynamic linker itself defines (__tls_get_addr) is found
    // there, not through a handle of ld-linux-x86-64.so.2.
    if (!found) found = look(RTLD_DEFAULT);
    if (!found) {
      const std::string versioned = s.version.empty() ? s.name : absl::StrCat(s.name, "@", s.version);
      return RuntimeErr(absl::StrCat(what, " needs symbol ", versioned,
                                     s.library.empty() ? "" : absl::StrCat(" from ", s.library),
                                     ", which this daemon's libraries do not provide (built against a newer "
                                     "library, or a library the daemon does not have)"));
    }
  }

  // The ops: schema and rule valid (the client compiles them again), each
  // with a kernel the object exports, in the library's namespace.
  ExtensionOps scratch;
  bool any_cuda = false;
  absl::flat_hash_set<absl::string_view> exported(elf->defined_functions.begin(), elf->defined_functions.end());
  for (const ArtifactOp& op : m.ops) {
    absl::StatusOr<const OpEntry*> e = scratch.Define(op.schema, DefineRule(op.shape_rule), /*artifact=*/{}, op.derivative);
    if (!e.ok()) return RuntimeErr(absl::StrCat(what, ": ", e.status().message()));
    const std::string name = (*e)->schema.name;
    if (!absl::StartsWith(name, absl::StrCat(m.library, "::"))) {
      return RuntimeErr(absl::StrCat(what, ": op ", name, " is not in library ", m.library));
    }
    if (op.cpu_symbol.empty() && op.cuda_symbol.empty()) {
      return RuntimeErr(absl::StrCat(what, ": op ", name, " names no kernel symbol"));
    }
    for (const std::string* sym : {&op.cpu_symbol, &op.cuda_symbol}) {
      if (!sym->empty() && !exported.contains(*sym)) {
        return RuntimeErr(absl::StrCat(what, ": op ", name, " names symbol ", *sym,
                                       ", which the object does not export"));
      }
    }
    any_cuda = any_cuda || !op.cuda_symbol.empty();
  }
  if (any_cuda && !cuda_capabilities_.empty()) {
    bool runs_somewhere = false;
    std::vector<std::string> devices;
    for (const auto& [major, minor] : cuda_capabilities_) {
      runs_somewhere = runs_somewhere || CudaRuns(m.cuda_sm, m.cuda_ptx, major, minor);
      devices.push_back(absl::StrCat(major, ".", minor));
    }
    if (!runs_somewhere) {
      return RuntimeErr(absl::StrCat(what, " has CUDA code for ", ArchList(m.cuda_sm, m.cuda_ptx),
                                     ", which none of this daemon's GPUs (compute capability ",
                                     absl::StrJoin(devices, ", "),
                                     ") can run: build it with --cuda-arch for them"));
    }
  }
  const bool any_cpu = std::any_of(m.ops.begin(), m.ops.end(), [](const ArtifactOp& o) { return !o.cpu_symbol.empty(); });
  if (!any_cpu && cuda_capabilities_.empty()) {
    return RuntimeErr(absl::StrCat(what, " has kernels for CUDA only, and this daemon has no GPU"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ArtifactStore::Add(absl::string_view file, absl::string_view who) {
  if (policy_.mode == ArtifactPolicy::Mode::kOff) {
    return absl::PermissionDeniedError(
        "kernel artifacts are refused: this daemon runs with --artifacts off (its operator allows no uploaded code)");
  }
  if (file.size() > policy_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("the artifact holds ", file.size(),
                                                     " bytes, over this daemon's limit of ", policy_.max_bytes,
                                                     " bytes per artifact"));
  }
  TD_ASSIGN_OR_RETURN(Artifact a, ParseArtifact(file));
  if (Has(a.content_hash)) return a.content_hash;
  const std::string what = Describe(a.manifest, a.content_hash);
  if (policy_.mode == ArtifactPolicy::Mode::kTrusted && !policy_.allowed_hashes.contains(a.content_hash)) {
    const std::string raw = absl::HexStringToBytes(a.content_hash);
    bool signed_ok = false;
    for (const ArtifactSignature& s : a.signatures) {
      for (const auto& [name, key] : policy_.keys) {
        if (VerifyEd25519(key, raw, s.signature)) {
          signed_ok = true;
          break;
        }
      }
      if (signed_ok) break;
    }
    if (!signed_ok) {
      return absl::PermissionDeniedError(absl::StrCat(
          what, " is refused: this daemon runs --artifacts trusted, and the artifact is neither in its allow-list (",
          policy_.allowed_hashes.size(), " entries) nor signed by one of its ", policy_.keys.size(), " keys",
          a.signatures.empty() ? " (it carries no signature)" : " (none of its signatures verifies)",
          ". Its operator can allow it by adding its content hash ", a.content_hash,
          " to the file given to --artifact-allow-list"));
    }
  }
  TD_RETURN_IF_ERROR(CheckBeforeLoad(a));
  absl::MutexLock l(&mu_);
  if (entries_.contains(a.content_hash)) return a.content_hash;
  if (total_bytes_ + file.size() > policy_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, " (", file.size(), " bytes) would take the daemon's "
                                                     "artifacts past their limit of ", policy_.max_total_bytes,
                                                     " bytes (", total_bytes_, " held)"));
  }
  total_bytes_ += file.size();
  std::string hash = a.content_hash;
  auto e = std::make_unique<Entry>();
  e->artifact = std::move(a);
  Log(LogLevel::kInfo, "accepted ", Describe(e->artifact.manifest, hash), " from ", who, " under --artifacts ",
      ArtifactPolicy::ModeName(policy_.mode));
  entries_.emplace(hash, std::move(e));
  return hash;
}

namespace {

// A sealed in-memory file holding `payload`: the object the checks read is
// the object loaded, and no path on disk can be swapped under the loader.
// The caller owns the descriptor.
absl::StatusOr<int> SealedObjectFile(absl::string_view payload, absl::string_view what) {
  const int fd = memfd_create("tensord-artifact", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return InternalErr(absl::StrCat(what, ": memfd_create: ", std::strerror(errno)));
  size_t done = 0;
  while (done < payload.size()) {
    const ssize_t n = write(fd, payload.data() + done, payload.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return InternalErr(absl::StrCat(what, ": writing the object to memory: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  return fd;
}

// Under process isolation, whether the daemon's own process must load an
// artifact's object: only for CUDA kernels, which run there (and only with
// a GPU to run them on).
bool LoadsInProcess(const ArtifactPolicy& policy, const Manifest& m, bool has_gpu) {
  if (policy.isolation == ArtifactPolicy::Isolation::kNone) return true;
  return has_gpu && std::any_of(m.ops.begin(), m.ops.end(), [](const ArtifactOp& o) { return !o.cuda_symbol.empty(); });
}

// The manifest's ops as ExtensionOps defines them.
absl::StatusOr<std::vector<ExtensionOpDef>> CanonicalDefinitions(const Manifest& m, absl::string_view what) {
  ExtensionOps canonical;
  for (const ArtifactOp& op : m.ops) {
    absl::StatusOr<const OpEntry*> d =
        canonical.Define(op.schema, DefineRule(op.shape_rule), /*artifact=*/{}, op.derivative);
    if (!d.ok()) return RuntimeErr(absl::StrCat(what, ": ", d.status().message()));
  }
  return canonical.Defs(0);
}

}  // namespace

absl::StatusOr<ArtifactStore::ObjectFile> ArtifactStore::MakeObjectFile(absl::string_view hash) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no artifact with content hash ", hash, " was uploaded to this daemon"));
  }
  const Artifact& a = it->second->artifact;
  ObjectFile f;
  TD_ASSIGN_OR_RETURN(f.fd, SealedObjectFile(a.payload, Describe(a.manifest, a.content_hash)));
  f.manifest = a.manifest;
  return f;
}

absl::StatusOr<std::shared_ptr<LoadedArtifact>> ArtifactStore::Load(absl::string_view hash) {
  // Loads run under the store's lock: one dlopen at a time, and two
  // sessions loading one artifact get one object.
  absl::MutexLock l(&mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no artifact with content hash ", hash, " was uploaded to this daemon"));
  }
  Entry& e = *it->second;
  if (std::shared_ptr<LoadedArtifact> live = e.loaded.lock()) return live;
  const Artifact& a = e.artifact;
  const std::string what = Describe(a.manifest, a.content_hash);

  if (!LoadsInProcess(policy_, a.manifest, !cuda_capabilities_.empty())) {
    // Its CPU kernels run in the sessions' workers: the daemon keeps the
    // manifest and its definitions, and runs none of the object's code
    // (not even its constructors).
    std::shared_ptr<LoadedArtifact> lib(new LoadedArtifact());
    lib->manifest_ = a.manifest;
    lib->hash_ = a.content_hash;  // no kernels: kernel() finds none
    TD_ASSIGN_OR_RETURN(lib->defs_, CanonicalDefinitions(a.manifest, what));
    e.loaded = lib;
    return lib;
  }

  TD_ASSIGN_OR_RETURN(const int fd, SealedObjectFile(a.payload, what));
  absl::Cleanup close_fd = [fd] { close(fd); };
  // The loader knows an object by the name it was opened under before it
  // looks at the file: "/proc/self/fd/N" again (descriptor numbers are
  // reused) would give back whichever artifact was loaded under that name
  // before, and still is (an object marked NODELETE stays after dlclose).
  // So each load opens the memory file through a link of its own, named
  // once in the process's life.
  if (link_dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/tensord-artifacts-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return InternalErr(absl::StrCat(what, ": cannot make a directory for loading artifacts (", tmpl, "): ",
                                      std::strerror(errno)));
    }
    link_dir_ = tmpl;
  }
  const std::string path = absl::StrCat(link_dir_, "/", hash.substr(0, 16), "-", ++loads_, ".so");
  if (symlink(absl::StrCat("/proc/self/fd/", fd).c_str(), path.c_str()) != 0) {
    return InternalErr(absl::StrCat(what, ": cannot link the object for loading (", path, "): ", std::strerror(errno)));
  }
  absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = OpenObject(a.manifest, a.content_hash, path);
  unlink(path.c_str());
  if (!lib.ok()) return lib.status();
  e.loaded = *lib;
  return lib;
}

absl::StatusOr<std::shared_ptr<LoadedArtifact>> ArtifactStore::OpenObject(const Manifest& m, absl::string_view hash,
                                                                          const std::string& path) {
  const std::string what = Describe(m, hash);
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return RuntimeErr(absl::StrCat(what, ": the loader refused the object: ", err != nullptr ? err : "(no reason)"));
  }
  std::shared_ptr<LoadedArtifact> lib(new LoadedArtifact());
  lib->handle_ = handle;  // dlclose'd by the destructor from here on
  lib->manifest_ = m;
  lib->hash_ = std::string(hash);

  // The query function must describe exactly the manifest.
  auto query = reinterpret_cast<TdLibraryQueryFn>(dlsym(handle, TD_LIBRARY_QUERY_SYMBOL));
  if (query == nullptr) {
    return RuntimeErr(absl::StrCat(what, ": the object exports no ", TD_LIBRARY_QUERY_SYMBOL,
                                   "() (define it with TD_DEFINE_LIBRARY)"));
  }
  const TdLibrary* info = query();
  auto mismatch = [&](absl::string_view detail) {
    return RuntimeErr(absl::StrCat(what, ": the object's ", TD_LIBRARY_QUERY_SYMBOL,
                                   "() does not match the manifest: ", detail));
  };
  if (info == nullptr) return mismatch("it returned NULL");
  if (info->abi_version != m.abi_version) {
    return mismatch(absl::StrCat("ABI version ", info->abi_version, ", the manifest says ", m.abi_version));
  }
  if (info->size < sizeof(TdLibrary) || info->name == nullptr || m.library != info->name) {
    return mismatch("another library name");
  }
  if (info->num_ops != static_cast<int64_t>(m.ops.size()) || (info->num_ops > 0 && info->ops == nullptr)) {
    return mismatch(absl::StrCat(info->num_ops, " ops, the manifest has ", m.ops.size()));
  }
  auto same = [](const char* got, const std::string& want) {
    return got == nullptr ? want.empty() : want == got;
  };
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const TdOpDecl& d = info->ops[i];
    const ArtifactOp& op = m.ops[i];
    if (!same(d.schema, op.schema) || !same(d.shape_rule, op.shape_rule) || !same(d.derivative, op.derivative) ||
        !same(d.cpu_symbol, op.cpu_symbol) || !same(d.cuda_symbol, op.cuda_symbol)) {
      return mismatch(absl::StrCat("op ", i, " (", op.schema, ") differs"));
    }
    ArtifactKernel cpu, cuda;
    cpu.op_name = cuda.op_name = op.schema.substr(0, op.schema.find('('));
    for (auto [sym, k] : {std::pair{&op.cpu_symbol, &cpu}, std::pair{&op.cuda_symbol, &cuda}}) {
      if (sym->empty()) continue;
      k->fn = reinterpret_cast<TdKernelFn>(dlsym(handle, sym->c_str()));
      if (k->fn == nullptr) return RuntimeErr(absl::StrCat(what, ": symbol ", *sym, " does not resolve"));
    }
    lib->cpu_.push_back(std::move(cpu));
    lib->cuda_.push_back(std::move(cuda));
  }
  TD_ASSIGN_OR_RETURN(lib->defs_, CanonicalDefinitions(m, what));
  return lib;
}

// ------------------------------------------------------------------ calls

namespace {

absl::StatusOr<DLDataType> ToDlDtype(ScalarType t, absl::string_view op) {
  const uint8_t bits = static_cast<uint8_t>(ItemSize(t) * 8);
  switch (t) {
    case ScalarType::kBool: return DLDataType{kDLBoolCode, 8, 1};
    case ScalarType::kUInt8: return DLDataType{kDLUInt, bits, 1};
    case ScalarType::kInt8:
    case ScalarType::kInt16:
    case ScalarType::kInt32:
    case ScalarType::kInt64: return DLDataType{kDLInt, bits, 1};
    case ScalarType::kFloat16:
    case ScalarType::kFloat32:
    case ScalarType::kFloat64: return DLDataType{kDLFloat, bits, 1};
    case ScalarType::kBFloat16: return DLDataType{kDLBfloat, 16, 1};
    default: break;
  }
  return NotImplementedErr(absl::StrCat(op, ": dtype ", DtypeName(t),
                                        " cannot cross the kernel ABI (DLPack 0.6 has no code for it)"));
}

// What one call's environment owns: the views, their lists, scratch.
struct CallState {
  TdKernelEnv env{};
  std::vector<TdArg> args;
  std::vector<DLTensor> inputs;                       // one per tensor, in order of appearance
  std::vector<std::vector<const DLTensor*>> lists;    // Tensor[] arguments
  std::vector<DLTensor> outputs;
  std::vector<std::shared_ptr<char>> scratch;
  std::string error;
  bool error_set = false;
};

absl::StatusOr<DLTensor> View(char* base, const TensorMeta& m, absl::string_view op) {
  DLTensor t{};
  TD_ASSIGN_OR_RETURN(t.dtype, ToDlDtype(m.dtype, op));
  // `data` points at the first element (byte_offset 0), as PyTorch's
  // to_dlpack gives it.
  t.data = base == nullptr ? nullptr : base + m.storage_offset * m.itemsize();
  t.device = m.device.is_cuda() ? DLDevice{kDLCUDA, m.device.index} : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(m.sizes.size());
  t.shape = const_cast<int64_t*>(m.sizes.data());
  t.strides = const_cast<int64_t*>(m.strides.data());
  t.byte_offset = 0;
  return t;
}

void* Scratch(TdKernelEnv* env, int64_t bytes) {
  auto* st = static_cast<CallState*>(env->daemon_private);
  if (bytes < 0) return nullptr;
  ScratchAllocator* a = CurrentScratchAllocator();
  if (a == nullptr) return nullptr;
  absl::StatusOr<std::shared_ptr<char>> p = a->Allocate(bytes);
  if (!p.ok()) return nullptr;
  st->scratch.push_back(*std::move(p));
  return st->scratch.back().get();
}

void SetError(TdKernelEnv* env, const char* message) {
  auto* st = static_cast<CallState*>(env->daemon_private);
  if (st->error_set) return;
  st->error_set = true;
  // Bounded: a kernel's message is cut at 4 KiB and at its first NUL.
  st->error = message == nullptr ? std::string() : std::string(message, strnlen(message, 4096));
}

}  // namespace

absl::Status RunArtifactKernel(const ArtifactKernel& k, KernelContext& ctx) {
  if (k.worker != nullptr) return k.worker->Run(k, ctx);
  const std::string& op = k.op_name;
  if (k.fn == nullptr) return InternalErr(absl::StrCat(op, ": an artifact kernel without its object"));
  CallState st;
  // Sized up front: TdArg and the lists point into these vectors.
  size_t n_tensors = 0, n_lists = 0;
  for (const Value& v : ctx.args) {
    if (v.kind() == Value::Kind::kTensor) ++n_tensors;
    if (v.kind() == Value::Kind::kTensorList) {
      n_tensors += v.tensor_list().size();
      ++n_lists;
    }
  }
  st.inputs.reserve(n_tensors);
  st.lists.reserve(n_lists);
  st.args.reserve(ctx.args.size());
  for (const Value& v : ctx.args) {
    TdArg a{};
    switch (v.kind()) {
      case Value::Kind::kNone: a.kind = TD_ARG_NONE; break;
      case Value::Kind::kTensor: {
        TD_ASSIGN_OR_RETURN(DLTensor t, View(ctx.input_base(v.tensor_ptr()), v.tensor(), op));
        st.inputs.push_back(t);
        a.kind = TD_ARG_TENSOR;
        a.value.tensor = &st.inputs.back();
        break;
      }
      case Value::Kind::kTensorList: {
        std::vector<const DLTensor*>& views = st.lists.emplace_back();
        for (const TensorMeta* m : v.tensor_list()) {
          if (m == nullptr) {  // an absent element of a Tensor?[]
            views.push_back(nullptr);
            continue;
          }
          TD_ASSIGN_OR_RETURN(DLTensor t, View(ctx.input_base(m), *m, op));
          st.inputs.push_back(t);
          views.push_back(&st.inputs.back());
        }
        a.kind = TD_ARG_TENSORS;
        a.value.tensors.data = views.data();
        a.value.tensors.size = static_cast<int64_t>(views.size());
        break;
      }
      case Value::Kind::kInt: a.kind = TD_ARG_INT; a.value.i = v.to_int(); break;
      case Value::Kind::kFloat: a.kind = TD_ARG_FLOAT; a.value.f = v.to_double(); break;
      case Value::Kind::kBool: a.kind = TD_ARG_BOOL; a.value.b = v.to_bool() ? 1 : 0; break;
      case Value::Kind::kScalar: {
        const Scalar s = v.scalar();
        a.kind = TD_ARG_SCALAR;
        if (s.is_float()) {
          a.value.scalar.kind = TD_ARG_FLOAT;
          a.value.scalar.value.f = s.to_double();
        } else if (s.is_bool()) {
          a.value.scalar.kind = TD_ARG_BOOL;
          a.value.scalar.value.b = s.to_bool() ? 1 : 0;
        } else {
          a.value.scalar.kind = TD_ARG_INT;
          a.value.scalar.value.i = s.to_int();
        }
        break;
      }
      case Value::Kind::kIntList:
        a.kind = TD_ARG_INTS;
        a.value.ints.data = v.int_list().data();
        a.value.ints.size = static_cast<int64_t>(v.int_list().size());
        break;
      case Value::Kind::kFloatList:
        a.kind = TD_ARG_FLOATS;
        a.value.floats.data = v.float_list().data();
        a.value.floats.size = static_cast<int64_t>(v.float_list().size());
        break;
      case Value::Kind::kString: a.kind = TD_ARG_STRING; a.value.str = v.str().c_str(); break;
      case Value::Kind::kDtype: {
        a.kind = TD_ARG_DTYPE;
        TD_ASSIGN_OR_RETURN(a.value.dtype, ToDlDtype(v.dtype(), op));
        break;
      }
      case Value::Kind::kDevice:
        return NotImplementedErr(absl::StrCat(op, ": Device arguments cannot cross the kernel ABI"));
    }
    st.args.push_back(a);
  }
  st.outputs.reserve(ctx.outputs.size());
  for (const TensorRef& r : ctx.outputs) {
    TD_ASSIGN_OR_RETURN(DLTensor t, View(r.base, *r.meta, op));
    st.outputs.push_back(t);
  }
  st.env.abi_version = TD_KERNEL_ABI_VERSION;
  st.env.size = sizeof(TdKernelEnv);
  st.env.op_name = op.c_str();
  st.env.num_args = static_cast<int32_t>(st.args.size());
  st.env.num_outputs = static_cast<int32_t>(st.outputs.size());
  st.env.args = st.args.data();
  st.env.outputs = st.outputs.data();
  st.env.stream = ctx.stream;
  st.env.scratch = &Scratch;
  st.env.set_error = &SetError;
  st.env.daemon_private = &st;
  int32_t status = TD_OK;
  try {
    status = k.fn(&st.env);
  } catch (const std::exception& e) {
    return RuntimeErr(absl::StrCat(op, ": the kernel threw an exception: ", e.what()));
  } catch (...) {
    return RuntimeErr(absl::StrCat(op, ": the kernel threw an exception that is not a std::exception"));
  }
  if (status != TD_OK) {
    if (st.error.empty()) return RuntimeErr(absl::StrCat(op, ": the kernel returned status ", status, " without a message"));
    return RuntimeErr(absl::StrCat(op, ": ", st.error));
  }
  return absl::OkStatus();
}

}  // namespace tensord::runtime
