// Devices: parsing and printing "cpu", "cuda:N", "meta".
#include "tensord/meta/device.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord {

std::string Device::ToString() const {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kMeta:
      return "meta";
    case DeviceType::kCUDA:
      return absl::StrCat("cuda:", index);
    case DeviceType::kPrivateUse1:
      return absl::StrCat("privateuseone:", index);
  }
  return "invalid";
}

bool IsValidDeviceType(int64_t v) { return v >= 0 && v < kNumDeviceTypes; }

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  if (text == "cpu") return Device{DeviceType::kCPU, 0};
  if (text == "meta") return Device{DeviceType::kMeta, 0};
  if (text == "cuda") return Device{DeviceType::kCUDA, 0};
  if (text == "privateuseone") return Device{DeviceType::kPrivateUse1, 0};
  for (const auto& [prefix, type] : {std::pair<absl::string_view, DeviceType>{"cuda:", DeviceType::kCUDA},
                                     std::pair<absl::string_view, DeviceType>{"privateuseone:", DeviceType::kPrivateUse1}}) {
    if (text.substr(0, prefix.size()) != prefix) continue;
    int32_t index = 0;
    if (absl::SimpleAtoi(text.substr(prefix.size()), &index) && index >= 0) return Device{type, index};
  }
  return RuntimeErr(absl::StrCat(
      "Expected one of cpu, cuda, meta, privateuseone device type at start of device string: ", text));
}

absl::Status TwoDevicesError(absl::string_view op, const Device& first, const Device& second) {
  return RuntimeErr(absl::StrCat(op, op.empty() ? "" : ": ",
                                 "Expected all tensors to be on the same device, but found at least two devices, ",
                                 first.ToString(), " and ", second.ToString(), "!"));
}

}  // namespace tensord
