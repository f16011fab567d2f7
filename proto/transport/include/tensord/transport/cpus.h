// tensord/transport/cpus.h — how many cores this process can keep busy: the
// online cores, fewer when it is pinned (sched_getaffinity: taskset, a
// cpuset), and fewer again under a CPU quota (a cgroup's cpu.max in cgroup v2,
// cpu.cfs_quota_us / cpu.cfs_period_us in v1: `docker --cpus`, systemd's
// CPUQuota=). The polling receivers of the same-host stream
// (socket_stream.h) and the parallel copies of large transfers
// (tensord/wire/copy.h) size themselves by it.
#ifndef TENSORD_TRANSPORT_CPUS_H_
#define TENSORD_TRANSPORT_CPUS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tensord::wire {

// The cores this process can keep busy, at least 1: min(online cores, cores
// in its affinity mask, its cgroup CPU quota rounded down (at least 1)).
// Read once per process, at the first call.
int UsableCores();

// Cores with nothing to run right now: UsableCores() minus the threads the
// kernel counts as running or waiting to run, machine-wide (the fourth field
// of /proc/loadavg, "RUNNING/TOTAL", which counts the caller too); 0 when
// /proc/loadavg cannot be read. For work split across threads that only
// pays off on idle cores: a helper that has to share a core gets preempted,
// and whoever waits for it waits a scheduler slice (milliseconds).
int IdleCoresNow();

// The same from `loadavg` (the text of /proc/loadavg) and `usable_cores`.
int IdleCores(absl::string_view loadavg, int usable_cores);

// The CPU quota, in cores (quota / period, the smallest along the path from
// the process's cgroup up to its hierarchy's root), of the cgroup named by
// `proc_self_cgroup` (the text of /proc/self/cgroup), looking for the cgroup
// file systems in `proc_self_mountinfo` (the text of /proc/self/mountinfo)
// and reading their files under `root` ("" for this machine's; a test's
// directory otherwise). 0 when there is no quota, or nothing can be read or
// parsed (never an error: a process without cgroups runs unlimited).
double CgroupCpuQuotaCores(absl::string_view proc_self_cgroup, absl::string_view proc_self_mountinfo,
                           const std::string& root);

}  // namespace tensord::wire

#endif  // TENSORD_TRANSPORT_CPUS_H_
