// A session's memory statistics request (v1::MemoryStats): its bytes on one
// device, now and at their peak, and what that device's allocator holds for
// every session, as PyTorch's torch.cuda.memory_stats reports them; and
// empty_cache, which has that allocator give back what it keeps cached.
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/server/session.h"

namespace tensord::server {

namespace {

constexpr absl::string_view kOp = "memory_stats";

uint64_t NonNegative(int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); }

}  // namespace

bool Session::ExecuteMemoryStats(const v1::MemoryStats& request, const Writer& write) {
  auto fail = [&](absl::Status status) {
    OpError e;
    e.status = std::move(status);
    e.op = std::string(kOp);
    return WriteRequestError(request.request_id(), e, write);
  };
  if (!IsValidDeviceType(request.device_type())) {
    return fail(RuntimeErr(absl::StrCat(kOp, ": invalid device type ", request.device_type(), " (expected 0..",
                                        kNumDeviceTypes - 1, ")")));
  }
  if (request.device_index() < 0) {
    return fail(RuntimeErr(absl::StrCat(kOp, ": negative device index ", request.device_index())));
  }
  const Device device{static_cast<DeviceType>(request.device_type()), request.device_index()};
  if (device.is_meta()) {
    return fail(RuntimeErr(absl::StrCat(kOp, ": device meta is not available: meta tensors exist only in the client "
                                        "and hold no memory; this daemon serves ",
                                        devices_->Names())));
  }
  Backend* backend = devices_->Find(device);
  if (backend == nullptr) {
    return fail(RuntimeErr(absl::StrCat(kOp, ": device ", device.ToString(), " is not available; this daemon serves ",
                                        devices_->Names())));
  }
  if (!MemoryAccount::HasDeviceSlot(device)) {
    return fail(RuntimeErr(absl::StrCat(
        kOp, ": device ", device.ToString(), " has no statistics of its own (they cover cpu, privateuseone:0 to ",
        MemoryAccount::kMaxPrivateUseDevices - 1, " and cuda:0 to ", MemoryAccount::kMaxCudaDevices - 1,
        "); this session's storages there count only in its totals")));
  }
  // The allocator is the daemon's: thread-safe, and what it gives back is
  // no session's (cached blocks are in nobody's count).
  if (request.empty_cache()) backend->Trim();
  v1::ServerMessage msg;
  v1::Ack* ack = msg.mutable_ack();
  ack->set_request_id(request.request_id());
  ack->set_allocated_bytes(NonNegative(memory_->bytes_in_use(device)));
  ack->set_peak_allocated_bytes(NonNegative(memory_->peak_bytes(device)));
  ack->set_reserved_bytes(NonNegative(backend->allocator()->reserved_bytes()));
  ack->set_total_memory_bytes(NonNegative(backend->total_memory_bytes()));
  if (request.reset_peak()) memory_->ResetPeak(device);
  // No errors: this is not a sync point (they wait for the next one).
  AddReleasedFunctions(ack);
  return write(msg);
}

}  // namespace tensord::server
