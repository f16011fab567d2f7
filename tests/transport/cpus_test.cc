// transport/cpus: the cgroup CPU quota read from fake /proc and /sys trees (v2,
// v1, a container's namespaced view, nothing usable), UsableCores and the
// idle cores read from /proc/loadavg.
#include "tensord/transport/cpus.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tensord::wire {
namespace {

namespace fs = std::filesystem;

class CgroupQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/cpus_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // Writes `text` to `path` (absolute, as on the real machine) under root_.
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

constexpr char kV2Mount[] = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

TEST_F(CgroupQuotaTest, V2TakesTheSmallestQuotaOnThePathToTheRoot) {
  Write("/sys/fs/cgroup/a/b/cpu.max", "150000 100000\n");
  Write("/sys/fs/cgroup/a/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuotaCores("0::/a/b\n", kV2Mount, root_), 1.5);
  Write("/sys/fs/cgroup/a/cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuotaCores("0::/a/b\n", kV2Mount, root_), 0.5);
}

TEST_F(CgroupQuotaTest, V2WithoutAQuotaIsZero) {
  Write("/sys/fs/cgroup/a/cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/a\n", kV2Mount, root_), 0);
  EXPECT_EQ(CgroupCpuQuotaCores("0::/\n", kV2Mount, root_), 0);  // the root has no cpu.max
}

TEST_F(CgroupQuotaTest, V1ReadsTheCpuControllersQuotaAndPeriod) {
  // The layout of this project's build machine: one mount per controller.
  const std::string mounts =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n";
  const std::string cgroup = "2:cpuacct:/job\n1:cpu:/job\n0::/\n";
  Write("/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "-1\n");
  Write("/sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores(cgroup, mounts, root_), 0);
  Write("/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "200000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuotaCores(cgroup, mounts, root_), 2.0);
  // cpu and cpuacct mounted together, as most distributions do.
  const std::string joint = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
  Write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "25000\n");
  Write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuotaCores("4:cpu,cpuacct:/job\n", joint, root_), 0.25);
}

TEST_F(CgroupQuotaTest, AContainersMountRootIsItsOwnCgroup) {
  // In a container the mount shows the container's cgroup at the mount point.
  const std::string mounts = "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  Write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuotaCores("0::/docker/abc\n", mounts, root_), 1.0);
  // A cgroup that is not below the mount's root is not read through it.
  EXPECT_EQ(CgroupCpuQuotaCores("0::/docker/abcd\n", mounts, root_), 0);
  EXPECT_EQ(CgroupCpuQuotaCores("0::/other\n", mounts, root_), 0);
}

TEST_F(CgroupQuotaTest, NothingUsableMeansNoQuota) {
  Write("/sys/fs/cgroup/a/cpu.max", "lots\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/a\n", kV2Mount, root_), 0);
  Write("/sys/fs/cgroup/a/cpu.max", "0 100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/a\n", kV2Mount, root_), 0);
  EXPECT_EQ(CgroupCpuQuotaCores("", "", root_), 0);
  EXPECT_EQ(CgroupCpuQuotaCores("garbage\n::\n0::\n1:cpu\n", "x - y\n- - -\n1 2 3 4 5 - cgroup2\n", root_), 0);
  EXPECT_EQ(CgroupCpuQuotaCores("0::/missing\n", kV2Mount, root_), 0);
}

TEST(IdleCoresTest, AreTheUsableCoresLessThoseRunningNow) {
  EXPECT_EQ(IdleCores("0.52 0.58 0.59 1/103 32182\n", 2), 1);
  EXPECT_EQ(IdleCores("3.10 2.00 1.00 5/140 4242\n", 2), 0);
  EXPECT_EQ(IdleCores("0.00 0.00 0.00 2/90 1\n", 8), 6);
  EXPECT_EQ(IdleCores("", 8), 0);
  EXPECT_EQ(IdleCores("1 2 3 x/4 5", 8), 0);
  EXPECT_EQ(IdleCores("1 2 3 4 5", 8), 0);
  const int now = IdleCoresNow();
  EXPECT_GE(now, 0);
  EXPECT_LT(now, UsableCores());  // this thread runs
}

TEST(UsableCoresTest, IsBetweenOneAndTheOnlineCores) {
  const int n = UsableCores();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(UsableCores(), n);  // read once
}

}  // namespace
}  // namespace tensord::wire
