// bench/bench_util.h — what the C++ benchmarks (wire_bench, cuda_bench)
// share: dying with a message, timing and medians, CPU time of this and
// another process, a child process started with its ready line read from
// its stdout (the daemon, a peer server), and their rows written as the
// JSON that bench/run.py reads (figure, name, unit, ours, peer, peer_name,
// ratio, target, transport, repeats and extra facts).
#ifndef TENSORD_BENCH_BENCH_UTIL_H_
#define TENSORD_BENCH_BENCH_UTIL_H_

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace tensord::bench {

using Clock = std::chrono::steady_clock;

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  std::exit(1);
}

template <typename T>
inline T Check(absl::StatusOr<T> s, const char* what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.status().ToString()));
  return *std::move(s);
}

inline void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

inline double Seconds(Clock::time_point t0, Clock::time_point t1) { return std::chrono::duration<double>(t1 - t0).count(); }

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Keeps the compiler from treating a buffer's contents as dead.
inline void Clobber(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// CPU seconds (user + system) used so far by this process, all threads.
inline double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// CPU seconds used so far by process `pid`, all threads: the sum of
// /proc/PID/task/*/schedstat (nanoseconds on the CPU), else /proc/PID/stat
// fields 14 and 15 (user + system, in clock ticks, 10 ms here: too coarse for
// a few hundred round trips); 0 when unreadable.
inline double ProcCpuSeconds(pid_t pid) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  if (DIR* d = opendir(task_dir.c_str()); d != nullptr) {
    double ns = 0;
    bool any = false;
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      FILE* f = std::fopen(absl::StrCat(task_dir, "/", e->d_name, "/schedstat").c_str(), "r");
      if (f == nullptr) continue;  // the thread ended meanwhile
      unsigned long long on_cpu = 0;
      if (std::fscanf(f, "%llu", &on_cpu) == 1) {
        ns += static_cast<double>(on_cpu);
        any = true;
      }
      std::fclose(f);
    }
    closedir(d);
    if (any) return ns * 1e-9;
  }
  FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return 0.0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0.0;
  std::vector<std::string> fields = absl::StrSplit(p + 2, ' ');  // fields[0] is field 3, the state
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) || !absl::SimpleAtod(fields[12], &stime)) return 0.0;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Voluntary context switches (a thread blocked and later woke) so far of
// process `pid`, all threads alive now (/proc/PID/task/*/status); 0 when
// unreadable.
inline double ProcSwitches(pid_t pid) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(task_dir.c_str());
  if (d == nullptr) return 0.0;
  double n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    FILE* f = std::fopen(absl::StrCat(task_dir, "/", e->d_name, "/status").c_str(), "r");
    if (f == nullptr) continue;
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned long long v = 0;
      if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) n += static_cast<double>(v);
    }
    std::fclose(f);
  }
  closedir(d);
  return n;
}

// CPU seconds and voluntary context switches of this process and of a
// server process, sampled together.
struct CpuMark {
  double client, server, client_switches, server_switches;
  static CpuMark Now(pid_t server) {
    return {SelfCpuSeconds(), ProcCpuSeconds(server), ProcSwitches(getpid()), ProcSwitches(server)};
  }
};

// A child process whose stdout is a pipe we read its ready line from. The
// destructor stops it (SIGTERM, then SIGKILL after 10 s) and reaps it.
class Child {
 public:
  // Starts argv[0] with `argv`; stderr goes to `stderr_path`, stdin is a pipe
  // the child may watch for EOF (our exit).
  Child(const std::vector<std::string>& argv, const std::string& stderr_path) {
    int out[2], in[2];
    if (pipe(out) != 0 || pipe(in) != 0) Die("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    close(in[0]);
    out_ = out[0];
    in_ = in[1];
    fcntl(out_, F_SETFD, FD_CLOEXEC);
    fcntl(in_, F_SETFD, FD_CLOEXEC);
    if (rc != 0) {
      pid_ = 0;
      Die(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
    }
  }
  ~Child() { Stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The first line on the child's stdout that starts with `prefix`, without
  // the prefix; "" when the child exits or `timeout_ms` passes first.
  std::string WaitForLine(const std::string& prefix, int timeout_ms) {
    std::string buf;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char c[256];
      const ssize_t n = read(out_, c, sizeof c);
      if (n <= 0) return "";
      buf.append(c, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      }
    }
    return "";
  }

  pid_t pid() const { return pid_; }

  void Stop() {
    if (pid_ <= 0) return;
    if (in_ >= 0) close(in_);
    in_ = -1;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        break;
      }
      usleep(10000);
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
    if (out_ >= 0) close(out_);
    out_ = -1;
  }

 private:
  pid_t pid_ = 0;
  int out_ = -1;
  int in_ = -1;
};

// "unix:/a, 127.0.0.1:123" -> {unix address, tcp address}; text after a
// ';' is left out.
inline std::pair<std::string, std::string> SplitAddresses(const std::string& line) {
  std::string unix_addr, tcp_addr;
  for (absl::string_view a : absl::StrSplit(line.substr(0, line.find(';')), ',', absl::SkipWhitespace())) {
    std::string s(absl::StripAsciiWhitespace(a));
    if (s.rfind("unix:", 0) == 0) {
      unix_addr = s;
    } else {
      tcp_addr = s;
    }
  }
  return {unix_addr, tcp_addr};
}


struct Row {
  int figure;
  std::string name, unit;
  double ours, peer;
  std::string peer_name, target, transport;
  int repeats;
  // Further facts for the JSON row (CPU time per iteration or CPU share).
  std::vector<std::pair<std::string, double>> extra = {};
};

inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

inline std::string JsonNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline void WriteJson(const std::string& path, const std::vector<Row>& rows) {
  std::string out = "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    absl::StrAppend(&out, " {\"figure\": ", r.figure, ", \"name\": ", JsonString(r.name),
                    ", \"unit\": ", JsonString(r.unit), ", \"ours\": ", JsonNumber(r.ours),
                    ", \"peer\": ", JsonNumber(r.peer), ", \"peer_name\": ", JsonString(r.peer_name),
                    ", \"ratio\": ", r.peer > 0 ? JsonNumber(r.ours / r.peer) : "null",
                    ", \"target\": ", JsonString(r.target), ", \"transport\": ", JsonString(r.transport),
                    ", \"repeats\": ", r.repeats);
    for (const auto& [k, v] : r.extra) absl::StrAppend(&out, ", ", JsonString(k), ": ", JsonNumber(v));
    absl::StrAppend(&out, "}", i + 1 < rows.size() ? ",\n" : "\n");
  }
  out += "]\n";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) Die(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
}


// The rows as a table on stdout: figure, name, ours, peer, unit, ratio,
// target, the peer's name and the extra facts.
inline void PrintTable(const std::vector<Row>& rows) {
  std::printf("%-3s %-48s %12s %12s %-6s %8s  %-8s %s\n", "fig", "name", "tensord", "peer", "unit", "ratio", "target",
              "peer");
  for (const Row& r : rows) {
    std::string extra;
    for (const auto& [k, v] : r.extra) absl::StrAppend(&extra, extra.empty() ? "  " : ", ", k, " ", absl::StrFormat("%.2f", v));
    std::printf("%-3d %-48s %12.2f %12.2f %-6s %8.3f  %-8s %s%s\n", r.figure, r.name.c_str(), r.ours, r.peer,
                r.unit.c_str(), r.ours / r.peer, r.target.c_str(), r.peer_name.c_str(), extra.c_str());
  }
}

// The directory of this program (/proc/self/exe), or "." when unreadable.
inline std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}


// The figures of `--only LIST` ("2,3"), each one of `allowed`; nullopt after
// saying on stderr which item is not.
inline std::optional<std::set<int>> ParseFigures(absl::string_view list, const std::set<int>& allowed) {
  std::set<int> out;
  for (absl::string_view f : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    int v = 0;
    if (!absl::SimpleAtoi(f, &v) || allowed.count(v) == 0) {
      std::fprintf(stderr, "%s: --only takes figures %s, not '%s'\n", program_invocation_short_name,
                   absl::StrJoin(allowed, ", ").c_str(), std::string(f).c_str());
      return std::nullopt;
    }
    out.insert(v);
  }
  return out;
}

// The daemon binary a benchmark starts: `flag` (--tensord) when given, else
// $TENSORD_BIN, else `tensord` beside this program; dies when it is not an
// executable.
inline std::string DaemonBinary(std::string flag) {
  if (flag.empty()) {
    const char* env = std::getenv("TENSORD_BIN");
    flag = (env != nullptr && *env != '\0') ? env : SelfDir() + "/tensord";
  }
  if (access(flag.c_str(), X_OK) != 0) Die(absl::StrCat("no tensord binary at ", flag));
  return flag;
}

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_BENCH_UTIL_H_
