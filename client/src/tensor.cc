// Tensor handles, host data decoding and call sites.
#include <atomic>
#include "tensord/client/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tensord/client/ops.h"
#include "tensord/client/session.h"
#include "tensord/meta/errors.h"

namespace tensord::client {

void CallSite::Resolve() {
  if (source != nullptr) {
    text = source->Materialize();
    source = nullptr;
  } else if (text.empty() && file != nullptr) {
    // A program calls ops from a few lines, over and over: each file:line's
    // text is built once per thread (the file name is compared, not just its
    // pointer, so a reused buffer cannot name the wrong file).
    struct Built {
      std::string file;
      std::string text;
    };
    thread_local absl::flat_hash_map<std::pair<const char*, int>, Built> built;
    if (built.size() >= 4096) built.clear();
    Built& b = built[{file, line}];
    if (b.text.empty() || b.file != file) {
      b.file = file;
      b.text = Text();
    }
    text = b.text;
  }
}

std::string CallSite::Text() const {
  if (!text.empty() || file == nullptr) return text;
  absl::string_view f = file;
  const size_t slash = f.rfind('/');
  if (slash != absl::string_view::npos) f = f.substr(slash + 1);
  return absl::StrCat(f, ":", line);
}

uint64_t TensorImpl::NextStorageId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() {
  if (session != nullptr && handle != 0) session->QueueRelease(handle, storage_bytes);
}

// ---------------------------------------------------------------- decoders

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
    return sign ? -f : f;
  }
  if (exp == 31) {
    f = mant == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    return sign ? -f : f;
  }
  const uint32_t bits = sign | ((exp + 112) << 23) | (mant << 13);
  std::memcpy(&f, &bits, 4);
  return f;
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float Float8E4M3FNToFloat(uint8_t v) {
  const bool neg = v & 0x80;
  const int exp = (v >> 3) & 0xf;
  const int mant = v & 0x7;
  float f;
  if (exp == 15 && mant == 7) {
    f = std::numeric_limits<float>::quiet_NaN();  // e4m3fn has no infinities
  } else if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -9);  // mant/8 * 2^-6
  } else {
    f = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return neg ? -f : f;
}

float Float8E5M2ToFloat(uint8_t v) { return HalfToFloat(static_cast<uint16_t>(v) << 8); }

// ---------------------------------------------------------------- HostData

absl::StatusOr<Scalar> HostData::At(int64_t flat) const {
  const int64_t n = numel();
  if (flat < 0 || flat >= n) {
    return IndexErr(absl::StrCat("index ", flat, " is out of bounds for a tensor with ", n, " elements"));
  }
  const int64_t item = meta.itemsize();
  if (static_cast<int64_t>(byte_size()) < (flat + 1) * item) {
    return InternalErr(absl::StrCat("host data holds ", byte_size(), " bytes, element ", flat, " needs ",
                                    (flat + 1) * item));
  }
  const char* p = byte_data() + flat * item;
  auto load = [p](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (meta.dtype) {
    case ScalarType::kBool: return Scalar::Bool(load(uint8_t{}) != 0);
    case ScalarType::kUInt8: return Scalar::Int(load(uint8_t{}));
    case ScalarType::kInt8: return Scalar::Int(load(int8_t{}));
    case ScalarType::kInt16: return Scalar::Int(load(int16_t{}));
    case ScalarType::kInt32: return Scalar::Int(load(int32_t{}));
    case ScalarType::kInt64: return Scalar::Int(load(int64_t{}));
    case ScalarType::kFloat16: return Scalar::Float(HalfToFloat(load(uint16_t{})));
    case ScalarType::kBFloat16: return Scalar::Float(BFloat16ToFloat(load(uint16_t{})));
    case ScalarType::kFloat32: return Scalar::Float(load(float{}));
    case ScalarType::kFloat64: return Scalar::Float(load(double{}));
    case ScalarType::kFloat8_e4m3fn: return Scalar::Float(Float8E4M3FNToFloat(load(uint8_t{})));
    case ScalarType::kFloat8_e5m2: return Scalar::Float(Float8E5M2ToFloat(load(uint8_t{})));
  }
  return InternalErr(absl::StrCat("host data has an unknown dtype ", static_cast<int>(meta.dtype)));
}

std::vector<double> HostData::ToDoubles() const {
  std::vector<double> out;
  const int64_t n = numel();
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    absl::StatusOr<Scalar> s = At(i);
    out.push_back(s.ok() ? s->to_double() : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

// ---------------------------------------------------------------- Tensor

absl::StatusOr<int64_t> Tensor::size(int64_t d) const {
  absl::StatusOr<int64_t> w = WrapDim("size", d, dim());
  if (!w.ok()) return IndexErr(w.status().message());
  return sizes()[*w];
}

absl::StatusOr<int64_t> Tensor::stride(int64_t d) const {
  absl::StatusOr<int64_t> w = WrapDim("stride", d, dim());
  if (!w.ok()) return IndexErr(w.status().message());
  return strides()[*w];
}

absl::StatusOr<HostData> Tensor::Fetch() const {
  if (!defined()) return RuntimeErr("Fetch: the tensor is undefined");
  if (is_meta()) {
    if (MetaDeviceForced()) {  // tensord check: every device was redirected to meta on purpose
      return NotImplementedErr(
          "cannot read the data of a meta tensor: `tensord check` runs every tensor on meta (shapes, strides and "
          "dtypes, no values), so reading the values of a tensor (numpy(), tolist(), printing its values) cannot be "
          "checked; only item() of a one-element tensor gives a placeholder. Skip such reads under the check, e.g. "
          "`if os.environ.get(\"TENSORD_NO_DAEMON\") != \"1\":`");
    }
    return NotImplementedErr(
        "cannot read the data of a meta tensor: a meta tensor has only metadata (shape, strides, dtype), and "
        "reading values depends on data it does not have; create it on a real device instead, e.g. "
        "empty_like(t, device=\"cpu\")");
  }
  if (session() == nullptr) return InternalErr("a non-meta tensor without a session");
  // The size the client predicts (data-dependent outputs were described, so
  // it is exact); the daemon streams instead if it does not fit. A size
  // that cannot be counted is refused here, before anything is sent.
  TD_ASSIGN_OR_RETURN(const int64_t expected, meta().DenseBytes("fetch"));
  return session()->Fetch(handle(), static_cast<uint64_t>(expected));
}

absl::StatusOr<Scalar> Tensor::Item() const {
  if (!defined()) return RuntimeErr("item: the tensor is undefined");
  if (is_meta()) {
    return NotImplementedErr(
        "item: cannot run on a meta tensor: its output depends on data, and a meta tensor has none");
  }
  if (numel() != 1) {
    return RuntimeErr(absl::StrCat("a Tensor with ", numel(), " elements cannot be converted to Scalar"));
  }
  TD_ASSIGN_OR_RETURN(HostData d, Fetch());
  return d.At(0);
}

absl::StatusOr<TensorMeta> Tensor::DaemonMeta() const {
  if (!defined()) return RuntimeErr("DaemonMeta: the tensor is undefined");
  if (is_meta()) return NotImplementedErr("DaemonMeta: a meta tensor lives in no daemon");
  return session()->Describe(handle());
}

absl::StatusOr<uint64_t> Tensor::DaemonStorageId() const {
  if (!defined()) return RuntimeErr("DaemonStorageId: the tensor is undefined");
  if (is_meta()) return NotImplementedErr("DaemonStorageId: a meta tensor lives in no daemon");
  uint64_t id = 0;
  TD_RETURN_IF_ERROR(session()->Describe(handle(), &id).status());
  return id;
}

std::string Tensor::ToString() const {
  if (!defined()) return "tensor(undefined)";
  return absl::StrCat("tensor(handle=", handle(), ", sizes=", ShapeToString(sizes()), ", dtype=", DtypeName(dtype()),
                      ", device=", device().ToString(), ")");
}

}  // namespace tensord::client
