// The embedded daemon: fork/exec of `tensord serve` on a private Unix socket.
#include "embedded_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tensord/meta/errors.h"

#ifndef TENSORD_BUILD_BIN_DIR
#define TENSORD_BUILD_BIN_DIR ""
#endif

namespace tensord::client::internal {

struct ChildState {
  absl::Mutex mu;
  bool forked ABSL_GUARDED_BY(mu) = false;
  pid_t pid ABSL_GUARDED_BY(mu) = 0;
  int fork_errno ABSL_GUARDED_BY(mu) = 0;
  bool exited ABSL_GUARDED_BY(mu) = false;
  int status ABSL_GUARDED_BY(mu) = 0;
};

namespace {

bool IsExecutable(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

void RemoveDir(const std::string& dir) {
  if (dir.empty()) return;
  for (const char* name : {"sock", "stdout.log", "stderr.log"}) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

// Waits up to `ms` for the reaper to see the child exit; true when it did.
bool WaitForExit(ChildState& c, int ms) {
  absl::MutexLock l(&c.mu);
  return c.mu.AwaitWithTimeout(absl::Condition(&c.exited), absl::Milliseconds(ms));
}

}  // namespace

absl::StatusOr<std::string> FindDaemonBinary(const std::string& explicit_path) {
  std::vector<std::string> tried;
  if (!explicit_path.empty()) {
    if (IsExecutable(explicit_path)) return explicit_path;
    tried.push_back(explicit_path);
  }
  if (const char* env = std::getenv("TENSORD_BIN"); env != nullptr && *env != '\0') {
    if (IsExecutable(env)) return std::string(env);
    tried.push_back(absl::StrCat("$TENSORD_BIN=", env));
  }
  if (std::string build = TENSORD_BUILD_BIN_DIR; !build.empty()) {
    build += "/tensord";
    if (IsExecutable(build)) return build;
    tried.push_back(build);
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      std::string candidate = absl::StrCat(dir, "/tensord");
      if (IsExecutable(candidate)) return candidate;
    }
    tried.push_back("tensord on PATH");
  }
  return RuntimeErr(absl::StrCat("cannot find the tensord daemon binary to spawn an embedded daemon (tried ",
                                 absl::StrJoin(tried, ", "),
                                 "); set TENSORD_BIN, put tensord on PATH, or set TENSORD_ADDRESS to a running daemon"));
}

namespace {

// The process's running embedded daemons by address, for EmbeddedDaemonEndNote.
struct Running {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::pair<pid_t, std::weak_ptr<ChildState>>> by_address ABSL_GUARDED_BY(mu);
};
Running& RunningDaemons() {
  static Running* r = new Running();
  return *r;
}

}  // namespace

std::string EmbeddedDaemonEndNote(const std::string& address) {
  pid_t pid = 0;
  std::shared_ptr<ChildState> child;
  {
    Running& r = RunningDaemons();
    absl::MutexLock l(&r.mu);
    auto it = r.by_address.find(address);
    if (it == r.by_address.end()) return "";
    pid = it->second.first;
    child = it->second.second.lock();
  }
  if (child == nullptr || !WaitForExit(*child, 500)) return "";
  int status = 0;
  {
    absl::MutexLock l(&child->mu);
    status = child->status;
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("the embedded daemon (pid ", pid, ") was ended by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("the embedded daemon (pid ", pid, ") exited with status ", WEXITSTATUS(status));
}

absl::StatusOr<EmbeddedDaemon> StartEmbeddedDaemon(const std::string& binary, int timeout_ms) {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0' && std::strlen(t) < 64) base = t;
  std::string templ = base + "/tensord-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return RuntimeErr(absl::StrCat("cannot create a private directory for the embedded daemon under ", base, ": ",
                                   std::strerror(errno)));
  }
  EmbeddedDaemon d;
  d.dir = buf.data();
  const std::string sock = d.dir + "/sock";
  const std::string listen = "unix:" + sock;
  const std::string out_path = d.dir + "/stdout.log";
  const std::string err_path = d.dir + "/stderr.log";

  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    RemoveDir(d.dir);
    return RuntimeErr(absl::StrCat("cannot create the embedded daemon's log files in ", d.dir));
  }
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  // Its one user's own code: the artifacts they load run as they would in
  // their own process.
  std::vector<std::string> args = {binary, "serve", "--listen", listen, "--private-dir", d.dir, "--artifacts", "any"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A reaper thread forks the child and waits for it for the child's whole
  // life. The child stops when that thread (hence the process) goes away.
  auto child = std::make_shared<ChildState>();
  std::thread([child, argv, out_fd, err_fd]() mutable {
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(err_fd, STDERR_FILENO);
      const int in = ::open("/dev/null", O_RDONLY);
      if (in >= 0) ::dup2(in, STDIN_FILENO);
      ::execv(argv[0], argv.data());
      const char msg[] = "tensord: exec of the daemon binary failed\n";
      ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
      (void)ignored;
      ::_exit(127);
    }
    const int fork_errno = pid < 0 ? errno : 0;
    {
      absl::MutexLock l(&child->mu);
      child->forked = true;
      child->pid = pid;
      child->fork_errno = fork_errno;
    }
    if (pid < 0) return;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    absl::MutexLock l(&child->mu);
    child->exited = true;
    child->status = status;
  }).detach();
  pid_t pid = 0;
  int fork_errno = 0;
  {
    absl::MutexLock l(&child->mu);
    child->mu.Await(absl::Condition(&child->forked));
    pid = child->pid;
    fork_errno = child->fork_errno;
  }
  ::close(out_fd);
  ::close(err_fd);
  if (pid < 0) {
    RemoveDir(d.dir);
    return RuntimeErr(absl::StrCat("fork failed while spawning the embedded daemon: ", std::strerror(fork_errno)));
  }
  d.pid = pid;
  d.child = child;

  const std::string kReady = "tensord: listening on ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const std::string out = ReadFile(out_path);
    const size_t at = out.find(kReady);
    if (at != std::string::npos) {
      const size_t eol = out.find('\n', at);
      if (eol != std::string::npos) {
        std::string addr = out.substr(at + kReady.size(), eol - at - kReady.size());
        const size_t sp = addr.find_first_of(" \t\r");
        if (sp != std::string::npos) addr.resize(sp);
        d.address = addr.empty() ? listen : addr;
        {
          Running& r = RunningDaemons();
          absl::MutexLock l(&r.mu);
          r.by_address[d.address] = {d.pid, d.child};
        }
        return d;
      }
    }
    bool exited = false;
    int status = 0;
    {
      absl::MutexLock l(&child->mu);
      exited = child->exited;
      status = child->status;
    }
    if (exited) {
      const std::string err = Tail(ReadFile(err_path), 2000);
      d.pid = 0;
      RemoveDir(d.dir);
      std::string how = WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                                          : absl::StrCat("was killed by signal ", WTERMSIG(status));
      return RuntimeErr(absl::StrCat("the embedded tensord daemon (", binary, ") ", how,
                                     " before it was ready; its stderr: ", err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string err = Tail(ReadFile(err_path), 2000);
      StopEmbeddedDaemon(d);
      return RuntimeErr(absl::StrCat("the embedded tensord daemon (", binary, ") did not print its ready line ('",
                                     kReady, "...') within ", timeout_ms, " ms; its stderr: ", err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void StopEmbeddedDaemon(EmbeddedDaemon& d) {
  {
    Running& r = RunningDaemons();
    absl::MutexLock l(&r.mu);
    r.by_address.erase(d.address);
  }
  if (d.pid > 0 && d.child != nullptr) {
    // The pid stays ours until the reaper has waited for it.
    ::kill(d.pid, SIGTERM);
    if (!WaitForExit(*d.child, 5000)) {
      ::kill(d.pid, SIGKILL);
      WaitForExit(*d.child, 5000);
    }
  }
  d.pid = 0;
  d.child.reset();
  RemoveDir(d.dir);
  d.dir.clear();
}

}  // namespace tensord::client::internal
