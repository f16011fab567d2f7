// The shorthands of ops.h: tensors from host data, factories and a few
// common ops, each one call of the op table.
#include "tensord/client/ops.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops_internal.h"
#include "tensord/meta/errors.h"

namespace tensord::client {

using internal::Args;

// ---------------------------------------------------------------- host data

absl::StatusOr<Tensor> FromBlob(const void* data, size_t nbytes, Shape sizes, ScalarType dtype,
                                std::optional<Device> device, CallSite site) {
  TD_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(sizes));
  const int64_t expect = numel * ItemSize(dtype);
  if (numel > (int64_t{1} << 62) / 8 || static_cast<int64_t>(nbytes) != expect) {
    return RuntimeErr(absl::StrCat("from_blob: ", nbytes, " bytes given for a tensor of sizes ", ShapeToString(sizes),
                                   " and dtype ", DtypeName(dtype), " (", expect, " bytes expected)"));
  }
  const Device dev = device ? *device : DefaultDevice().value_or(kCPU);
  TensorMeta meta = TensorMeta::Contiguous(std::move(sizes), dtype, dev);
  if (dev.is_meta()) {
    std::vector<TensorMeta> m;
    m.push_back(std::move(meta));
    return std::move(internal::MakeMetaTensors(absl::MakeSpan(m))[0]);
  }
  site.Resolve();
  TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, CurrentSession());
  return s->Upload(data, nbytes, meta, site);
}

absl::StatusOr<Tensor> FromVector(const std::vector<float>& v, Shape sizes, std::optional<Device> device,
                                  CallSite site) {
  return FromBlob(v.data(), v.size() * sizeof(float), std::move(sizes), ScalarType::kFloat32, device, std::move(site));
}

absl::StatusOr<Tensor> FromVector(const std::vector<int64_t>& v, Shape sizes, std::optional<Device> device,
                                  CallSite site) {
  return FromBlob(v.data(), v.size() * sizeof(int64_t), std::move(sizes), ScalarType::kInt64, device,
                  std::move(site));
}

// ---------------------------------------------------------------- helpers

absl::StatusOr<Tensor> Zeros(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("zeros", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Ones(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("ones", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Randn(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("randn", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Arange(Scalar end, std::optional<ScalarType> dtype, std::optional<Device> device,
                              CallSite site) {
  return Call1("arange", {end}, {{"dtype", dtype ? Arg(*dtype) : Arg()}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("add.Tensor", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("mul.Tensor", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("matmul", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> T(const Tensor& a, CallSite site) { return Call1("t", Args(a), {}, CallMode::kAny, std::move(site)); }
absl::StatusOr<Tensor> Sum(const Tensor& a, std::optional<std::vector<int64_t>> dim, bool keepdim, CallSite site) {
  return Call1("sum", {a, dim ? Arg(*dim) : Arg(), keepdim}, {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Reshape(const Tensor& a, Shape shape, CallSite site) {
  return Call1("reshape", {a, std::move(shape)}, {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> To(const Tensor& a, ScalarType dtype, CallSite site) {
  return Call1("to.dtype", Args(a, dtype), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> To(const Tensor& a, Device device, CallSite site) {
  return Call1("to.device", Args(a, device), {}, CallMode::kAny, std::move(site));
}

absl::StatusOr<Tensor> FloorDivide(const Tensor& a, const Arg& b, CallSite site) {
  return Call1("floor_divide", Args(a, b), {}, CallMode::kAny, std::move(site));
}

}  // namespace tensord::client
