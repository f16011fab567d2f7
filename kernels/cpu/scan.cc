// Scans along a dim: cumsum, cumprod. Outputs arrive allocated with the
// meta function's sizes and strides (kernels never decide a shape): PyTorch
// 1.13 gives a contiguous output of dtype= or, by default, the input's dtype
// with integers and bool widened to int64. The input is converted to the
// output dtype first; floats accumulate in double and integers in int64
// (wrapping), as PyTorch's CPU accumulation types.
#include <cstdlib>
#include <type_traits>

#include "kernel_util.h"
#include "reduce_args.h"

namespace tensord::cpu {
namespace {

template <bool kProd>
absl::Status CumScan(KernelContext& ctx) {
  const char* name = kProd ? "cumprod" : "cumsum";
  TD_ASSIGN_OR_RETURN(const ScanArgs a, ReadScan(ctx, name));
  const TensorRef& self = a.self;
  const int64_t dim = a.dim;
  const TensorRef& out = ctx.outputs[0];
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(TensorRef in, AsDtype(self, out.meta->dtype, holder));
  // A 0-dim tensor scans as a 1-element 1-D one.
  TensorMeta in_view, out_view;
  if (in.meta->dim() == 0) {
    in_view = ViewMeta(*in.meta, {1}, {1}, in.meta->storage_offset);
    out_view = ViewMeta(*out.meta, {1}, {1}, out.meta->storage_offset);
  } else {
    in_view = *in.meta;
    out_view = *out.meta;
  }
  const int64_t n = in_view.sizes[dim];
  const int64_t in_step = in_view.strides[dim] * in_view.itemsize();
  const int64_t out_step = out_view.strides[dim] * out_view.itemsize();
  Shape outer = in_view.sizes;
  outer[dim] = 1;
  Shape in_bytes(outer.size()), out_bytes(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) {
    in_bytes[i] = in_view.strides[i] * in_view.itemsize();
    out_bytes[i] = out_view.strides[i] * out_view.itemsize();
  }
  if (n == 0) return absl::OkStatus();
  // The scanned dim is "inner" when no other non-trivial dim of the input has
  // a smaller stride: then each slice is scanned in turn; otherwise whole
  // planes are swept per step k with one accumulator per outer position (in
  // memory order, so an outer-dim scan streams through memory).
  bool inner = true;
  for (size_t i = 0; i < outer.size(); ++i) {
    if (static_cast<int64_t>(i) != dim && outer[i] > 1 && std::llabs(in_bytes[i]) < std::llabs(in_step)) inner = false;
  }
  int64_t outer_numel = 1;
  for (int64_t v : outer) outer_numel *= v;
  return Dispatch<kSetInts | kSetFloats>(out_view.dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<kIsFloat<T>, double, int64_t>;
    auto step = [](Acc acc, Acc v) {
      if constexpr (kProd) {
        return WrapMul<Acc>(acc, v);
      } else {
        return WrapAdd<Acc>(acc, v);
      }
    };
    if (inner || outer_numel == 1) {
      StridedLoop loop(outer);
      loop.Add(in.base + in_view.storage_offset * in_view.itemsize(), in_bytes);
      loop.Add(out.base + out_view.storage_offset * out_view.itemsize(), out_bytes);
      loop.Build();
      loop.Run([&](char* const* p, const int64_t* s, int64_t m) {
        for (int64_t j = 0; j < m; ++j) {
          const char* x = p[0] + j * s[0];
          char* y = p[1] + j * s[1];
          Acc acc = kProd ? Acc(1) : Acc(0);
          for (int64_t k = 0; k < n; ++k) {
            acc = step(acc, static_cast<Acc>(Load<T>(x + k * in_step)));
            Store<T>(y + k * out_step, static_cast<ComputeT<T>>(acc));
          }
        }
      });
      return absl::OkStatus();
    }
    TD_ASSIGN_OR_RETURN(auto acc_buf, TempTensor::Make({outer_numel}, ScalarTypeOf<Acc>()));
    Acc* acc = reinterpret_cast<Acc*>(acc_buf->data());
    for (int64_t i = 0; i < outer_numel; ++i) acc[i] = kProd ? Acc(1) : Acc(0);
    Shape acc_bytes = ContiguousStrides(outer);
    for (int64_t& b : acc_bytes) b *= static_cast<int64_t>(sizeof(Acc));
    for (int64_t k = 0; k < n; ++k) {
      StridedLoop loop(outer);
      loop.Add(in.base + in_view.storage_offset * in_view.itemsize() + k * in_step, in_bytes);
      loop.Add(out.base + out_view.storage_offset * out_view.itemsize() + k * out_step, out_bytes);
      loop.Add(reinterpret_cast<char*>(acc), acc_bytes);
      loop.Build();
      loop.Run([&](char* const* p, const int64_t* s, int64_t m) {
        for (int64_t j = 0; j < m; ++j) {
          Acc* a = reinterpret_cast<Acc*>(p[2] + j * s[2]);
          *a = step(*a, static_cast<Acc>(Load<T>(p[0] + j * s[0])));
          Store<T>(p[1] + j * s[1], static_cast<ComputeT<T>>(*a));
        }
      });
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterScanKernels(KernelRegistry& r) {
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "cumsum", CumScan<false>));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "cumprod", CumScan<true>));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
