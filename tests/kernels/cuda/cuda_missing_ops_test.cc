// The CUDA kernels' to-do list: every op with a CPU kernel and no CUDA
// kernel must be listed in tests/kernels/cuda_missing_ops.txt, and every
// listed op must still lack one. Adding a CUDA kernel therefore fails this
// test until its line goes; adding a CPU-only op fails it until the op is
// listed (or gets its CUDA kernel). The test prints the count.
#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tensord/kernels/cuda/cuda_kernels.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/op_table.h"

#ifndef TENSORD_CUDA_MISSING_OPS_FILE
#error "the build defines TENSORD_CUDA_MISSING_OPS_FILE (tests/kernels/cuda_missing_ops.txt)"
#endif

namespace tensord {
namespace {

std::set<std::string> ListedOps() {
  std::ifstream in(TENSORD_CUDA_MISSING_OPS_FILE);
  EXPECT_TRUE(in.good()) << "cannot read " << TENSORD_CUDA_MISSING_OPS_FILE;
  std::set<std::string> ops;
  std::string line;
  while (std::getline(in, line)) {
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(ops.insert(line).second) << line << " is listed twice";
  }
  return ops;
}

TEST(CudaCompletenessTest, MissingCudaKernelsAreExactlyTheListedOnes) {
  KernelRegistry reg;
  ASSERT_TRUE(RegisterCpuKernels(reg).ok());
  ASSERT_TRUE(RegisterCudaKernels(reg).ok());
  const std::set<std::string> listed = ListedOps();
  int cpu_ops = 0, cuda_ops = 0;
  std::set<std::string> missing;
  for (const OpEntry& e : OpTable::Get().entries()) {
    const bool cpu = reg.Find(DeviceType::kCPU, e.id) != nullptr;
    const bool cuda = reg.Find(DeviceType::kCUDA, e.id) != nullptr;
    cpu_ops += cpu;
    cuda_ops += cuda;
    EXPECT_FALSE(cuda && !cpu) << e.full_name() << " has a CUDA kernel but no CPU kernel to check it against";
    if (cpu && !cuda) missing.insert(e.full_name());
  }
  for (const std::string& op : missing) {
    EXPECT_TRUE(listed.count(op)) << op << " has a CPU kernel but no CUDA kernel: write one, or add the op to "
                                  << TENSORD_CUDA_MISSING_OPS_FILE;
  }
  for (const std::string& op : listed) {
    EXPECT_TRUE(missing.count(op)) << op << " is listed in " << TENSORD_CUDA_MISSING_OPS_FILE
                                   << " but has a CUDA kernel (or is no longer an op with a CPU kernel): "
                                      "remove its line";
  }
  std::cout << "CUDA kernels: " << cuda_ops << " of " << cpu_ops << " ops with a CPU kernel; " << missing.size()
            << " to go (" << TENSORD_CUDA_MISSING_OPS_FILE << ")\n";
}

}  // namespace
}  // namespace tensord
