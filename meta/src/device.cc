// Devices: parsing and printing "cpu", "cuda:N", "meta".
#include "tensord/meta/device.h"

#include <algorithm>
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
  // PyTorch's grammar: a type name, then optionally ':' and an index written
  // as "0" or without leading zeros (c10/core/Device.cpp).
  const size_t colon = text.find(':');
  const absl::string_view name = text.substr(0, colon);
  DeviceType type;
  if (name == "cpu") {
    type = DeviceType::kCPU;
  } else if (name == "meta") {
    type = DeviceType::kMeta;
  } else if (name == "cuda") {
    type = DeviceType::kCUDA;
  } else if (name == "privateuseone") {
    type = DeviceType::kPrivateUse1;
  } else {
    return RuntimeErr(absl::StrCat(
        "Expected one of cpu, cuda, meta, privateuseone device type at start of device string: ", text));
  }
  if (colon == absl::string_view::npos) return Device{type, 0};
  const absl::string_view digits = text.substr(colon + 1);
  const bool well_formed = !digits.empty() && (digits == "0" || digits[0] != '0') &&
                           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  int32_t index = 0;
  if (!well_formed || !absl::SimpleAtoi(digits, &index)) {
    return RuntimeErr(absl::StrCat("Invalid device string: '", text, "'"));
  }
  // The cpu and meta are one device each: index 0 names it, as "cpu" does.
  if ((type == DeviceType::kCPU || type == DeviceType::kMeta) && index != 0) {
    return RuntimeErr(absl::StrCat("Invalid device string: '", text, "' (tensord has one ", name,
                                   " device: '", name, "' or '", name, ":0')"));
  }
  return Device{type, index};
}

absl::Status TwoDevicesError(absl::string_view op, const Device& first, const Device& second) {
  return RuntimeErr(absl::StrCat(op, op.empty() ? "" : ": ",
                                 "Expected all tensors to be on the same device, but found at least two devices, ",
                                 first.ToString(), " and ", second.ToString(), "!"));
}

}  // namespace tensord
