// The `tensord` command.
//
//   tensord serve --listen unix:/run/tensord.sock --listen 127.0.0.1:7070
//   tensord serve --config /etc/tensord/tensord.conf
//   tensord check model.py [ARGS...]
//   tensord devices [--address ADDRESS]
//   tensord build-kernel -o mylib.tdk scale.cc scale.cu
//   tensord inspect-kernel mylib.tdk
//   tensord --version
//
// `serve` prints one line, "tensord: listening on ADDRESS[, ADDRESS...]", on
// stdout once every address is bound (clients that spawn a daemon wait for
// it), logs one line per session event on stderr, and exits 0 after SIGINT or
// SIGTERM, having closed every session and removed its Unix socket files.
// When a device fails for good (a GPU fault), it ends every session with
// the failure, reports NOT_SERVING and exits with kExitDeviceFailure (75)
// within a second, for its supervisor to start it again.
//
// `check` replaces this process with `python3 -m tensord._check SCRIPT ARGS`
// ($TENSORD_PYTHON, default /usr/bin/python3): the script runs with every
// tensor on meta and no daemon, and the exit status says whether it passed.
//
// `devices` prints one line per device a daemon serves (name, kind, total
// and free memory, compute capability, description) and a line with its
// CUDA versions, or why it serves no CUDA device: the daemon at --address
// or $TENSORD_ADDRESS, else what `tensord serve` would serve on this machine
// (the embedded daemon a client spawns is that), found without starting one.
//
// `build-kernel` compiles a kernel artifact (tensord/artifact/builder.h); it
// loads the object it built to read its ops, which is why it runs here, in a
// process of its own, and never in the daemon. `inspect-kernel` prints an
// artifact's manifest.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "grpc/grpc.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tensord/artifact/artifact.h"
#include "tensord/artifact/builder.h"
#include "tensord/meta/op_table.h"
#include "tensord/runtime/memory.h"
#include "tensord/server/daemon.h"
#include "tensord/runtime/log.h"
#include "tensord/runtime/artifact_worker.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/server/service.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/wire.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;
namespace {

constexpr char kUsage[] =
    "usage: tensord <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve        run the daemon\n"
    "  check SCRIPT [ARGS...]\n"
    "               run a Python script with every tensor on meta (shapes, dtypes and\n"
    "               strides only; no daemon, no data): exit 0 when it completes, else\n"
    "               non-zero with the first error, its op and the script's file:line\n"
    "  devices [--address ADDRESS] [--test-device]\n"
    "               list the devices of the daemon at ADDRESS (default $TENSORD_ADDRESS; unset:\n"
    "               those a daemon started here would serve) with their memory and compute\n"
    "               capability, and its CUDA versions or why it has no CUDA device\n"
    "  build-kernel -o OUT.tdk [options] SOURCES...\n"
    "               compile a kernel artifact from .c/.cc/.cpp/.cxx (g++) and .cu (nvcc) sources\n"
    "               that include <tensord_kernel.h> (build-kernel --help lists its options)\n"
    "  inspect-kernel FILE\n"
    "               check a kernel artifact and print its manifest (JSON) and content hash\n"
    "  sign-kernel --key KEY.pem FILE\n"
    "               add an Ed25519 signature by KEY.pem to a kernel artifact (daemons started with\n"
    "               --artifact-key for its public key then run it)\n"
    "  --version    print the version and exit\n"
    "  --help       print this help and exit\n"
    "\n"
    "serve options:\n"
    "  --listen ADDRESS               unix:PATH or HOST:PORT (port 0 picks a free one);\n"
    "                                 repeat to listen on several addresses\n"
    "  --config FILE                  key = value lines: listen, session_memory_limit_bytes,\n"
    "                                 cuda_session_memory_limit_bytes, cpu_cache_limit_bytes, log_level,\n"
    "                                 stream_spin_us, grpc_threads, max_sessions_per_peer\n"
    "                                 (command-line options take precedence)\n"
    "  --session-memory-limit BYTES   per-session limit on memory: tensors and what the daemon keeps\n"
    "                                 for the session (e.g. 4GiB or 4G = 4 * 2^30, 4GB = 4 * 10^9;\n"
    "                                 0 = none; default half the physical memory, or of the\n"
    "                                 cgroup's memory.max when lower); counts every device together\n"
    "  --cuda-session-memory-limit BYTES\n"
    "                                 per-session limit on each GPU's memory (default 0 = none of its\n"
    "                                 own; also $TENSORD_CUDA_SESSION_MEMORY_LIMIT)\n"
    "  --cpu-cache-limit BYTES        most bytes of freed large (>= 2 MiB) storages kept mapped\n"
    "                                 for reuse (default min(1GiB, physical memory / 8); 0 = off;\n"
    "                                 also $TENSORD_CPU_CACHE_LIMIT); emptied when a session\n"
    "                                 closes and after 5 s without large allocations\n"
    "  --log-level LEVEL              error, warning, info (default) or debug\n"
    "  --stream-spin-us US            same-host and TCP streams: how long a session's thread polls\n"
    "                                 its socket for the next message before it sleeps (default\n"
    "                                 100; 0 = never; also $TENSORD_STREAM_SPIN_US)\n"
    "  --grpc-threads N               the gRPC server's thread cap (default 256, at least 24): a\n"
    "                                 session stream on gRPC holds one while it lasts, and 16 are\n"
    "                                 kept for health checks and opening and closing sessions, so\n"
    "                                 N - 16 gRPC session streams run at once (the same-host and\n"
    "                                 TCP streams hold none)\n"
    "  --max-sessions-per-peer N      most sessions open at once from one peer (a TCP client's\n"
    "                                 address or IPv6 /64, a Unix socket client's uid; default\n"
    "                                 64, 0 = no limit per peer; 1024 in all), and twice N\n"
    "                                 open gRPC connections: one peer cannot take every session\n"
    "                                 or descriptor from the others\n"
    "  --test-device                  also serve privateuseone:0, host memory that behaves as a\n"
    "                                 separate device (explicit copies, its own allocator): for\n"
    "                                 testing device code without a GPU (also $TENSORD_TEST_DEVICE=1)\n"
    "  --artifacts off|trusted|any    which kernel artifacts (tensord.library.load) the daemon runs:\n"
    "                                 none; those in an allow-list or signed by a listed key (the\n"
    "                                 default, with none listed); or any that passes the checks\n"
    "                                 (uploaded code runs with the daemon's rights: docs/shipping-a-kernel.md)\n"
    "  --artifact-allow-list FILE     content hashes allowed under trusted, one per line\n"
    "                                 (`sha256sum`-style lines work); repeatable\n"
    "  --artifact-key PEM             an Ed25519 public key whose signatures are allowed under\n"
    "                                 trusted; repeatable\n"
    "  --artifact-max-bytes BYTES     largest artifact file accepted (default 256MiB)\n"
    "  --artifact-isolation none|process\n"
    "                                 where artifacts' CPU kernels run: in the daemon (none, the\n"
    "                                 default) or in a worker process per session (process), where\n"
    "                                 a crash, an abort or a hang ends only the worker and fails\n"
    "                                 the call; CUDA kernels run in the daemon either way\n"
    "  --artifact-call-timeout SECONDS\n"
    "                                 under process isolation, longest one kernel call may run\n"
    "                                 before its worker is killed (default 60)\n"
    "  --private-dir DIR              a directory named tensord-* that belongs to this daemon\n"
    "                                 alone (an embedded daemon's: socket and logs); removed\n"
    "                                 with its contents after a clean shutdown\n"
    "\n"
    "exit status of serve: 0 after SIGINT or SIGTERM; 1 when it cannot start; 2 for a usage error;\n"
    "75 when a GPU failed (a fault leaves the process's CUDA context unusable): every session got\n"
    "the error, and a supervisor should start the daemon again (deploy/tensord.service does)\n";

int g_signal_pipe[2] = {-1, -1};

// What the device-failure hook writes to the signal pipe (no signal is 0).
constexpr char kDeviceFailedByte = 0;

// A device failed (DaemonOptions::on_device_failure): wakes the main thread,
// which ends the sessions and exits. Only write(2): it runs inside the CUDA
// call that saw the fault.
std::atomic<bool> g_device_failed{false};

void OnDeviceFailure(const std::string&) {
  g_device_failed.store(true);
  const char b = kDeviceFailedByte;
  (void)!::write(g_signal_pipe[1], &b, 1);
}

void OnStopSignal(int sig) {
  const int saved = errno;
  const char b = static_cast<char>(sig);
  (void)!::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Blocks until SIGINT or SIGTERM arrives, or a device fails; returns which
// (the signal's number, or kDeviceFailedByte).
int WaitForStopSignal() {
  char b = 0;
  for (;;) {
    const ssize_t n = ::read(g_signal_pipe[0], &b, 1);
    if (n == 1) return b;
    if (n < 0 && errno == EINTR) continue;
    return SIGTERM;  // the pipe broke: treat as a stop request
  }
}

// Prints `message` and a pointer to --help (the whole usage only when no
// command was given: after a bad value, it would push the error off screen).
int UsageError(const std::string& message, bool with_usage = false) {
  if (with_usage) {
    std::fprintf(stderr, "tensord: %s\n\n%s", message.c_str(), kUsage);
  } else {
    std::fprintf(stderr, "tensord: %s\n(tensord --help lists the commands and options)\n", message.c_str());
  }
  return 2;
}

// Parses `--name value` and `--name=value`. Returns false (and sets *error)
// on a missing value.
struct FlagParser {
  const std::vector<std::string>& args;
  size_t i = 0;
  std::string error;

  // If args[i] is --name or --name=..., stores the value and advances.
  bool Match(absl::string_view name, std::string* value) {
    const std::string& a = args[i];
    if (a == name) {
      if (i + 1 >= args.size()) {
        error = absl::StrCat(name, " needs a value");
        return false;
      }
      *value = args[i + 1];
      i += 2;
      return true;
    }
    if (absl::StartsWith(a, absl::StrCat(name, "="))) {
      *value = a.substr(name.size() + 1);
      i += 1;
      return true;
    }
    return false;
  }
  // Match, and an empty value is an error too: `--session-memory-limit
  // "$LIMIT"` with LIMIT unset must not silently mean "no limit".
  bool MatchNonEmpty(absl::string_view name, std::string* value) {
    if (!Match(name, value)) return false;
    if (value->empty()) {
      error = absl::StrCat(name, " needs a value (got an empty one)");
      return false;
    }
    return true;
  }
};


// Removes the daemon's private directory (nothing when `dir` is empty).
// remove_all gives up when an entry vanishes under it (the shutdown unlinks
// the socket files while a second signal's thread removes the directory, or
// the other way round): it is retried until the directory is gone.
void RemovePrivateDir(const std::string& dir) {
  if (dir.empty()) return;
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!std::filesystem::exists(dir, ec)) return;
  }
}

int Serve(const std::vector<std::string>& args) {
  DaemonOptions options;
  std::vector<std::string> listen;
  std::string config, memory_limit, cuda_memory_limit, cache_limit, log_level, private_dir, stream_spin, grpc_threads,
      per_peer, artifacts_mode, artifact_max, isolation, call_timeout;
  std::vector<std::string> allow_lists, artifact_keys;
  FlagParser p{args};
  while (p.i < args.size()) {
    std::string value;
    if (args[p.i] == "--help" || args[p.i] == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args[p.i] == "--test-device") {
      options.test_device = true;
      ++p.i;
      continue;
    }
    if (p.MatchNonEmpty("--listen", &value)) {
      listen.push_back(value);
    } else if (p.MatchNonEmpty("--config", &value)) {
      config = value;
    } else if (p.MatchNonEmpty("--session-memory-limit", &value)) {
      memory_limit = value;
    } else if (p.MatchNonEmpty("--cuda-session-memory-limit", &value)) {
      cuda_memory_limit = value;
    } else if (p.MatchNonEmpty("--cpu-cache-limit", &value)) {
      cache_limit = value;
    } else if (p.MatchNonEmpty("--stream-spin-us", &value)) {
      stream_spin = value;
    } else if (p.MatchNonEmpty("--log-level", &value)) {
      log_level = value;
    } else if (p.MatchNonEmpty("--grpc-threads", &value)) {
      grpc_threads = value;
    } else if (p.MatchNonEmpty("--max-sessions-per-peer", &value)) {
      per_peer = value;
    } else if (p.MatchNonEmpty("--private-dir", &value)) {
      private_dir = value;
    } else if (p.MatchNonEmpty("--artifacts", &value)) {
      artifacts_mode = value;
    } else if (p.MatchNonEmpty("--artifact-allow-list", &value)) {
      allow_lists.push_back(value);
    } else if (p.MatchNonEmpty("--artifact-key", &value)) {
      artifact_keys.push_back(value);
    } else if (p.MatchNonEmpty("--artifact-max-bytes", &value)) {
      artifact_max = value;
    } else if (p.MatchNonEmpty("--artifact-isolation", &value)) {
      isolation = value;
    } else if (p.MatchNonEmpty("--artifact-call-timeout", &value)) {
      call_timeout = value;
    } else if (!p.error.empty()) {
      return UsageError(p.error);
    } else {
      return UsageError(absl::StrCat("serve: unknown option '", args[p.i], "'"));
    }
    if (!p.error.empty()) return UsageError(p.error);
  }
  if (!p.error.empty()) return UsageError(p.error);

  if (!artifacts_mode.empty()) {
    absl::StatusOr<runtime::ArtifactPolicy::Mode> mode = runtime::ArtifactPolicy::ParseMode(artifacts_mode);
    if (!mode.ok()) return UsageError(std::string(mode.status().message()));
    options.artifacts.mode = *mode;
  }
  for (const std::string& f : allow_lists) {
    if (absl::Status s = options.artifacts.AddAllowList(f); !s.ok()) return UsageError(std::string(s.message()));
  }
  for (const std::string& f : artifact_keys) {
    if (absl::Status s = options.artifacts.AddKey(f); !s.ok()) return UsageError(std::string(s.message()));
  }
  if (!artifact_max.empty()) {
    absl::StatusOr<int64_t> n = ParseByteSize(artifact_max);
    if (!n.ok() || *n <= 0) {
      return UsageError(absl::StrCat("--artifact-max-bytes: ", n.ok() ? "must be positive" : n.status().message()));
    }
    options.artifacts.max_bytes = static_cast<uint64_t>(*n);
  }
  if (!isolation.empty()) {
    absl::StatusOr<runtime::ArtifactPolicy::Isolation> i = runtime::ArtifactPolicy::ParseIsolation(isolation);
    if (!i.ok()) return UsageError(std::string(i.status().message()));
    options.artifacts.isolation = *i;
  }
  if (!call_timeout.empty()) {
    double seconds = 0;
    // A whole day at most: longer is a typo, and absl's durations hold it.
    if (!absl::SimpleAtod(call_timeout, &seconds) || !(seconds > 0) || seconds > 86400) {
      return UsageError(absl::StrCat("--artifact-call-timeout must be a number of seconds above 0 and at most "
                                     "86400, not '", call_timeout, "'"));
    }
    options.artifacts.call_timeout = absl::Seconds(seconds);
  }
  if (const char* env = std::getenv("TENSORD_TEST_DEVICE"); env != nullptr && std::string(env) == "1") {
    options.test_device = true;
  }
  // Test-only (backends::TestDeviceFault): the test device's N-th kernel
  // launch fails as a GPU fault does, for the tests of what follows one.
  if (const char* env = std::getenv("TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH"); env != nullptr && *env != '\0') {
    int64_t n = 0;
    if (!absl::SimpleAtoi(env, &n) || n < 1) {
      return UsageError(absl::StrCat("TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH: '", env, "' is not a launch number (1, 2, ...)"));
    }
    if (!options.test_device) {
      return UsageError("TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH simulates a fault of the test device: give --test-device too");
    }
    options.test_device_fault_at_launch = n;
  }
  // The environment first, then the config file; the command line overrides both.
  if (const char* env = std::getenv("TENSORD_CUDA_SESSION_MEMORY_LIMIT"); env != nullptr && *env != '\0') {
    absl::StatusOr<int64_t> n = ParseByteSize(env);
    if (!n.ok()) return UsageError(absl::StrCat("TENSORD_CUDA_SESSION_MEMORY_LIMIT: ", n.status().message()));
    options.cuda_session_memory_limit_bytes = *n;
  }
  if (const char* env = std::getenv("TENSORD_CPU_CACHE_LIMIT"); env != nullptr && *env != '\0') {
    absl::StatusOr<int64_t> n = ParseByteSize(env);
    if (!n.ok()) return UsageError(absl::StrCat("TENSORD_CPU_CACHE_LIMIT: ", n.status().message()));
    options.cpu_cache_limit_bytes = *n;
  }
  // A debugging aid for kernel authors and the test suite (see
  // backends::CpuAllocatorOptions::uninitialized_fill): a byte value, 0..255.
  if (const char* env = std::getenv("TENSORD_UNINITIALIZED_FILL"); env != nullptr && *env != '\0') {
    int v = -1;
    if (!absl::SimpleAtoi(env, &v) || v < 0 || v > 255) {
      return UsageError(absl::StrCat("TENSORD_UNINITIALIZED_FILL: '", env, "' is not a byte value (0..255)"));
    }
    options.uninitialized_fill = v;
  }
  if (const char* env = std::getenv("TENSORD_STREAM_SPIN_US"); env != nullptr && *env != '\0') {
    absl::StatusOr<int64_t> us = wire::ParseStreamSpinMicros(env);
    if (!us.ok()) return UsageError(absl::StrCat("TENSORD_STREAM_SPIN_US: ", us.status().message()));
    options.stream_spin = absl::Microseconds(*us);
  }
  if (!config.empty()) {
    if (absl::Status s = ApplyConfigFile(config, &options); !s.ok()) {
      std::fprintf(stderr, "tensord: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (!listen.empty()) options.listen = listen;
  if (!memory_limit.empty()) {
    absl::StatusOr<int64_t> n = ParseByteSize(memory_limit);
    if (!n.ok()) return UsageError(absl::StrCat("--session-memory-limit: ", n.status().message()));
    options.session_memory_limit_bytes = *n;
  }
  if (!cuda_memory_limit.empty()) {
    absl::StatusOr<int64_t> n = ParseByteSize(cuda_memory_limit);
    if (!n.ok()) return UsageError(absl::StrCat("--cuda-session-memory-limit: ", n.status().message()));
    options.cuda_session_memory_limit_bytes = *n;
  }
  if (!cache_limit.empty()) {
    absl::StatusOr<int64_t> n = ParseByteSize(cache_limit);
    if (!n.ok()) return UsageError(absl::StrCat("--cpu-cache-limit: ", n.status().message()));
    options.cpu_cache_limit_bytes = *n;
  }
  if (!stream_spin.empty()) {
    absl::StatusOr<int64_t> us = wire::ParseStreamSpinMicros(stream_spin);
    if (!us.ok()) return UsageError(absl::StrCat("--stream-spin-us: ", us.status().message()));
    options.stream_spin = absl::Microseconds(*us);
  }
  if (!grpc_threads.empty()) {
    absl::StatusOr<int> n = ParseGrpcThreads(grpc_threads);
    if (!n.ok()) return UsageError(absl::StrCat("--grpc-threads: ", n.status().message()));
    options.grpc_threads = *n;
  }
  if (!per_peer.empty()) {
    absl::StatusOr<int> n = ParseMaxSessionsPerPeer(per_peer);
    if (!n.ok()) return UsageError(absl::StrCat("--max-sessions-per-peer: ", n.status().message()));
    options.max_sessions_per_peer = *n;
  }
  if (!log_level.empty()) {
    absl::StatusOr<LogLevel> lv = runtime::ParseLogLevel(log_level);
    if (!lv.ok()) return UsageError(absl::StrCat("--log-level: ", lv.status().message()));
    options.log_level = *lv;
  }
  if (options.listen.empty()) return UsageError("serve: give at least one --listen address (or listen = in --config)");
  if (!private_dir.empty()) {
    // Only a directory made for one daemon (mkdtemp's tensord-XXXXXX) is
    // ever removed: a typo must not delete anything else.
    std::error_code ec;
    const std::filesystem::path dir(private_dir);
    if (!absl::StartsWith(dir.filename().string(), "tensord-") || !std::filesystem::is_directory(dir, ec)) {
      return UsageError(absl::StrCat("--private-dir: '", private_dir, "' is not a directory named tensord-*"));
    }
  }
  runtime::SetLogLevel(options.log_level);

  // Signals: the handler only writes the signal number to a pipe (a
  // self-pipe; write(2) is async-signal-safe) and this thread does the
  // shutdown. A handler, unlike a blocked mask, works whichever thread the
  // kernel delivers to (OpenBLAS starts threads before main runs).
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::perror("tensord: pipe");
    return 1;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Every client takes a descriptor or two (its connections, shared-memory
  // segments): the soft open-file limit (often 1,024) goes up to the hard
  // one, as servers usually do.
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // Holds a reference on the gRPC library for the life of the process, so
  // that destroying the server does not run grpc_shutdown(), which can wait
  // up to 10 s for an executor thread's poll to time out.
  grpc_init();
  options.on_device_failure = OnDeviceFailure;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(options);
  if (!daemon.ok()) {
    // A value the daemon cannot use (a --listen address that does not
    // parse) is a usage error, as a bad flag is; failing to start (a port
    // in use) is not.
    if (absl::IsInvalidArgument(daemon.status())) return UsageError(std::string(daemon.status().message()));
    std::fprintf(stderr, "tensord: %s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  std::printf("tensord: listening on %s\n", absl::StrJoin((*daemon)->addresses(), ", ").c_str());
  std::fflush(stdout);

  const int sig = WaitForStopSignal();
  if (sig == kDeviceFailedByte) {
    // The device is unusable for this process: the sessions are ended with
    // the failure (the service's ShuttingDown says which device and why),
    // and the process exits for its supervisor to start a fresh one, within
    // a second whatever the shutdown still waits for.
    Log(LogLevel::kError, runtime::DeviceFailure().message(), "; ending every session and exiting with status ",
        kExitDeviceFailure, " for the daemon to be restarted");
    std::thread([private_dir] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      static const char kMsg[] = "tensord: a device failed; exiting without a clean shutdown\n";
      (void)!::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
      RemovePrivateDir(private_dir);
      ::_exit(kExitDeviceFailure);
    }).detach();
    (*daemon)->Shutdown();
    RemovePrivateDir(private_dir);
    // Not a return: destroying the backends would call into the failed
    // device's context (and CUDA's own teardown at exit may wait on it).
    std::fflush(nullptr);
    ::_exit(kExitDeviceFailure);
  }
  Log(LogLevel::kInfo, "received ", sig == SIGINT ? "SIGINT" : "SIGTERM", "; shutting down");
  // A second signal while shutting down ends the process at once (a device
  // failing meanwhile does not: the shutdown goes on, and the exit status
  // says it below).
  std::thread([private_dir] {
    while (WaitForStopSignal() == kDeviceFailedByte) {
    }
    static const char kMsg[] = "tensord: second signal; exiting without a clean shutdown\n";
    (void)!::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    RemovePrivateDir(private_dir);
    ::_exit(1);
  }).detach();
  (*daemon)->Shutdown();
  // An embedded daemon whose client was killed (it got SIGTERM through
  // PR_SET_PDEATHSIG) leaves nothing behind; a client that exits normally
  // removes the directory itself, whichever comes first.
  RemovePrivateDir(private_dir);
  if (g_device_failed.load()) {
    // A device failed while the daemon stopped: not a clean stop (and the
    // backends must not be destroyed on a lost context).
    Log(LogLevel::kError, "a device failed while shutting down; exiting with status ", kExitDeviceFailure);
    std::fflush(nullptr);
    ::_exit(kExitDeviceFailure);
  }
  return 0;
}

// `tensord check SCRIPT [ARGS...]`: execs the Python checker (see the top of
// this file). Returns only when exec fails.
int Check(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs("usage: tensord check SCRIPT [ARGS...]\n"
               "Runs SCRIPT with every tensor on the meta device (no daemon is started) and exits 0\n"
               "when it completes, or 1 with the first error: the op, the shapes and SCRIPT:LINE.\n",
               args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const char* env = std::getenv("TENSORD_PYTHON");
  const std::string python = env != nullptr && *env != '\0' ? env : "/usr/bin/python3";
  std::vector<std::string> argv_s = {python, "-m", "tensord._check"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(python.c_str(), argv.data());
  std::fprintf(stderr, "tensord check: cannot run %s: %s (set TENSORD_PYTHON to a Python 3 with tensord "
               "importable)\n", python.c_str(), std::strerror(errno));
  return 127;
}

constexpr char kDevicesUsage[] =
    "usage: tensord devices [--address ADDRESS] [--test-device]\n"
    "Lists the devices of the tensord daemon at ADDRESS (unix:PATH or HOST:PORT; default\n"
    "$TENSORD_ADDRESS), one line each: name, kind, total and free memory, compute capability\n"
    "and description; then its CUDA driver and runtime versions, or why it has no CUDA device.\n"
    "With neither, lists what `tensord serve` would serve on this machine (--test-device or\n"
    "$TENSORD_TEST_DEVICE=1: with the test device), without starting a daemon.\n"
    "Exit status 0, or 1 when the daemon cannot be reached or refuses this client.\n";

// The report of the daemon at `address`: the handshake, then a session opened
// and closed at once (a daemon tells only session holders what it runs on).
absl::Status DescribeRemoteDevices(const std::string& address, v1::OpenSessionResponse* out) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1::Tensord::Stub> stub = v1::Tensord::NewStub(channel);
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };
  const OpTable& table = OpTable::Get();
  const auto failed = [&](absl::string_view what, const grpc::Status& st) {
    return absl::UnavailableError(absl::StrCat(what, " (tensord daemon at ", address, "): ", st.error_message(),
                                               " (gRPC code ", static_cast<int>(st.error_code()), ")"));
  };
  {
    v1::HandshakeRequest req;
    req.set_protocol_version(wire::kProtocolVersion);
    req.set_client_version(std::string(DaemonVersion()));
    req.set_op_table_digest(table.digest());
    for (std::string& line : table.Describe()) req.add_op_table(std::move(line));
    v1::HandshakeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    if (grpc::Status st = stub->Handshake(&ctx, req, &resp); !st.ok()) {
      return failed("cannot connect: the handshake failed", st);
    }
    if (!resp.accepted()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the tensord daemon at ", address, " refused this client: ", resp.refusal()));
    }
  }
  v1::OpenSessionRequest req;
  req.set_client_name("tensord devices");
  req.set_op_table_digest(table.digest());
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline());
  if (grpc::Status st = stub->OpenSession(&ctx, req, out); !st.ok()) return failed("cannot open a session", st);
  v1::CloseSessionRequest close;
  close.set_session_id(out->session_id());
  close.set_token(out->token());
  v1::CloseSessionResponse closed;
  grpc::ClientContext close_ctx;
  close_ctx.set_deadline(deadline());
  (void)stub->CloseSession(&close_ctx, close, &closed);  // reaped after its attach timeout otherwise
  return absl::OkStatus();
}

// The lines `tensord devices` prints for a report (see kDevicesUsage).
std::string FormatDeviceReport(const v1::OpenSessionResponse& r) {
  struct Row {
    std::string cells[5];
    std::string description;
  };
  std::vector<Row> rows;
  for (const v1::DeviceInfo& d : r.devices()) {
    Row row;
    row.cells[0] = d.name();
    row.cells[1] = d.name().substr(0, d.name().find(':'));  // the kind: "cuda" of "cuda:1"
    row.cells[2] = absl::StrCat("total ", FormatBytes(static_cast<int64_t>(
                                              std::min<uint64_t>(d.total_memory_bytes(), INT64_MAX))));
    row.cells[3] = absl::StrCat("free ", FormatBytes(static_cast<int64_t>(
                                            std::min<uint64_t>(d.free_memory_bytes(), INT64_MAX))));
    row.cells[4] = d.capability_major() == 0 && d.capability_minor() == 0
                       ? "capability -"
                       : absl::StrCat("capability ", d.capability_major(), ".", d.capability_minor());
    row.description = d.description();
    rows.push_back(std::move(row));
  }
  size_t width[5] = {0, 0, 0, 0, 0};
  for (const Row& row : rows) {
    for (int c = 0; c < 5; ++c) width[c] = std::max(width[c], row.cells[c].size());
  }
  std::string out;
  for (const Row& row : rows) {
    for (int c = 0; c < 5; ++c) {
      absl::StrAppend(&out, row.cells[c], std::string(width[c] - row.cells[c].size() + 2, ' '));
    }
    absl::StrAppend(&out, row.description, "\n");
  }
  const std::string runtime =
      r.cuda_runtime_version().empty() ? "" : absl::StrCat("CUDA runtime ", r.cuda_runtime_version());
  if (r.cuda_unavailable_reason().empty()) {
    absl::StrAppend(&out, "CUDA driver ", r.cuda_driver_version().empty() ? "?" : r.cuda_driver_version(), ", ",
                    runtime.empty() ? "CUDA runtime ?" : runtime, "\n");
  } else {
    absl::StrAppend(&out, "no CUDA device: ", r.cuda_unavailable_reason(),
                    r.cuda_driver_version().empty() ? "" : absl::StrCat("; CUDA driver ", r.cuda_driver_version()),
                    runtime.empty() ? "" : absl::StrCat("; ", runtime), "\n");
  }
  return out;
}

// `tensord devices [--address ADDRESS] [--test-device]` (kDevicesUsage).
int Devices(const std::vector<std::string>& args) {
  std::string address;
  ServiceOptions local;
  if (const char* env = std::getenv("TENSORD_TEST_DEVICE"); env != nullptr && std::string(env) == "1") {
    local.test_device = true;
  }
  FlagParser p{args};
  while (p.i < args.size()) {
    if (args[p.i] == "--help" || args[p.i] == "-h") {
      std::fputs(kDevicesUsage, stdout);
      return 0;
    }
    if (args[p.i] == "--test-device") {
      local.test_device = true;
      ++p.i;
      continue;
    }
    if (p.MatchNonEmpty("--address", &address)) continue;
    if (!p.error.empty()) return UsageError(absl::StrCat("devices: ", p.error));
    return UsageError(absl::StrCat("devices: unknown argument '", args[p.i], "'"));
  }
  if (address.empty()) {
    if (const char* env = std::getenv("TENSORD_ADDRESS"); env != nullptr) address = env;
  }
  v1::OpenSessionResponse report;
  absl::Status st;
  std::string header;
  if (address.empty()) {
    // Quiet: the backends log nothing a report needs.
    runtime::SetLogLevel(LogLevel::kWarning);
    st = DescribeLocalDevices(local, &report);
    header = absl::StrCat("tensord ", DaemonVersion(), " on this machine (no daemon address: the devices "
                          "`tensord serve` would serve here)\n");
  } else {
    if (address.find(':') == std::string::npos) {
      return UsageError(absl::StrCat("devices: '", address, "' is not a daemon address (expected unix:PATH or "
                                     "HOST:PORT)"));
    }
    st = DescribeRemoteDevices(address, &report);
    header = absl::StrCat("tensord ", report.server_version(), " at ", address, "\n");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "tensord devices: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::fputs(header.c_str(), stdout);
  std::fputs(FormatDeviceReport(report).c_str(), stdout);
  return 0;
}

constexpr char kBuildKernelUsage[] =
    "usage: tensord build-kernel -o OUT.tdk [options] SOURCES...\n"
    "Compiles SOURCES (.c with g++ -x c -std=c11, .cc/.cpp/.cxx with g++ -std=c++17, .cu with nvcc)\n"
    "against the kernel ABI header <tensord_kernel.h>, links one shared object, reads its ops from\n"
    "tensord_library(), checks them as the daemon will and writes the artifact OUT.tdk.\n"
    "  -o, --output OUT.tdk   the artifact to write (replaced atomically)\n"
    "  --name NAME            the library's name, the namespace of every op (default: OUT's stem)\n"
    "  --cuda-arch 80,90      sm_XY machine code for each, and PTX for the last (default 80,90)\n"
    "  --cflags \"...\"         more g++ flags, split at whitespace (no shell quoting)\n"
    "  --cuda-cflags \"...\"    more nvcc flags, likewise\n"
    "  --ldflags \"...\"        more link flags, likewise (\"-L/opt/x/lib -lx\")\n"
    "  -I DIR                 an include directory (repeat for more)\n"
    "  --cache DIR            reuse DIR/<source hash>.tdk when the sources, headers, flags and\n"
    "                         compilers are unchanged, and store new builds there\n"
    "  --cxx PROGRAM          the C/C++ compiler and linker (default g++)\n"
    "  --nvcc PROGRAM         nvcc (default /usr/local/cuda/bin/nvcc, then PATH)\n"
    "  -v, --verbose          print each command as it runs\n"
    "  --check SCRIPT.py      before OUT is written, run `python3 SCRIPT.py ARTIFACT` on the built\n"
    "                         artifact (a temporary file; tensord.library.opcheck on samples, say);\n"
    "                         a non-zero exit fails the build and leaves OUT as it was. The\n"
    "                         interpreter is $TENSORD_PYTHON, else /usr/bin/python3\n"
    "  --check-timeout SECS   how long the check may run (default 600); past it, it is killed\n"
    "                         and the build fails\n"
    "Prints the artifact's path, ops and content hash. Exit status 0; 1 when the build or the\n"
    "check fails (the compiler's output or the check that failed on stderr); 2 for a usage error.\n";

constexpr char kInspectKernelUsage[] =
    "usage: tensord inspect-kernel FILE\n"
    "Checks the kernel artifact FILE (container, manifest, payload hash) and prints its manifest\n"
    "as JSON and its content hash. Exit status 0, or 1 with the error for a broken file.\n";

constexpr char kSignKernelUsage[] =
    "usage: tensord sign-kernel --key KEY.pem [--name NAME] FILE\n"
    "Adds to the kernel artifact FILE (in place) an Ed25519 signature of its content hash by the\n"
    "private key KEY.pem (`openssl genpkey -algorithm ed25519 -out KEY.pem`), named NAME (default\n"
    "KEY's stem). The content hash does not change. A daemon started with --artifact-key for the\n"
    "public key (`openssl pkey -in KEY.pem -pubout -out KEY.pub`) runs the artifact under\n"
    "--artifacts trusted. Exit status 0; 1 when the file or the key is refused; 2 for a usage error.\n";

std::vector<std::string> SplitFlags(const std::string& flags) {
  return absl::StrSplit(flags, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

// `tensord build-kernel` (kBuildKernelUsage).
// Runs `python SCRIPT ARTIFACT` (build-kernel --check) in a process group of
// its own and waits for it, at most `timeout_s` seconds (then the group is
// killed); OK when it exits 0.
absl::Status RunCheckScript(const std::string& script, const std::string& artifact, int64_t timeout_s) {
  const char* env_python = std::getenv("TENSORD_PYTHON");
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "/usr/bin/python3";
  std::vector<std::string> argv_s = {python, script, artifact};
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot start ", python, ": ", std::strerror(spawned)));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);  // the script and whatever it started (an embedded daemon)
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return absl::DeadlineExceededError(absl::StrCat(script, " ran past --check-timeout ", timeout_s, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      WIFEXITED(status) ? absl::StrCat(script, " exited with status ", WEXITSTATUS(status))
                        : absl::StrCat(script, " was ended by signal ", WTERMSIG(status)));
}

int BuildKernel(const std::vector<std::string>& args) {
  BuildOptions o;
  std::string archs, cflags, cuda_cflags, ldflags, dir, check, check_timeout = "600";
  FlagParser p{args};
  while (p.i < args.size()) {
    const std::string& a = args[p.i];
    if (a == "--help" || a == "-h") {
      std::fputs(kBuildKernelUsage, stdout);
      return 0;
    }
    if (a == "-v" || a == "--verbose") {
      o.verbose = true;
      ++p.i;
      continue;
    }
    if (absl::StartsWith(a, "-I") && a.size() > 2) {
      o.include_dirs.push_back(a.substr(2));
      ++p.i;
      continue;
    }
    if (p.MatchNonEmpty("-o", &o.output) || p.MatchNonEmpty("--output", &o.output) ||
        p.MatchNonEmpty("--name", &o.name) || p.MatchNonEmpty("--cuda-arch", &archs) ||
        p.Match("--cflags", &cflags) || p.Match("--cuda-cflags", &cuda_cflags) || p.Match("--ldflags", &ldflags) ||
        p.MatchNonEmpty("--cache", &o.cache_dir) || p.MatchNonEmpty("--cxx", &o.cxx) ||
        p.MatchNonEmpty("--nvcc", &o.nvcc) || p.MatchNonEmpty("--check", &check) ||
        p.MatchNonEmpty("--check-timeout", &check_timeout)) {
      continue;
    }
    if (p.MatchNonEmpty("-I", &dir)) {
      o.include_dirs.push_back(dir);
      continue;
    }
    if (!p.error.empty()) return UsageError(absl::StrCat("build-kernel: ", p.error));
    if (absl::StartsWith(a, "-")) return UsageError(absl::StrCat("build-kernel: unknown option '", a, "'"));
    o.sources.push_back(a);
    ++p.i;
  }
  if (o.output.empty()) return UsageError("build-kernel: no output (-o OUT.tdk)");
  if (o.sources.empty()) return UsageError("build-kernel: no sources");
  int64_t check_timeout_s = 0;
  if (!absl::SimpleAtoi(check_timeout, &check_timeout_s) || check_timeout_s <= 0 || check_timeout_s > 86400) {
    return UsageError(absl::StrCat("build-kernel: --check-timeout takes seconds from 1 to 86400, got '",
                                   check_timeout, "'"));
  }
  if (o.name.empty()) o.name = std::filesystem::path(o.output).stem().string();
  if (!archs.empty()) o.cuda_archs = absl::StrSplit(archs, ',', absl::SkipWhitespace());
  o.extra_cflags = SplitFlags(cflags);
  o.extra_cuda_cflags = SplitFlags(cuda_cflags);
  o.extra_ldflags = SplitFlags(ldflags);
  // With a check, the build goes to a file beside OUT, which becomes OUT
  // only when the check passes.
  const std::string output = o.output;
  if (!check.empty()) o.output = absl::StrCat(output, ".checking-", getpid(), ".tdk");
  absl::StatusOr<BuildResult> r = BuildArtifact(o);
  if (!r.ok()) {
    std::fprintf(stderr, "tensord %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  if (!check.empty()) {
    std::fflush(stdout);
    absl::Status s = RunCheckScript(check, o.output, check_timeout_s);
    std::error_code ec;
    if (!s.ok()) {
      std::filesystem::remove(o.output, ec);
      std::fprintf(stderr, "tensord build-kernel: the check failed (%s); %s was not written\n",
                   std::string(s.message()).c_str(), output.c_str());
      return 1;
    }
    std::filesystem::rename(o.output, output, ec);
    if (ec) {
      std::fprintf(stderr, "tensord build-kernel: cannot write %s: %s\n", output.c_str(), ec.message().c_str());
      return 1;
    }
    o.output = output;
  }
  std::vector<std::string> ops;
  for (const ArtifactOp& op : r->manifest.ops) ops.push_back(op.schema);
  std::printf("tensord: wrote %s%s\n  library %s, %zu op(s):\n    %s\n  content hash %s\n", o.output.c_str(),
              r->from_cache ? " (from the cache)" : "", r->manifest.library.c_str(), ops.size(),
              absl::StrJoin(ops, "\n    ").c_str(), r->content_hash.c_str());
  return 0;
}

// `tensord inspect-kernel FILE` (kInspectKernelUsage).
int InspectKernel(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kInspectKernelUsage, stdout);
    return 0;
  }
  if (args.size() != 1) return UsageError("inspect-kernel: expected one FILE");
  std::ifstream f(args[0], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "tensord inspect-kernel: cannot read %s: %s\n", args[0].c_str(), std::strerror(errno));
    return 1;
  }
  std::stringstream bytes;
  bytes << f.rdbuf();
  absl::StatusOr<Artifact> a = ParseArtifact(bytes.str());
  if (!a.ok()) {
    std::fprintf(stderr, "tensord inspect-kernel: %s: %s\n", args[0].c_str(),
                 std::string(a.status().message()).c_str());
    return 1;
  }
  std::printf("%s\ncontent hash: %s\n", ManifestToJson(a->manifest, 2).c_str(), a->content_hash.c_str());
  return 0;
}

// `tensord sign-kernel --key KEY.pem [--name NAME] FILE` (kSignKernelUsage).
int SignKernel(const std::vector<std::string>& args) {
  std::string key, name, file;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(kSignKernelUsage, stdout);
      return 0;
    }
    if ((args[i] == "--key" || args[i] == "--name") && i + 1 < args.size()) {
      (args[i] == "--key" ? key : name) = args[i + 1];
      ++i;
    } else if (!args[i].empty() && args[i][0] == '-') {
      return UsageError(absl::StrCat("sign-kernel: unknown option '", args[i], "'"));
    } else if (file.empty()) {
      file = args[i];
    } else {
      return UsageError("sign-kernel: expected one FILE");
    }
  }
  if (key.empty() || file.empty()) return UsageError("sign-kernel: give --key KEY.pem and FILE");
  if (name.empty()) name = std::filesystem::path(key).stem().string();
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tensord sign-kernel: cannot read %s: %s\n", file.c_str(), std::strerror(errno));
    return 1;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<std::string> signed_file = SignArtifact(bytes.str(), key, name);
  if (!signed_file.ok()) {
    std::fprintf(stderr, "tensord sign-kernel: %s: %s\n", file.c_str(),
                 std::string(signed_file.status().message()).c_str());
    return 1;
  }
  const std::string tmp = file + ".signing";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << *signed_file;
    if (!out) {
      std::fprintf(stderr, "tensord sign-kernel: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    std::fprintf(stderr, "tensord sign-kernel: cannot replace %s: %s\n", file.c_str(), std::strerror(errno));
    return 1;
  }
  std::printf("signed %s with %s (content hash %s)\n", file.c_str(), name.c_str(),
              ContentHash(*signed_file)->c_str());
  return 0;
}

// Streamed uploads arrive in messages of a few MiB, each parsed into a
// string that is freed once its chunk is copied into the storage. With
// glibc's defaults such a string is mapped fresh (or the heap top trimmed
// back) for every message: a page fault and a zeroed page per 4 KiB, a
// quarter of the daemon's CPU per upload. Keeping allocations below 32 MiB
// on the heap, and up to 64 MiB of free heap top per arena, lets the next
// chunk reuse warm memory. The daemon still shrinks: the block cache and
// malloc_trim run when the last session closes.
//
// glibc also gives each new thread that meets a locked arena an arena of its
// own, up to 8 per core: with a thread per stream, 16 clients left a dozen
// arenas each holding a few hundred KiB that malloc_trim cannot return
// (live blocks scattered among them), 3 MiB in all. And malloc_trim gives
// back only the main arena's free top: another arena keeps up to the trim
// threshold (64 MiB) at its top until a large free there. With one arena per
// core, 8 clients uploading tensors of up to 3 MiB over the TCP stream left
// the daemon's anonymous memory 4-27 MB above its start once they had gone
// (2 cores, 4 runs); with one arena 3.2-3.5 MB, with no change in figures 2
// and 7 beyond their noise (tcache serves the hot path's small allocations
// without the arena's lock).
// What the environment sets (MALLOC_ARENA_MAX and the like, or the same
// tunable in GLIBC_TUNABLES) still decides. A variable counts when it holds
// a number of at least `least`: glibc ignores anything else.
bool EnvironmentSets(const char* variable, absl::string_view tunable, int64_t least) {
  const char* v = std::getenv(variable);
  const char* t = std::getenv("GLIBC_TUNABLES");
  int64_t n = 0;
  return (v != nullptr && absl::SimpleAtoi(v, &n) && n >= least) || (t != nullptr && absl::StrContains(t, tunable));
}

void KeepChunkSizedAllocationsWarm() {
  if (!EnvironmentSets("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold=", 0)) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
  }
  if (!EnvironmentSets("MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold=", 0)) {
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
  }
  if (!EnvironmentSets("MALLOC_ARENA_MAX", "glibc.malloc.arena_max=", 1)) {
    mallopt(M_ARENA_MAX, 1);
  }
}

// OpenBLAS's pthreads build keeps its worker threads polling (sched_yield)
// for 2^28 cycles, about 0.1 s, after every GEMM it splits across them (a
// 128x64x128 float32 matmul is split already). A daemon that runs one such
// GEMM every few milliseconds then has a worker polling all the time,
// taking a core from the session threads and from a client on the same
// host: on a small machine a training step slows down visibly
// (bench/RESULTS.md, figure 6). OPENBLAS_THREAD_TIMEOUT sets that time
// (2^N cycles, N from 4 to 30) but is read when the library loads, before
// main; so `serve` sets it and executes itself again, once, unless the
// environment sets it already (or GOTO_THREAD_TIMEOUT, its older name).
// 2^16 cycles (about 25 us) keeps a worker awake between the GEMMs of one
// op. The binary is executed by its own path (what /proc/self/exe names),
// so that the process keeps its name (ps, pgrep, systemd); not when it was
// started through the dynamic loader (`ld.so tensord serve`: there
// /proc/self/exe is the loader), and when it cannot be, the daemon serves
// as it is, with a warning.
constexpr char kBlasThreadTimeout[] = "16";

void ReexecWithBlasThreadTimeout(char** argv) {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr || std::getenv("GOTO_THREAD_TIMEOUT") != nullptr) return;
  if (::getauxval(AT_BASE) == 0) return;  // no program interpreter: run as `ld.so tensord ...` (or static)
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) self = "/proc/self/exe";
  if (::setenv("OPENBLAS_THREAD_TIMEOUT", kBlasThreadTimeout, 1) != 0) return;
  ::execv(self.c_str(), argv);
  const int err = errno;
  ::unsetenv("OPENBLAS_THREAD_TIMEOUT");
  std::fprintf(stderr, "tensord: warning: cannot execute %s again with OPENBLAS_THREAD_TIMEOUT=%s (%s); "
               "OpenBLAS's idle threads will poll for 0.1 s after each large matmul\n",
               self.c_str(), kBlasThreadTimeout, std::strerror(err));
}

}  // namespace
}  // namespace tensord::server

int main(int argc, char** argv) {
  using namespace tensord::server;
  // abseil's lock-order (deadlock) detection records every Mutex acquisition
  // in a global graph, a cost on every streamed op; the C++ test binaries
  // keep it on and catch lock-order bugs there.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return UsageError("no command given", /*with_usage=*/true);
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "--version" || cmd == "version") {
    std::printf("tensord %s\n", std::string(DaemonVersion()).c_str());
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "serve") {
    ReexecWithBlasThreadTimeout(argv);
    KeepChunkSizedAllocationsWarm();
    return Serve(args);
  }
  // Hidden: the worker process of --artifact-isolation process, started by
  // the daemon itself (tensord/runtime/artifact_worker.h).
  if (cmd == "artifact-worker") {
    int fd = -1;
    if (args.size() != 1 || !absl::SimpleAtoi(args[0], &fd) || fd < 3) {
      return UsageError("artifact-worker is started by the daemon, with its socket's descriptor");
    }
    return tensord::runtime::ArtifactWorkerMain(fd);
  }
  if (cmd == "check") return Check(args);
  if (cmd == "devices") return Devices(args);
  if (cmd == "build-kernel") return BuildKernel(args);
  if (cmd == "inspect-kernel") return InspectKernel(args);
  if (cmd == "sign-kernel") return SignKernel(args);
  return UsageError(absl::StrCat("unknown command '", cmd, "'"));
}
