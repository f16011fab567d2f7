// KernelRegistry: a [device][op id] table of kernel functions, filled at
// start-up and read-only afterwards (lookups need no lock).
#include "tensord/kernels/registry.h"

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord {

KernelRegistry::KernelRegistry()
    : by_device_(kNumDeviceTypes, std::vector<KernelFn>(OpTable::Get().size(), nullptr)) {}

absl::Status KernelRegistry::Register(DeviceType device, absl::string_view full_name, KernelFn fn) {
  const int d = static_cast<int>(device);
  if (d < 0 || d >= kNumDeviceTypes) {
    return InternalErr(absl::StrCat("internal: kernel for '", full_name, "' on invalid device ", d));
  }
  if (fn == nullptr) return InternalErr(absl::StrCat("internal: null kernel for '", full_name, "'"));
  const OpEntry* op = OpTable::Get().Find(full_name);
  if (op == nullptr) {
    return InternalErr(absl::StrCat("internal: kernel registered for '", full_name,
                                    "', which is not in the op table"));
  }
  KernelFn& slot = by_device_[d][op->id];
  if (slot != nullptr) {
    return InternalErr(absl::StrCat("internal: kernel for '", full_name, "' on ",
                                    Device{device, 0}.ToString(), " registered twice"));
  }
  slot = fn;
  return absl::OkStatus();
}

KernelFn KernelRegistry::Find(DeviceType device, uint32_t op_id) const {
  const int d = static_cast<int>(device);
  if (d < 0 || d >= kNumDeviceTypes) return nullptr;
  const std::vector<KernelFn>& ops = by_device_[d];
  if (op_id >= ops.size()) return nullptr;
  return ops[op_id];
}

namespace {
thread_local ScratchAllocator* current_scratch = nullptr;
}  // namespace

ScopedScratchAllocator::ScopedScratchAllocator(ScratchAllocator* a) : prev_(current_scratch) { current_scratch = a; }
ScopedScratchAllocator::~ScopedScratchAllocator() { current_scratch = prev_; }
ScratchAllocator* CurrentScratchAllocator() { return current_scratch; }

}  // namespace tensord
