// tensord/kernels/device_error_status.h — the status a device's error word
// (device_error.h) stands for, in the words of the op's CPU kernel. The CUDA
// stream calls it at a sync point; the CUDA kernels' host-replay tests call
// it after a replayed launch, so both raise exactly what the CPU raises for
// the same bad index. Host code only (absl), unlike device_error.h.
#ifndef TENSORD_KERNELS_DEVICE_ERROR_STATUS_H_
#define TENSORD_KERNELS_DEVICE_ERROR_STATUS_H_

#include "absl/status/status.h"
#include "tensord/kernels/device_error.h"

namespace tensord {

// OK for kNoDeviceError. kIndexOutOfBounds: the CPU kernel's error for
// `value` out of range for dimension `dim` of size `size` in the op
// `op_id` (OpEntry::id), e.g. index_select: IndexError "index_select():
// index 7 is out of bounds for dimension 0 with size 5"; gather:
// RuntimeError "index 7 is out of bounds for dimension 0 with size 5";
// scatter_add / scatter: RuntimeError "scatter_add(): index 7 is ...";
// other ops: IndexError "<op>(): index 7 is ...". kTargetOutOfBounds:
// IndexError "Target 7 is out of bounds.". kPoolIndexOutOfBounds: IndexError
// "<op>: index 9 out of range for an input plane of 2x4". kSourceTooShort:
// RuntimeError "masked_scatter: Number of elements of source < number of
// ones in mask (6 < 7)". An unknown code or op id (a
// kernel's bug): InternalError naming both.
absl::Status DeviceErrorToStatus(const DeviceErrorWord& word);

}  // namespace tensord

#endif  // TENSORD_KERNELS_DEVICE_ERROR_STATUS_H_
