// Devices: parsing and printing "cpu", "cuda:N", "meta".
#include "tensord/meta/device.h"

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
  }
  return "invalid";
}

bool IsValidDeviceType(int64_t v) { return v >= 0 && v < kNumDeviceTypes; }

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  if (text == "cpu") return Device{DeviceType::kCPU, 0};
  if (text == "meta") return Device{DeviceType::kMeta, 0};
  if (text == "cuda") return Device{DeviceType::kCUDA, 0};
  if (text.substr(0, 5) == "cuda:") {
    int32_t index = 0;
    if (absl::SimpleAtoi(text.substr(5), &index) && index >= 0) return Device{DeviceType::kCUDA, index};
  }
  return RuntimeErr(absl::StrCat("Expected one of cpu, cuda, meta device type at start of device string: ", text));
}

}  // namespace tensord
