// HostLaunch's advanced-indexing and mask kernels (host_launch.h): the CUDA
// kernels' per-element code (advindex.cuh) run on the host, and the
// standard library's scan and stable sort standing in for CUB's.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "../../../kernels/cuda/advindex.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::AdvIndex(const cuda::AdvIndexCall& call, void* stream) {
  ++launches;
  return cuda::DispatchAdvIndex<cuda::HostAdvIndexEngine>(call, stream);
}

absl::Status HostLaunch::InclusiveSum(absl::string_view /*op*/, const int64_t* in, int64_t* out, int64_t n,
                                      void* /*stream*/) {
  if (n > 0) std::inclusive_scan(in, in + n, out);
  return absl::OkStatus();
}

absl::Status HostLaunch::SortPairs(absl::string_view /*op*/, const int64_t* keys_in, int64_t* keys_out,
                                   const int64_t* vals_in, int64_t* vals_out, int64_t n, void* /*stream*/) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys_in[a] < keys_in[b]; });
  std::vector<int64_t> k(order.size()), v(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    k[i] = keys_in[order[i]];
    v[i] = vals_in[order[i]];
  }
  std::copy(k.begin(), k.end(), keys_out);
  std::copy(v.begin(), v.end(), vals_out);
  return absl::OkStatus();
}

absl::Status HostLaunch::CopyToHost(absl::string_view /*op*/, void* dst, const void* src, int64_t bytes,
                                    void* /*stream*/) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace tensord::testing::cudatest
