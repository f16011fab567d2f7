// Device-neutral memory accounting: sessions' charges, peaks and limits, and
// storages that give their block back to the device that made it.
#include "tensord/runtime/memory.h"

#include <algorithm>
#include <atomic>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensord/meta/errors.h"

namespace tensord::runtime {

std::string FormatBytes(int64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return absl::StrFormat("%.2f %s", v, kUnits[u]);
}

namespace {

std::atomic<uint64_t> g_next_account_id{1};

// peak := max(peak, now), without a lock.
void RaisePeak(std::atomic<int64_t>& peak, int64_t now) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

// What a session's failed allocation of `nbytes` for `op` says: the same
// words whether the storage was to be allocated or adopted (a shared-memory
// upload), on whichever device.
absl::Status OutOfMemory(absl::string_view op, int64_t nbytes, int64_t in_use, int64_t bookkeeping, int64_t limit,
                         absl::string_view why) {
  std::string msg = absl::StrCat(op, ": out of memory: tried to allocate ", FormatBytes(nbytes), " (", nbytes,
                                 " bytes); this session has ", FormatBytes(in_use), " in use");
  if (limit > 0) absl::StrAppend(&msg, " of its ", FormatBytes(limit), " limit (", limit, " bytes)");
  if (bookkeeping > 0) {
    absl::StrAppend(&msg, ", and ", FormatBytes(bookkeeping), " of bookkeeping (tensor handles, call sites)");
  }
  if (!why.empty()) absl::StrAppend(&msg, "; ", why);
  return OutOfMemoryErr(msg);
}

}  // namespace

MemoryAccount::MemoryAccount(int64_t limit_bytes)
    : limit_(limit_bytes < 0 ? 0 : limit_bytes), id_(g_next_account_id.fetch_add(1, std::memory_order_relaxed)) {}

std::shared_ptr<MemoryAccount> MemoryAccount::Create(int64_t limit_bytes) {
  return std::make_shared<MemoryAccount>(limit_bytes);
}

absl::Status MemoryAccount::ChargeStorage(int64_t nbytes, absl::string_view op, absl::string_view why_if_refused) {
  // Charged before the memory is taken, so that concurrent allocations never
  // overshoot the limit.
  int64_t cur = in_use_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_ > 0 && nbytes > limit_ - cur - bookkeeping_bytes()) {
      return OutOfMemory(op, nbytes, cur, bookkeeping_bytes(), limit_, why_if_refused);
    }
    if (in_use_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  RaisePeak(peak_, cur + nbytes);
  return absl::OkStatus();
}

absl::Status MemoryAccount::SetDeviceLimit(const Device& device, int64_t limit_bytes) {
  const int slot = DeviceSlot(device);
  if (slot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a per-session memory limit on ", device.ToString(), ": the device has no counters of its own"));
  }
  if (limit_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a per-session memory limit on ", device.ToString(), " of ", limit_bytes, " bytes"));
  }
  devices_[slot].limit.store(limit_bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

int64_t MemoryAccount::device_limit_bytes(const Device& device) const {
  const int slot = DeviceSlot(device);
  return slot < 0 ? -1 : devices_[slot].limit.load(std::memory_order_relaxed);
}

absl::Status MemoryAccount::ReserveDevice(const Device& device, int64_t nbytes, absl::string_view op,
                                          int64_t* after) {
  *after = 0;
  const int slot = DeviceSlot(device);
  if (slot < 0) return absl::OkStatus();
  DeviceCounters& c = devices_[slot];
  const int64_t limit = c.limit.load(std::memory_order_relaxed);
  if (limit <= 0) {
    *after = c.in_use.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    return absl::OkStatus();
  }
  int64_t cur = c.in_use.load(std::memory_order_relaxed);
  for (;;) {
    if (nbytes > limit - cur) {
      return OutOfMemoryErr(absl::StrCat(op, ": out of memory on ", device.ToString(), ": tried to allocate ",
                                         FormatBytes(nbytes), " (", nbytes, " bytes); this session has ",
                                         FormatBytes(cur), " on ", device.ToString(), " of its ", FormatBytes(limit),
                                         " limit there (", limit, " bytes)"));
    }
    if (c.in_use.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  *after = cur + nbytes;
  return absl::OkStatus();
}

void MemoryAccount::CommitDevice(const Device& device, int64_t after) {
  const int slot = DeviceSlot(device);
  if (slot >= 0) RaisePeak(devices_[slot].peak, after);
}

void MemoryAccount::UnchargeDevice(const Device& device, int64_t nbytes) {
  const int slot = DeviceSlot(device);
  if (slot >= 0) devices_[slot].in_use.fetch_sub(nbytes, std::memory_order_relaxed);
}

int64_t MemoryAccount::bytes_in_use(const Device& device) const {
  const int slot = DeviceSlot(device);
  return slot < 0 ? -1 : devices_[slot].in_use.load(std::memory_order_relaxed);
}

int64_t MemoryAccount::peak_bytes(const Device& device) const {
  const int slot = DeviceSlot(device);
  return slot < 0 ? -1 : devices_[slot].peak.load(std::memory_order_relaxed);
}

void MemoryAccount::ResetPeak(const Device& device) {
  const int slot = DeviceSlot(device);
  if (slot < 0) return;
  DeviceCounters& c = devices_[slot];
  c.peak.store(c.in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // An allocation on another thread between the two lines above may have
  // raised the peak that the store then lowered: the peak never ends below
  // what is in use once this returns.
  RaisePeak(c.peak, c.in_use.load(std::memory_order_relaxed));
}

absl::StatusOr<std::shared_ptr<Storage>> MemoryAccount::Allocate(const std::shared_ptr<DeviceAllocator>& device,
                                                                int64_t nbytes, absl::string_view op, bool zero_fill) {
  if (nbytes < 0) return RuntimeErr(absl::StrCat(op, ": cannot allocate a negative number of bytes (", nbytes, ")"));
  if (device == nullptr) return InternalErr(absl::StrCat(op, ": allocating on no device"));
  if (absl::Status fits = device->CheckCapacity(nbytes); !fits.ok()) {
    return OutOfMemory(op, nbytes, bytes_in_use(), bookkeeping_bytes(), limit_, fits.message());
  }
  // The device's cap first: its message is the more precise one.
  const Device where = device->device();
  int64_t device_after = 0;
  TD_RETURN_IF_ERROR(ReserveDevice(where, nbytes, op, &device_after));
  if (absl::Status s = ChargeStorage(nbytes, op, ""); !s.ok()) {
    UnchargeDevice(where, nbytes);
    return s;
  }
  absl::StatusOr<DeviceAllocator::Block> block = device->Allocate(nbytes, zero_fill, id_);
  if (!block.ok()) {
    UnchargeStorage(nbytes);
    UnchargeDevice(where, nbytes);
    return OutOfMemory(op, nbytes, bytes_in_use(), bookkeeping_bytes(), limit_, block.status().message());
  }
  // The device's peak counts storages the device gave memory for: a
  // refused allocation leaves it alone.
  device->in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  CommitDevice(where, device_after);
  Storage* raw = new (std::nothrow) Storage(*block, nbytes, device, shared_from_this());
  if (raw == nullptr) {
    device->Free(*block, nbytes, id_);
    UnchargeStorage(nbytes);
    UnchargeDevice(where, nbytes);
    device->in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
    return OutOfMemory(op, nbytes, bytes_in_use(), bookkeeping_bytes(), limit_, "the system refused the allocation");
  }
  try {
    return std::shared_ptr<Storage>(raw);  // on failure the constructor deletes `raw`
  } catch (const std::bad_alloc&) {
    return OutOfMemory(op, nbytes, bytes_in_use(), bookkeeping_bytes(), limit_, "the system refused the allocation");
  }
}

absl::StatusOr<std::shared_ptr<Storage>> MemoryAccount::Adopt(const std::shared_ptr<DeviceAllocator>& device,
                                                             char* data, int64_t nbytes, std::shared_ptr<void> keeper,
                                                             absl::string_view op) {
  if (nbytes < 0) return RuntimeErr(absl::StrCat(op, ": cannot adopt a negative number of bytes (", nbytes, ")"));
  if (device == nullptr || data == nullptr || keeper == nullptr) {
    return InternalErr(absl::StrCat(op, ": adopting memory without an owner"));
  }
  int64_t device_after = 0;
  TD_RETURN_IF_ERROR(ReserveDevice(device->device(), nbytes, op, &device_after));
  if (absl::Status s = ChargeStorage(nbytes, op, ""); !s.ok()) {
    UnchargeDevice(device->device(), nbytes);
    return s;
  }
  device->in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  CommitDevice(device->device(), device_after);
  DeviceAllocator::Block block;
  block.data = data;
  Storage* raw = new (std::nothrow) Storage(block, nbytes, device, shared_from_this());
  if (raw == nullptr) {
    UnchargeStorage(nbytes);
    UnchargeDevice(device->device(), nbytes);
    device->in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
    return OutOfMemoryErr(absl::StrCat(op, ": out of memory (the storage's bookkeeping)"));
  }
  raw->external_ = std::move(keeper);
  try {
    return std::shared_ptr<Storage>(raw);  // on failure the constructor deletes `raw`
  } catch (const std::bad_alloc&) {
    return OutOfMemoryErr(absl::StrCat(op, ": out of memory (the storage's bookkeeping)"));
  }
}

absl::Status MemoryAccount::Charge(int64_t nbytes, absl::string_view op) {
  if (nbytes < 0) return InternalErr(absl::StrCat(op, ": a negative charge of ", nbytes, " bytes"));
  int64_t cur = bookkeeping_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t storage = bytes_in_use();
    if (limit_ > 0 && nbytes > limit_ - storage - cur) return OutOfMemory(op, nbytes, storage, cur, limit_, "");
    if (bookkeeping_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  return absl::OkStatus();
}

void MemoryAccount::UnchargeStorage(int64_t nbytes) { in_use_.fetch_sub(nbytes, std::memory_order_relaxed); }

void MemoryAccount::UnchargeBookkeeping(int64_t nbytes) { bookkeeping_.fetch_sub(nbytes, std::memory_order_relaxed); }

MemoryCharge::~MemoryCharge() {
  if (account_ != nullptr && bytes_ > 0) account_->UnchargeBookkeeping(bytes_);
}

absl::Status MemoryCharge::Add(const std::shared_ptr<MemoryAccount>& account, int64_t nbytes, absl::string_view what) {
  if (account == nullptr || (account_ != nullptr && account_ != account)) {
    return InternalErr(absl::StrCat(what, ": a memory charge moved between accounts"));
  }
  TD_RETURN_IF_ERROR(account->Charge(nbytes, what));
  account_ = account;
  bytes_ += nbytes;
  return absl::OkStatus();
}

void MemoryCharge::Sub(int64_t nbytes) {
  nbytes = std::min(nbytes, bytes_);
  if (account_ == nullptr || nbytes <= 0) return;
  account_->UnchargeBookkeeping(nbytes);
  bytes_ -= nbytes;
}

uint64_t Storage::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Storage::~Storage() {
  if (external_ != nullptr) {
    external_.reset();  // the owner lets go of the memory (e.g. the client may reuse its segment)
  } else {
    allocator_->Free(block_, nbytes_, account_->id());
  }
  account_->UnchargeStorage(nbytes_);
  account_->UnchargeDevice(device_, nbytes_);
  allocator_->in_use_.fetch_sub(nbytes_, std::memory_order_relaxed);
}

}  // namespace tensord::runtime
