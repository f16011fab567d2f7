// The artifact builder: compilers run with posix_spawnp (arguments as a
// vector, no shell, output through a pipe), the object loaded with dlopen to
// read its declarations, and its ops checked with meta's ExtensionOps, the
// same check the daemon and the clients run.
#include "tensord/artifact/builder.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tensord/artifact/elf_inspect.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/declared_derivative.h"
#include "tensord/meta/op_registry.h"
#include "tensord_kernel.h"

extern char** environ;

#ifndef TENSORD_ABI_INCLUDE_DIR
#error "TENSORD_ABI_INCLUDE_DIR must name kernels/abi (kernels/artifact/CMakeLists.txt sets it)"
#endif
#ifndef TENSORD_VERSION
#define TENSORD_VERSION "0.1.0"
#endif

namespace tensord {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxCompilerOutputInError = 8 << 10;
// The longest string the builder copies out of a library's declarations.
constexpr size_t kMaxDeclString = 64 << 10;
// Bumped when the canonical text of the source hash changes, so old cache
// entries stop matching.
constexpr absl::string_view kSourceHashFormat = "tensord-build-kernel source hash v1";

absl::Status Err(absl::string_view msg) { return RuntimeErr(absl::StrCat("build-kernel: ", msg)); }

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Err(absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(errno)));
  std::stringstream s;
  s << f.rdbuf();
  if (f.bad()) return Err(absl::StrCat("cannot read ", what, " ", path));
  return s.str();
}

// Writes `bytes` to `path` through a temporary file in the same directory
// and a rename, so a reader sees the old file or the new one, never a part.
absl::Status WriteAtomically(const std::string& path, absl::string_view bytes) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Err(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Err(absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  // mkstemp makes the file 0600; an artifact is shared like any build output.
  ::fchmod(fd, 0644);
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Err(absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

// A fresh directory for one build's objects, removed with them.
class ScratchDir {
 public:
  static absl::StatusOr<std::unique_ptr<ScratchDir>> Make() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/tensord-build-XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Err(absl::StrCat("cannot make a temporary directory ", tmpl, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<ScratchDir>(new ScratchDir(std::move(tmpl)));
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

struct CommandResult {
  int exit_status = 0;  // the exit code, or 128 + signal
  std::string output;   // stdout and stderr, interleaved as written
  bool timed_out = false;
};

// Runs argv[0] (looked up in PATH) with `argv`, no shell; its stdout and
// stderr go to one pipe. It runs in a process group of its own, killed
// whole (compilers included) once `timeout` has passed: then `timed_out`.
// Errors only when it cannot be started.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, bool verbose, std::string* log,
                                         absl::Duration timeout = absl::InfiniteDuration()) {
  const std::string line = absl::StrJoin(argv, " ");
  absl::StrAppend(log, "$ ", line, "\n");
  if (verbose) std::fprintf(stderr, "%s\n", line.c_str());
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Err(absl::StrCat("pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return Err(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }
  CommandResult r;
  char buf[8192];
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (timeout != absl::InfiniteDuration()) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd p{pipefd[0], POLLIN, 0};
      const int ready = left_ms <= 0 ? 0 : ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (absl::Now() < deadline) continue;
        ::kill(-pid, SIGKILL);  // the whole group: compilers it started too
        r.timed_out = true;
        break;
      }
    }
    const ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  log->append(r.output);
  if (verbose && !r.output.empty()) std::fprintf(stderr, "%s", r.output.c_str());
  return r;
}

// Runs a compile or link step; a non-zero exit is the error the user sees.
absl::Status RunStep(const std::vector<std::string>& argv, absl::string_view doing, bool verbose, std::string* log) {
  TD_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, verbose, log));
  if (r.exit_status == 0) return absl::OkStatus();
  std::string out = r.output;
  if (out.size() > kMaxCompilerOutputInError) {
    out = absl::StrCat(out.substr(0, kMaxCompilerOutputInError), "\n[... ", out.size() - kMaxCompilerOutputInError,
                       " more bytes of output cut]");
  }
  return Err(absl::StrCat(fs::path(argv[0]).filename().string(), " failed (exit status ", r.exit_status, ") ",
                          doing, ":\n", out));
}

// The line of `tool --version` that names the version: the first for g++
// and clang; nvcc's first line only names the driver, so its "release" line.
absl::StatusOr<std::string> ToolVersion(const std::string& tool, std::string* log) {
  std::string unused_log;
  TD_ASSIGN_OR_RETURN(CommandResult r, RunCommand({tool, "--version"}, false, &unused_log));
  if (r.exit_status != 0) {
    return Err(absl::StrCat(tool, " --version failed (exit status ", r.exit_status, "): ", r.output));
  }
  std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipWhitespace());
  if (lines.empty()) return Err(absl::StrCat(tool, " --version printed nothing"));
  for (const std::string& l : lines) {
    if (absl::StrContains(l, "release")) return std::string(absl::StripAsciiWhitespace(l));
  }
  return std::string(absl::StripAsciiWhitespace(lines[0]));
}

enum class Language { kC, kCxx, kCuda };

std::optional<Language> LanguageOf(const std::string& source) {
  const std::string ext = fs::path(source).extension().string();
  if (ext == ".c") return Language::kC;
  if (ext == ".cc" || ext == ".cpp" || ext == ".cxx") return Language::kCxx;
  if (ext == ".cu") return Language::kCuda;
  return std::nullopt;
}

std::string FindNvcc(const BuildOptions& o) {
  if (!o.nvcc.empty()) return o.nvcc;
  if (::access("/usr/local/cuda/bin/nvcc", X_OK) == 0) return "/usr/local/cuda/bin/nvcc";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/nvcc");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The file names of a make rule as `cc -MM` prints it ("obj.o: a.cc b.h",
// continued with backslash-newline), with its escaped spaces undone.
std::vector<std::string> MakeRuleDependencies(absl::string_view rule) {
  std::vector<std::string> out;
  std::string cur;
  bool after_colon = false;
  for (size_t i = 0; i < rule.size(); ++i) {
    const char c = rule[i];
    if (c == '\\' && i + 1 < rule.size() && (rule[i + 1] == '\n' || rule[i + 1] == ' ' || rule[i + 1] == '#')) {
      if (rule[i + 1] != '\n') cur.push_back(rule[i + 1]);
      ++i;
      if (rule[i] == '\n' && !cur.empty() && after_colon) out.push_back(std::exchange(cur, ""));
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty() && after_colon) out.push_back(cur);
      cur.clear();
      continue;
    }
    if (c == ':' && !after_colon && (i + 1 == rule.size() || rule[i + 1] == ' ' || rule[i + 1] == '\n')) {
      after_colon = true;
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (!cur.empty() && after_colon) out.push_back(cur);
  return out;
}

// Appends a length-prefixed field, so no two option lists hash alike.
void Field(std::string* text, absl::string_view key, absl::string_view value) {
  absl::StrAppend(text, key, " ", value.size(), "\n", value, "\n");
}

// Copies a string out of the loaded library: NULL gives "" when allowed.
absl::StatusOr<std::string> CopyDeclString(const char* s, bool required, absl::string_view what) {
  if (s == nullptr) {
    if (required) return Err(absl::StrCat(what, " is NULL"));
    return std::string();
  }
  const size_t n = ::strnlen(s, kMaxDeclString + 1);
  if (n > kMaxDeclString) return Err(absl::StrCat(what, " is longer than ", kMaxDeclString, " bytes"));
  return std::string(s, n);
}

struct Declarations {
  uint32_t abi_version = 0;
  std::string name;
  std::vector<ArtifactOp> ops;
};

// Loads the built object here and copies what tensord_library() declares.
absl::StatusOr<Declarations> ReadDeclarations(const std::string& so_path) {
  void* handle = ::dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    return Err(absl::StrCat("the built object cannot be loaded: ", e != nullptr ? e : "dlopen failed"));
  }
  struct Closer {
    void* h;
    ~Closer() { ::dlclose(h); }
  } closer{handle};
  void* sym = ::dlsym(handle, TD_LIBRARY_QUERY_SYMBOL);
  if (sym == nullptr) {
    return Err("the object exports no " TD_LIBRARY_QUERY_SYMBOL
               "() (define the library's ops with TD_DEFINE_LIBRARY(\"name\", ops))");
  }
  TdLibraryQueryFn query;
  std::memcpy(&query, &sym, sizeof query);
  const TdLibrary* lib = query();
  if (lib == nullptr) return Err(TD_LIBRARY_QUERY_SYMBOL "() returned NULL");
  Declarations d;
  d.abi_version = lib->abi_version;
  if (lib->abi_version == 0 || lib->abi_version > TD_KERNEL_ABI_VERSION) {
    return Err(absl::StrCat("the object was built against kernel ABI version ", lib->abi_version,
                            "; this tensord builds versions 1 to ", TD_KERNEL_ABI_VERSION));
  }
  // Version 1's fields end at `ops`; a later header may add more.
  constexpr size_t kV1Size = offsetof(TdLibrary, ops) + sizeof(lib->ops);
  if (lib->size < kV1Size) {
    return Err(absl::StrCat("the object's TdLibrary is ", lib->size, " bytes, smaller than version ",
                            lib->abi_version, "'s ", kV1Size));
  }
  TD_ASSIGN_OR_RETURN(d.name, CopyDeclString(lib->name, true, "the library's name"));
  if (lib->num_ops <= 0) return Err(absl::StrCat("library '", d.name, "' declares no ops"));
  if (static_cast<uint64_t>(lib->num_ops) > kMaxArtifactOps) {
    return Err(absl::StrCat("library '", d.name, "' declares ", lib->num_ops, " ops, over the limit of ",
                            kMaxArtifactOps));
  }
  if (lib->ops == nullptr) return Err(absl::StrCat("library '", d.name, "' declares ops at NULL"));
  for (int64_t i = 0; i < lib->num_ops; ++i) {
    const TdOpDecl& decl = lib->ops[i];
    ArtifactOp op;
    const std::string which = absl::StrCat("op ", i, "'s ");
    TD_ASSIGN_OR_RETURN(op.schema, CopyDeclString(decl.schema, true, which + "schema"));
    TD_ASSIGN_OR_RETURN(op.shape_rule, CopyDeclString(decl.shape_rule, true, which + "shape rule"));
    TD_ASSIGN_OR_RETURN(op.derivative, CopyDeclString(decl.derivative, false, which + "derivative"));
    TD_ASSIGN_OR_RETURN(op.cpu_symbol, CopyDeclString(decl.cpu_symbol, false, which + "CPU symbol"));
    TD_ASSIGN_OR_RETURN(op.cuda_symbol, CopyDeclString(decl.cuda_symbol, false, which + "CUDA symbol"));
    d.ops.push_back(std::move(op));
  }
  return d;
}

// The daemon's checks on the declarations, before anything is written.
absl::Status CheckDeclarations(const Declarations& d, const std::string& library, const ElfInfo& elf) {
  if (d.name != library) {
    return Err(absl::StrCat("the object's TD_DEFINE_LIBRARY names library '", d.name, "', not '", library,
                            "' (the build's name)"));
  }
  if (!elf.rpath.empty()) {
    return Err(absl::StrCat("the object sets a library search path (RPATH/RUNPATH '", elf.rpath[0],
                            "'), which every daemon refuses: link without -rpath, needing libraries by name only"));
  }
  ExtensionOps ext;
  for (const ArtifactOp& op : d.ops) {
    const std::string rule = absl::StartsWith(op.shape_rule, "like:") ? op.shape_rule : "rule:" + op.shape_rule;
    absl::StatusOr<const OpEntry*> entry = ext.Define(op.schema, rule, /*artifact=*/{}, op.derivative);
    if (!entry.ok()) return Err(absl::StrCat("op '", op.schema, "': ", entry.status().message()));
    const std::string full = (*entry)->full_name();
    const size_t sep = full.find("::");
    const std::string ns = sep == std::string::npos ? "" : full.substr(0, sep);
    if (ns != library) return Err(absl::StrCat("op '", full, "' is not in library '", library, "'"));
    if (op.cpu_symbol.empty() && op.cuda_symbol.empty()) {
      return Err(absl::StrCat("op '", full, "' names no kernel (neither a CPU nor a CUDA symbol)"));
    }
    for (const auto& [device, symbol] : {std::pair<absl::string_view, const std::string*>{"CPU", &op.cpu_symbol},
                                         std::pair<absl::string_view, const std::string*>{"CUDA", &op.cuda_symbol}}) {
      if (symbol->empty()) continue;
      if (!std::binary_search(elf.defined_functions.begin(), elf.defined_functions.end(), *symbol)) {
        return Err(absl::StrCat("op '", full, "' names ", device, " symbol '", *symbol,
                                "', which the object does not export (mark it TD_EXPORT)"));
      }
    }
  }
  // A derivative may call the library's own ops (a backward kernel), found
  // by name when it runs: each must be one of them, or no daemon could run it.
  for (size_t i = 0; i < ext.size(); ++i) {
    const OpEntry* e = ext.at_id(kFirstExtensionOpId + static_cast<uint32_t>(i));
    if (e->declared_derivative == nullptr) continue;
    for (const std::string& called : e->declared_derivative->extension_calls()) {
      if (ext.Find(called) == nullptr) {
        return Err(absl::StrCat("the derivative of '", e->full_name(), "' calls '", called,
                                "', which is not an op of library '", library, "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BuildResult> BuildArtifact(const BuildOptions& options) {
  BuildResult result;
  std::string& log = result.log;
  const bool verbose = options.verbose;
  if (options.name.empty()) return Err("no library name");
  if (options.sources.empty()) return Err("no sources");
  if (options.output.empty()) return Err("no output path");
  bool any_cuda = false;
  for (const std::string& s : options.sources) {
    const std::optional<Language> lang = LanguageOf(s);
    if (!lang.has_value()) {
      return Err(absl::StrCat("source ", s, " is not .c, .cc, .cpp, .cxx or .cu"));
    }
    any_cuda |= *lang == Language::kCuda;
  }
  std::vector<std::string> archs = options.cuda_archs.empty() ? std::vector<std::string>{"80", "90"}
                                                              : options.cuda_archs;
  for (const std::string& a : archs) {
    if (a.empty() || a.size() > 4 || !std::all_of(a.begin(), a.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c));
        })) {
      return Err(absl::StrCat("CUDA architecture '", a, "' is not like 80 or 90a"));
    }
  }
  const std::string nvcc = any_cuda ? FindNvcc(options) : "";
  if (any_cuda && nvcc.empty()) {
    return Err("the sources include CUDA (.cu) but no nvcc was found (looked in /usr/local/cuda/bin and PATH)");
  }

  // The kernel ABI header the sources compile against.
  const char* abi_env = std::getenv("TENSORD_ABI_INCLUDE");
  const std::string abi_dir = abi_env != nullptr && *abi_env != '\0' ? abi_env : TENSORD_ABI_INCLUDE_DIR;
  TD_ASSIGN_OR_RETURN(std::string abi_header,
                      ReadWholeFile(abi_dir + "/tensord_kernel.h", "the kernel ABI header (TENSORD_ABI_INCLUDE)"));

  // The flags of each compiler, without the source and output.
  std::vector<std::string> cflags = {"-O2", "-fPIC", "-fvisibility=hidden", "-I" + abi_dir};
  for (const std::string& d : options.include_dirs) cflags.push_back("-I" + d);
  std::vector<std::string> cuda_flags = {"-O2", "-std=c++17", "-Xcompiler", "-fPIC,-fvisibility=hidden",
                                         "-ccbin", options.cxx, "-I" + abi_dir};
  for (const std::string& d : options.include_dirs) cuda_flags.push_back("-I" + d);
  for (const std::string& a : archs) {
    cuda_flags.push_back("-gencode");
    cuda_flags.push_back(absl::StrCat("arch=compute_", a, ",code=sm_", a));
  }
  cuda_flags.push_back("-gencode");
  cuda_flags.push_back(absl::StrCat("arch=compute_", archs.back(), ",code=compute_", archs.back()));
  cuda_flags.insert(cuda_flags.end(), options.extra_cuda_cflags.begin(), options.extra_cuda_cflags.end());
  auto compile_command = [&](const std::string& source, Language lang) {
    std::vector<std::string> argv;
    if (lang == Language::kCuda) {
      argv.push_back(nvcc);
      argv.insert(argv.end(), cuda_flags.begin(), cuda_flags.end());
    } else {
      argv.push_back(options.cxx);
      if (lang == Language::kC) {
        argv.insert(argv.end(), {"-x", "c", "-std=c11"});
      } else {
        argv.push_back("-std=c++17");
      }
      argv.insert(argv.end(), cflags.begin(), cflags.end());
      argv.insert(argv.end(), options.extra_cflags.begin(), options.extra_cflags.end());
    }
    return argv;
  };

  // The source hash: everything that changes the object.
  TD_ASSIGN_OR_RETURN(const std::string cxx_version, ToolVersion(options.cxx, &log));
  std::string nvcc_version;
  if (any_cuda) {
    TD_ASSIGN_OR_RETURN(nvcc_version, ToolVersion(nvcc, &log));
  }
  std::string text(kSourceHashFormat);
  text.push_back('\n');
  Field(&text, "abi_header", abi_header);
  Field(&text, "name", options.name);
  Field(&text, "cxx", cxx_version);
  Field(&text, "cflags", absl::StrJoin(options.extra_cflags, "\n"));
  Field(&text, "ldflags", absl::StrJoin(options.extra_ldflags, "\n"));
  Field(&text, "include_dirs", absl::StrJoin(options.include_dirs, "\n"));
  if (any_cuda) {
    Field(&text, "nvcc", nvcc_version);
    Field(&text, "cuda_archs", absl::StrJoin(archs, ","));
    Field(&text, "cuda_cflags", absl::StrJoin(options.extra_cuda_cflags, "\n"));
  }
  for (const std::string& s : options.sources) {
    TD_ASSIGN_OR_RETURN(std::string content, ReadWholeFile(s, "source"));
    Field(&text, "source", fs::path(s).filename().string());
    Field(&text, "content", content);
    // The headers it includes (outside system directories), by content:
    // a changed header must not hit an old cache entry.
    std::vector<std::string> deps_argv = compile_command(s, *LanguageOf(s));
    deps_argv.insert(deps_argv.end(), {"-MM", s});
    TD_ASSIGN_OR_RETURN(CommandResult deps, RunCommand(deps_argv, /*verbose=*/false, &log));
    if (deps.exit_status != 0) {
      // The compile below reports the same error with its full context.
      Field(&text, "dependencies", "unknown");
      continue;
    }
    std::set<std::pair<std::string, std::string>> headers;
    for (const std::string& dep : MakeRuleDependencies(deps.output)) {
      std::error_code ec1, ec2;
      if (fs::equivalent(dep, s, ec1) || fs::equivalent(dep, abi_dir + "/tensord_kernel.h", ec2)) continue;
      TD_ASSIGN_OR_RETURN(std::string h, ReadWholeFile(dep, "header"));
      headers.emplace(fs::path(dep).filename().string(), std::move(h));
    }
    for (const auto& [name, content] : headers) {
      Field(&text, "header", name);
      Field(&text, "content", content);
    }
  }
  const std::string source_hash = Sha256Hex(text);

  // The cache.
  std::string cache_path;
  if (!options.cache_dir.empty()) {
    cache_path = absl::StrCat(options.cache_dir, "/", source_hash, ".tdk");
    std::ifstream probe(cache_path, std::ios::binary);
    if (probe) {
      absl::StatusOr<std::string> bytes = ReadWholeFile(cache_path, "cache entry");
      absl::StatusOr<Artifact> cached = bytes.ok() ? ParseArtifact(*bytes) : absl::StatusOr<Artifact>(bytes.status());
      if (cached.ok() && cached->manifest.source_hash == source_hash) {
        TD_RETURN_IF_ERROR(WriteAtomically(options.output, *bytes));
        absl::StrAppend(&log, "cache hit: ", cache_path, "\n");
        result.manifest = std::move(cached->manifest);
        result.content_hash = std::move(cached->content_hash);
        result.from_cache = true;
        return result;
      }
      absl::StrAppend(&log, "cache entry ", cache_path, " is unusable (",
                      cached.ok() ? "another source hash" : cached.status().message(), "): rebuilding\n");
    }
  }

  // Compile and link in a fresh directory.
  TD_ASSIGN_OR_RETURN(std::unique_ptr<ScratchDir> scratch, ScratchDir::Make());
  std::vector<std::string> objects;
  for (size_t i = 0; i < options.sources.size(); ++i) {
    const std::string& s = options.sources[i];
    const std::string obj = absl::StrCat(scratch->path(), "/", i, "_", fs::path(s).stem().string(), ".o");
    std::vector<std::string> argv = compile_command(s, *LanguageOf(s));
    argv.insert(argv.end(), {"-c", s, "-o", obj});
    TD_RETURN_IF_ERROR(RunStep(argv, absl::StrCat("compiling ", fs::path(s).filename().string()), verbose, &log));
    objects.push_back(obj);
  }
  const std::string so_path = absl::StrCat(scratch->path(), "/lib", options.name, ".so");
  std::vector<std::string> link = {options.cxx, "-shared", "-o", so_path};
  link.insert(link.end(), objects.begin(), objects.end());
  // Static archives' symbols (cudart_static's, the user's) stay inside the object.
  link.push_back("-Wl,--exclude-libs,ALL");
  link.insert(link.end(), options.extra_ldflags.begin(), options.extra_ldflags.end());
  if (any_cuda) {
    link.push_back("-L" + (fs::path(nvcc).parent_path().parent_path() / "lib64").string());
    link.insert(link.end(), {"-lcudart_static", "-ldl", "-lrt", "-lpthread"});
  }
  TD_RETURN_IF_ERROR(RunStep(link, absl::StrCat("linking lib", options.name, ".so"), verbose, &log));
  TD_ASSIGN_OR_RETURN(std::string payload, ReadWholeFile(so_path, "the built object"));

  // What the object needs and declares, checked as the daemon will.
  absl::StatusOr<ElfInfo> elf = InspectElf(payload);
  if (!elf.ok()) return Err(elf.status().message());
  TD_ASSIGN_OR_RETURN(Declarations decls, ReadDeclarations(so_path));
  TD_RETURN_IF_ERROR(CheckDeclarations(decls, options.name, *elf));

  Manifest& m = result.manifest;
  m.abi_version = decls.abi_version;
  m.library = options.name;
  m.ops = std::move(decls.ops);
  SetElfFacts(*elf, &m);
  m.builder = absl::StrCat("tensord ", TENSORD_VERSION, ", ", cxx_version);
  if (any_cuda) absl::StrAppend(&m.builder, ", ", nvcc_version);
  m.source_hash = source_hash;
  const std::string file = SerializeArtifact(m, payload);
  // Read back what was written: the file a daemon gets parses.
  TD_ASSIGN_OR_RETURN(Artifact parsed, ParseArtifact(file));
  TD_RETURN_IF_ERROR(WriteAtomically(options.output, file));
  if (!cache_path.empty()) {
    std::error_code ec;
    fs::create_directories(options.cache_dir, ec);
    if (ec) return Err(absl::StrCat("cannot make the cache directory ", options.cache_dir, ": ", ec.message()));
    TD_RETURN_IF_ERROR(WriteAtomically(cache_path, file));
  }
  result.manifest = std::move(parsed.manifest);
  result.content_hash = std::move(parsed.content_hash);
  return result;
}

absl::StatusOr<std::string> BuildArtifactInChild(const std::string& tensord_binary, const BuildOptions& options,
                                                 const std::vector<SourceText>& files, absl::Duration timeout) {
  constexpr size_t kMaxFiles = 64;
  if (files.empty()) return Err("no sources");
  if (files.size() > kMaxFiles) return Err(absl::StrCat(files.size(), " source files, at most ", kMaxFiles));
  static constexpr const char* kExtensions[] = {".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp", ".cuh", ".inc"};
  TD_ASSIGN_OR_RETURN(std::unique_ptr<ScratchDir> dir, ScratchDir::Make());
  std::vector<std::string> argv = {tensord_binary, "build-kernel", "-o", dir->path() + "/out.tdk", "--name",
                                   options.name};
  if (!options.cache_dir.empty()) argv.insert(argv.end(), {"--cache", options.cache_dir});
  if (!options.cuda_archs.empty()) argv.insert(argv.end(), {"--cuda-arch", absl::StrJoin(options.cuda_archs, ",")});
  for (const auto& [flag, values] : {std::pair{"--cflags", &options.extra_cflags},
                                     std::pair{"--cuda-cflags", &options.extra_cuda_cflags},
                                     std::pair{"--ldflags", &options.extra_ldflags}}) {
    if (!values->empty()) argv.insert(argv.end(), {flag, absl::StrJoin(*values, " ")});
  }
  std::set<std::string> seen;
  for (const SourceText& f : files) {
    const bool plain = !f.name.empty() && f.name.size() <= 128 && f.name[0] != '.' && f.name[0] != '-' &&
                       f.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
                           std::string::npos;
    const bool known = std::any_of(std::begin(kExtensions), std::end(kExtensions),
                                   [&](const char* e) { return absl::EndsWith(f.name, e); });
    if (!plain || !known) {
      return Err(absl::StrCat("source file name '", f.name.substr(0, 128),
                              "' must be a plain base name (letters, digits, _ - .) ending in .c, .cc, .cpp, .cxx, "
                              ".cu, .h, .hpp, .cuh or .inc"));
    }
    if (!seen.insert(f.name).second) return Err(absl::StrCat("source file '", f.name, "' given twice"));
    std::ofstream out(dir->path() + "/" + f.name, std::ios::binary);
    out << f.text;
    if (!out) return Err(absl::StrCat("cannot write ", f.name, " to the build directory"));
    // Headers are found beside the sources (-I is not needed: the
    // compilers look in the including file's directory).
    if (!absl::EndsWith(f.name, ".h") && !absl::EndsWith(f.name, ".hpp") && !absl::EndsWith(f.name, ".cuh") &&
        !absl::EndsWith(f.name, ".inc")) {
      argv.push_back(dir->path() + "/" + f.name);
    }
  }
  std::string log;
  TD_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, /*verbose=*/false, &log, timeout));
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("build-kernel: the build of ", options.name, " took longer than ",
                                                    absl::FormatDuration(timeout), " and was stopped"));
  }
  if (r.exit_status != 0) {
    std::string out = r.output.size() > 8192 ? r.output.substr(r.output.size() - 8192) : r.output;
    // The scratch directory's path means nothing to the client.
    out = absl::StrReplaceAll(out, {{dir->path() + "/", ""}});
    return Err(absl::StrCat("the build of ", options.name, " failed:\n", out));
  }
  std::ifstream in(dir->path() + "/out.tdk", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace tensord
