// tensord/meta/device.h — where a tensor lives: "cpu", "cuda:N", "meta", or
// "privateuseone:N" (PyTorch's slot for an out-of-tree device; in tensord the
// test-only second host device a daemon serves with --test-device).
//
//   Device d = *ParseDevice("cuda:1");  d.type == DeviceType::kCUDA, d.index == 1
//   d.ToString() == "cuda:1"
#ifndef TENSORD_META_DEVICE_H_
#define TENSORD_META_DEVICE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace tensord {

// Numeric values are part of the wire contract: append only.
enum class DeviceType : int32_t { kCPU = 0, kCUDA = 1, kMeta = 2, kPrivateUse1 = 3 };
inline constexpr int kNumDeviceTypes = 4;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t index = 0;  // meaningful for cuda and privateuseone; 0 for cpu and meta

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool is_meta() const { return type == DeviceType::kMeta; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool is_privateuseone() const { return type == DeviceType::kPrivateUse1; }
  // Whether the type takes an index (cuda:N, privateuseone:N).
  bool indexed() const { return is_cuda() || is_privateuseone(); }
  // "cpu", "cuda:0", "meta", "privateuseone:0" (PyTorch spelling).
  std::string ToString() const;
};

inline constexpr Device kCPU{DeviceType::kCPU, 0};
inline constexpr Device kMetaDevice{DeviceType::kMeta, 0};

bool IsValidDeviceType(int64_t v);

// Parses "cpu", "meta", "cuda" (index 0), "cuda:N" (N >= 0), "privateuseone"
// and "privateuseone:N", and "cpu:0" / "meta:0" (the one cpu and meta
// device), with PyTorch's grammar: N is "0" or has no leading zero, no sign
// and no spaces. RuntimeError otherwise, in PyTorch's words ("Expected one
// of cpu, cuda, ... device type at start of device string: xpu", "Invalid
// device string: 'cuda:01'").
absl::StatusOr<Device> ParseDevice(absl::string_view text);

// PyTorch's error for tensors on two devices in one op (RuntimeError):
// "<op>: Expected all tensors to be on the same device, but found at least
// two devices, <first> and <second>!" (no "<op>: " when `op` is empty). The
// one text the meta functions, the client and the daemon give.
absl::Status TwoDevicesError(absl::string_view op, const Device& first, const Device& second);

}  // namespace tensord

#endif  // TENSORD_META_DEVICE_H_
