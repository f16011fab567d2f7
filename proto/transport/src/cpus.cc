// Usable cores: online, affinity, cgroup CPU quota (see tensord/transport/cpus.h).
#include "tensord/transport/cpus.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tensord::wire {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A cgroup file system: where the process's cgroup directory is, and which
// files say its quota.
struct Hierarchy {
  bool v2 = false;
  std::string mount_root;   // the cgroup path the mount shows at its mount point
  std::string mount_point;  // where it is mounted
};

// Quota / period in `dir`, or 0 when none (or unreadable).
double QuotaIn(const std::string& dir, bool v2) {
  if (v2) {
    // "max 100000" or "150000 100000".
    std::vector<absl::string_view> f = absl::StrSplit(absl::StripAsciiWhitespace(ReadFile(dir + "/cpu.max")), ' ',
                                                      absl::SkipEmpty());
    double quota = 0, period = 0;
    if (f.size() != 2 || !absl::SimpleAtod(f[0], &quota) || !absl::SimpleAtod(f[1], &period)) return 0;
    return quota > 0 && period > 0 ? quota / period : 0;
  }
  double quota = 0, period = 0;  // cpu.cfs_quota_us is -1 without a quota
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(ReadFile(dir + "/cpu.cfs_quota_us")), &quota) ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(ReadFile(dir + "/cpu.cfs_period_us")), &period)) {
    return 0;
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// The smallest quota from `path` (the process's cgroup) up to the root of
// hierarchy `h`, 0 when none.
double QuotaAlong(const Hierarchy& h, absl::string_view path, const std::string& root) {
  // The cgroup's directory: its path below the mount's root, under the mount
  // point (in a container the mount's root is often the container's cgroup).
  absl::string_view rel = path;
  if (h.mount_root != "/") {
    if (!absl::ConsumePrefix(&rel, h.mount_root)) return 0;  // not below this mount
    if (!rel.empty() && rel[0] != '/') return 0;
  }
  std::string dir_rel(absl::StripSuffix(rel, "/"));
  double best = 0;
  for (;;) {
    const double q = QuotaIn(root + h.mount_point + dir_rel, h.v2);
    if (q > 0 && (best == 0 || q < best)) best = q;
    if (dir_rel.empty()) break;
    dir_rel.resize(dir_rel.rfind('/'));
  }
  return best;
}

}  // namespace

double CgroupCpuQuotaCores(absl::string_view proc_self_cgroup, absl::string_view proc_self_mountinfo,
                           const std::string& root) {
  // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS".
  std::vector<Hierarchy> v2_mounts, v1_cpu_mounts;
  for (absl::string_view line : absl::StrSplit(proc_self_mountinfo, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    const absl::string_view fstype = dash[1], super_options = dash[3];
    Hierarchy h{fstype == "cgroup2", std::string(f[3]), std::string(f[4])};
    if (h.v2) {
      v2_mounts.push_back(h);
    } else if (fstype == "cgroup") {
      for (absl::string_view o : absl::StrSplit(super_options, ',')) {
        if (o == "cpu") v1_cpu_mounts.push_back(h);
      }
    }
  }
  // /proc/self/cgroup: "0::PATH" (v2), "N:CONTROLLERS:PATH" (v1).
  double best = 0;
  auto take = [&best](double q) {
    if (q > 0 && (best == 0 || q < best)) best = q;
  };
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2][0] != '/') continue;
    if (f[0] == "0" && f[1].empty()) {
      for (const Hierarchy& h : v2_mounts) take(QuotaAlong(h, f[2], root));
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c != "cpu") continue;
      for (const Hierarchy& h : v1_cpu_mounts) take(QuotaAlong(h, f[2], root));
    }
  }
  return best;
}

int IdleCores(absl::string_view loadavg, int usable_cores) {
  // "0.52 0.58 0.59 2/103 32182": the fourth field is RUNNING/TOTAL.
  std::vector<absl::string_view> f = absl::StrSplit(loadavg, ' ', absl::SkipWhitespace());
  if (f.size() < 4) return 0;
  const size_t slash = f[3].find('/');
  int running = 0;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(f[3].substr(0, slash), &running) || running < 0) return 0;
  return std::max(0, usable_cores - running);
}

int IdleCoresNow() {
  // Read with plain read(2): this is on the path of every large copy.
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t r = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (r <= 0) return 0;
  return IdleCores(absl::string_view(buf, static_cast<size_t>(r)), UsableCores());
}

int UsableCores() {
  static const int cores = [] {
    long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t allowed;
    if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) n = std::min<long>(n, CPU_COUNT(&allowed));
    const double quota = CgroupCpuQuotaCores(ReadFile("/proc/self/cgroup"), ReadFile("/proc/self/mountinfo"), "");
    if (quota > 0) n = std::min<long>(n, std::max<long>(1, static_cast<long>(std::floor(quota))));
    return static_cast<int>(std::max<long>(1, n));
  }();
  return cores;
}

}  // namespace tensord::wire
