// tensord/runtime/memory.h — device memory as the runtime sees it, on any
// device: a DeviceAllocator (one per device, supplied by its backend) hands
// out blocks; a MemoryAccount (one per session) charges them, with its peak
// and its limits, in total and per device; a Storage is one block that
// tensors view, freed and uncharged when its last shared_ptr goes; a
// MemoryCharge is bookkeeping the daemon holds for a session outside any
// storage.
//
//   std::shared_ptr<DeviceAllocator> cpu = ...;          // the cpu backend's
//   auto account = MemoryAccount::Create(/*limit_bytes=*/1 << 30);
//   absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(cpu, 4096, "zeros");
//   (*s)->device() == kCPU; account->bytes_in_use(kCPU) == 4096; the bytes go
//   back to every counter with the last shared_ptr.
#ifndef TENSORD_RUNTIME_MEMORY_H_
#define TENSORD_RUNTIME_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/meta/device.h"

namespace tensord::runtime {

// "1.50 MiB" — for error messages and logs.
std::string FormatBytes(int64_t bytes);

// One device's memory (implemented by each backend: the CPU's in
// backends/cpu/). Thread-safe: storages are freed on any thread.
class DeviceAllocator {
 public:
  // Every block's base is aligned to at least this many bytes, on every
  // device (what a kernel and a shared-memory segment may assume).
  static constexpr int64_t kAlignment = 64;

  // A block handed out by Allocate: `data` is a device address (a host
  // address on the CPU); `context` is the allocator's own (given back to
  // Free unchanged).
  struct Block {
    char* data = nullptr;
    void* context = nullptr;
    size_t reserved = 0;
  };

  virtual ~DeviceAllocator() = default;
  virtual Device device() const = 0;
  // Whether an allocation of `nbytes` could ever succeed here; the error is
  // the reason, as a phrase for an out-of-memory message ("the machine has
  // 15.6 GiB of physical memory"). Asked before anything is charged.
  virtual absl::Status CheckCapacity(int64_t nbytes) const = 0;
  // `nbytes` (>= 0) bytes, kAlignment-aligned, with a distinct base even for
  // 0 bytes, for the session whose MemoryAccount::id() is `owner`. Zero-
  // filled when `zero_fill`; otherwise the caller promises to write every
  // byte before any can reach a client, and gets either zeros or bytes of
  // its own session (never another session's). Error: why the device
  // refused, as a phrase for an out-of-memory message ("the machine has
  // 15.6 GiB of physical memory"); MemoryAccount names the op and the sizes.
  virtual absl::StatusOr<Block> Allocate(int64_t nbytes, bool zero_fill, uint64_t owner) = 0;
  // Gives back a block Allocate made for `owner` (`nbytes` as asked).
  virtual void Free(const Block& block, int64_t nbytes, uint64_t owner) = 0;
  // Bytes held by every live storage of every session on this device
  // (adopted memory included; what an allocator keeps cached is not).
  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  // Bytes this device's memory holds for all sessions together: every live
  // storage's bytes (bytes_in_use()) plus what the allocator adds to them
  // (blocks rounded up to its granules, freed blocks it keeps cached for
  // reuse): PyTorch's memory_reserved. A snapshot (storages are allocated
  // and freed meanwhile). This default has nothing to add.
  virtual int64_t reserved_bytes() const { return bytes_in_use(); }

 private:
  friend class MemoryAccount;
  friend class Storage;
  std::atomic<int64_t> in_use_{0};
};

class Storage;
class MemoryAccount;

// Bytes the daemon holds for a session outside any storage (the entries of
// its handle table, views and failed handles included; interned call
// sites; autograd graph nodes): charged to its MemoryAccount's bookkeeping,
// and so under its limit, until subtracted or destroyed. Whatever a client
// can make the daemon keep is either charged here or bounded by a fixed cap
// before it is allocated. Not thread-safe (one owner).
class MemoryCharge {
 public:
  MemoryCharge() = default;
  ~MemoryCharge();
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;

  // Charges `nbytes` (>= 0) more to `account` (the first Add picks the
  // account; later ones must name the same). ResourceExhausted (MemoryError)
  // naming `what`, the bytes, the bytes in use and the limit when over it.
  absl::Status Add(const std::shared_ptr<MemoryAccount>& account, int64_t nbytes, absl::string_view what);
  // Gives back `nbytes` (at most bytes()).
  void Sub(int64_t nbytes);
  int64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<MemoryAccount> account_;
  int64_t bytes_ = 0;
};

// One session's memory: current and peak bytes on every device together,
// which its limit (0 = none) holds and the session's close statistics
// report; and current and peak bytes per device, which memory statistics
// report (PyTorch's memory_allocated and max_memory_allocated of a device).
// Thread-safe: storages may be freed on any thread; allocating and freeing
// take no lock (a few atomic additions).
//
// A device has its counters in a fixed slot: the cpu, privateuseone:0 to
// privateuseone:7 and cuda:0 to cuda:63 (kMaxPrivateUseDevices,
// kMaxCudaDevices). Storages on a device past those (and on meta, where the
// daemon allocates nothing) count in the totals only: HasDeviceSlot says
// which, and the per-device accessors answer -1 for them.
class MemoryAccount : public std::enable_shared_from_this<MemoryAccount> {
 public:
  static constexpr int kMaxPrivateUseDevices = 8;
  static constexpr int kMaxCudaDevices = 64;

  static std::shared_ptr<MemoryAccount> Create(int64_t limit_bytes);

  // Allocates `nbytes` (>= 0) on `device`'s allocator, charged to this
  // account (DeviceAllocator::Allocate says what `zero_fill` promises).
  // ResourceExhausted (MemoryError) naming `op`, the bytes requested, the
  // bytes in use and the limit when over the limit, over the device's cap
  // (SetDeviceLimit: naming the device and the session's bytes there) or
  // when the device has no memory left (with the device's reason);
  // RuntimeError for a negative size.
  absl::StatusOr<std::shared_ptr<Storage>> Allocate(const std::shared_ptr<DeviceAllocator>& device, int64_t nbytes,
                                                    absl::string_view op, bool zero_fill = true);

  // A storage on `device` over `nbytes` (>= 0) of memory the daemon did not
  // allocate (a client's shared-memory segment adopted by an upload): `data`
  // stays valid while `keeper` lives, and the storage holds `keeper` until
  // its last shared_ptr goes (then drops it: nothing is freed here). Charged
  // to this account like Allocate, with the same errors over the limit.
  absl::StatusOr<std::shared_ptr<Storage>> Adopt(const std::shared_ptr<DeviceAllocator>& device, char* data,
                                                 int64_t nbytes, std::shared_ptr<void> keeper, absl::string_view op);

  // Bytes of this session's storages on every device together (their sizes
  // as asked, before an allocator rounds them up), and the most there were
  // at once since the session opened.
  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }

  // Whether `device` has counters of its own (see the class comment).
  static bool HasDeviceSlot(const Device& device) { return DeviceSlot(device) >= 0; }
  // Bytes of this session's storages on `device`, and the most there were at
  // once since the session opened or since ResetPeak(device); -1 for a
  // device without a slot. Snapshots: another thread may free meanwhile.
  int64_t bytes_in_use(const Device& device) const;
  int64_t peak_bytes(const Device& device) const;
  // Sets `device`'s peak to its bytes in use now (PyTorch's
  // reset_peak_memory_stats); the totals' peak is untouched. Nothing for a
  // device without a slot.
  void ResetPeak(const Device& device);
  // Caps this session's bytes on `device` at `limit_bytes` (0: no cap of
  // its own), besides the account's limit, which counts every device
  // together: a daemon's per-session limit on each GPU. Allocate and Adopt
  // on the device then refuse what would pass it (ResourceExhausted naming
  // the device, the op, the bytes asked, the session's bytes on the device
  // and the cap). InvalidArgument for a device without a slot or a
  // negative limit. Thread-safe; meant to be set as the session opens.
  absl::Status SetDeviceLimit(const Device& device, int64_t limit_bytes);
  // The cap SetDeviceLimit set on `device` (0: none); -1 for a device
  // without a slot.
  int64_t device_limit_bytes(const Device& device) const;
  // Bytes of MemoryCharges: the session's bookkeeping. The limit holds
  // bytes_in_use() + bookkeeping_bytes().
  int64_t bookkeeping_bytes() const { return bookkeeping_.load(std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_; }
  // A daemon-wide serial number (never reused): which session freed a block.
  uint64_t id() const { return id_; }

  explicit MemoryAccount(int64_t limit_bytes);  // use Create

 private:
  friend class Storage;
  friend class MemoryCharge;
  // Slots: [0] the cpu, then privateuseone:0.., then cuda:0...
  static constexpr int kDeviceSlots = 1 + kMaxPrivateUseDevices + kMaxCudaDevices;
  // `device`'s slot, or -1 when it has none.
  static int DeviceSlot(const Device& device) {
    const int32_t i = device.index;
    switch (device.type) {
      case DeviceType::kCPU:
        return 0;
      case DeviceType::kPrivateUse1:
        return i >= 0 && i < kMaxPrivateUseDevices ? 1 + i : -1;
      case DeviceType::kCUDA:
        return i >= 0 && i < kMaxCudaDevices ? 1 + kMaxPrivateUseDevices + i : -1;
      default:
        return -1;
    }
  }
  // Charges `nbytes` of storage to the totals if the limit allows; the
  // error names `op`.
  absl::Status ChargeStorage(int64_t nbytes, absl::string_view op, absl::string_view why_if_refused);
  // Adds `nbytes` to `device`'s bytes in use if its cap (SetDeviceLimit)
  // allows, before the storage exists (so that concurrent allocations never
  // overshoot the cap); sets *after to the bytes in use with them. Nothing
  // for a device without a slot. The error names `op`.
  absl::Status ReserveDevice(const Device& device, int64_t nbytes, absl::string_view op, int64_t* after);
  // The storage ReserveDevice counted exists: `device`'s peak takes `after`.
  void CommitDevice(const Device& device, int64_t after);
  // Adds `nbytes` of bookkeeping if the limit allows (MemoryCharge).
  absl::Status Charge(int64_t nbytes, absl::string_view op);
  void UnchargeStorage(int64_t nbytes);
  void UnchargeDevice(const Device& device, int64_t nbytes);
  void UnchargeBookkeeping(int64_t nbytes);

  struct DeviceCounters {
    std::atomic<int64_t> in_use{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> limit{0};  // SetDeviceLimit; 0: none
  };

  const int64_t limit_;
  const uint64_t id_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> bookkeeping_{0};
  DeviceCounters devices_[kDeviceSlots];
};

// A block of one device's memory that one or more tensors view. Freed (and
// uncharged) when the last shared_ptr to it goes.
class Storage {
 public:
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // A device address: only the device's backend and kernels dereference it.
  char* data() const { return block_.data; }
  int64_t nbytes() const { return nbytes_; }
  // Kept here, not asked of the allocator: the dispatcher asks it of every
  // input of every op.
  Device device() const { return device_; }
  // Adopted memory (MemoryAccount::Adopt: a client's shared-memory segment):
  // the client can change these bytes at any moment, also while a kernel
  // reads them, so nothing the daemon validates may be read from here twice.
  bool client_writable() const { return external_ != nullptr; }

  // Autograd's version counter, shared by every tensor viewing this storage:
  // bumped by each in-place op (a schema argument `Tensor(a!)`) that writes
  // it. A tensor saved for backward remembers the version it was saved at.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // A daemon-wide serial number, never reused while the daemon runs: two
  // tensors view the same storage iff their storages' ids are equal (what a
  // Describe reports; no address leaves the daemon).
  uint64_t id() const { return id_; }

 private:
  friend class MemoryAccount;
  Storage(DeviceAllocator::Block block, int64_t nbytes, std::shared_ptr<DeviceAllocator> allocator,
          std::shared_ptr<MemoryAccount> account)
      : block_(block),
        nbytes_(nbytes),
        device_(allocator->device()),
        allocator_(std::move(allocator)),
        account_(std::move(account)),
        id_(NextId()) {}
  static uint64_t NextId();

  DeviceAllocator::Block block_;
  int64_t nbytes_;
  Device device_;
  std::shared_ptr<DeviceAllocator> allocator_;  // frees the block (unless adopted)
  std::shared_ptr<void> external_;  // non-null: adopted memory, kept alive by this (see Adopt)
  std::shared_ptr<MemoryAccount> account_;
  uint64_t version_ = 0;  // guarded by the owning session's mutex
  uint64_t id_;
};

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_MEMORY_H_
