// tensord/kernels/device_error.h — how a kernel on a device whose work runs
// after the call that issued it (CUDA) reports a bad index without a
// device-side assert (which would end the CUDA context of every session):
// it records the first one in an error word in device memory, and the
// session's stream reads the word at the next sync point and raises it as
// the CPU kernel would have raised it at once (IndexError naming the op,
// the index, the dimension and the size).
//
//   // in a CUDA kernel (kernels/cuda/), for an index i into a dimension of size n:
//   if (i < -n || i >= n) { tensord::RecordDeviceError(word, kIndexOutOfBounds, op_id, i, dim, n); return; }
//
// Plain C++ with no device API, so the runtime, the backends and both
// compilers read the same layout.
#ifndef TENSORD_KERNELS_DEVICE_ERROR_H_
#define TENSORD_KERNELS_DEVICE_ERROR_H_

#include <cstdint>

namespace tensord {

// What went wrong; 0 means nothing (the word's state between sync points).
enum DeviceErrorCode : int32_t {
  kNoDeviceError = 0,
  // `value` is out of range for dimension `dim` of size `size`
  // ("index 7 is out of bounds for dimension 0 with size 5").
  kIndexOutOfBounds = 1,
  // A class index of a loss (cross_entropy, nll_loss): "Target 7 is out of
  // bounds." (`size` is the number of classes).
  kTargetOutOfBounds = 2,
  // max_pool2d_with_indices_backward: a saved index `value` outside its
  // input plane of `dim` rows and `size` columns ("index 9 out of range for
  // an input plane of 2x4").
  kPoolIndexOutOfBounds = 3,
  // masked_scatter's mask has `value` true elements and its source only
  // `size` elements ("masked_scatter: Number of elements of source < number
  // of ones in mask (6 < 7)"; `dim` is -1).
  kSourceTooShort = 4,
};

// The error word: 32 bytes in device memory per stream, zeroed by the
// stream after each read. `code` is claimed first (by compare-and-swap from
// 0), so the word keeps the first error and later ones leave it alone.
struct DeviceErrorWord {
  int32_t code;    // DeviceErrorCode
  uint32_t op_id;  // the op whose kernel recorded it (OpEntry::id)
  int64_t value;   // the bad index
  int64_t dim;     // the dimension it indexes (-1: not applicable)
  int64_t size;    // that dimension's size
};
static_assert(sizeof(DeviceErrorWord) == 32, "the error word's layout is shared by host and device code");

}  // namespace tensord

#endif  // TENSORD_KERNELS_DEVICE_ERROR_H_
