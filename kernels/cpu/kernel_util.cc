// Shared kernel plumbing: call access, temporaries, copy-with-conversion
// (see kernel_util.h).
#include "kernel_util.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensord/meta/op_table.h"

namespace tensord::cpu {
namespace {

// A non-null address for empty tensors whose storage pointer is null, so that
// pointer arithmetic on them stays defined.
alignas(16) char g_empty_storage[16];

}  // namespace

absl::Status CheckContext(const KernelContext& ctx, int num_outputs) {
  TD_INTERNAL_CHECK(ctx.op != nullptr, "kernel called without an op");
  TD_INTERNAL_CHECK(ctx.args.size() == ctx.op->schema.arguments.size(), ctx.op->full_name(),
                    ": got ", ctx.args.size(), " arguments, schema has ",
                    ctx.op->schema.arguments.size());
  if (num_outputs >= 0) {
    TD_INTERNAL_CHECK(ctx.outputs.size() == static_cast<size_t>(num_outputs), ctx.op->full_name(),
                      ": got ", ctx.outputs.size(), " outputs, expected ", num_outputs);
    for (const TensorRef& o : ctx.outputs) {
      TD_INTERNAL_CHECK(o.meta != nullptr, ctx.op->full_name(), ": output without metadata");
      TD_INTERNAL_CHECK(o.base != nullptr || o.meta->numel() == 0, ctx.op->full_name(),
                        ": output without storage");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorRef> InputTensorOf(const KernelContext& ctx, const TensorMeta* m) {
  TD_INTERNAL_CHECK(m != nullptr, "null tensor argument");
  char* base = ctx.input_base ? ctx.input_base(m) : nullptr;
  if (base == nullptr) {
    TD_INTERNAL_CHECK(m->numel() == 0, "no storage for input ", m->ToString());
    base = g_empty_storage;
  }
  return TensorRef{base, m};
}

absl::StatusOr<TensorRef> InputTensor(const KernelContext& ctx, size_t i) {
  TD_INTERNAL_CHECK(i < ctx.args.size(), "argument ", i, " out of range");
  TD_INTERNAL_CHECK(ctx.args[i].is_tensor(), "argument ", i, " is not a tensor");
  return InputTensorOf(ctx, ctx.args[i].tensor_ptr());
}

std::optional<Scalar> OptionalScalar(const KernelContext& ctx, size_t i) {
  if (i >= ctx.args.size() || ctx.args[i].is_none()) return std::nullopt;
  return ctx.args[i].scalar();
}

Shape IntList(const Value& v) {
  if (v.kind() == Value::Kind::kInt) return {v.to_int()};
  return v.int_list();
}

absl::Status ExpectOutputSizes(absl::string_view op, const TensorRef& out,
                               absl::Span<const int64_t> sizes) {
  if (absl::Span<const int64_t>(out.meta->sizes) != sizes) {
    return InternalErr(absl::StrCat("internal: ", op, ": output has sizes ",
                                    ShapeToString(out.meta->sizes), ", the kernel computes ",
                                    ShapeToString(sizes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<char>> AllocateScratch(absl::string_view op, int64_t bytes) {
  if (bytes < 0) return InternalErr(absl::StrCat(op, ": negative scratch size ", bytes));
  if (ScratchAllocator* a = CurrentScratchAllocator(); a != nullptr) return a->Allocate(bytes);
  std::shared_ptr<char> p(new (std::nothrow) char[bytes == 0 ? 1 : static_cast<size_t>(bytes)],
                          std::default_delete<char[]>());
  if (!p) return OutOfMemoryErr(absl::StrCat(op, ": cannot allocate ", bytes, " bytes of scratch"));
  return p;
}

absl::StatusOr<std::shared_ptr<char>> AllocateScratchArray(absl::string_view op, int64_t count, int64_t elem_bytes) {
  TD_ASSIGN_OR_RETURN(int64_t bytes, CheckedBytes(absl::StrCat(op, ": scratch"), count, elem_bytes));
  return AllocateScratch(op, bytes);
}

absl::StatusOr<std::unique_ptr<TempTensor>> TempTensor::Make(Shape sizes, ScalarType dtype) {
  TD_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(sizes));
  const int64_t item = ItemSize(dtype);
  if (numel > (int64_t{1} << 62) / item) {
    return OutOfMemoryErr(absl::StrCat("cannot allocate a temporary of ", numel, " elements"));
  }
  auto t = std::unique_ptr<TempTensor>(new TempTensor());
  TD_ASSIGN_OR_RETURN(t->buf_, AllocateScratch("temporary", numel * item));
  t->meta_ = TensorMeta::Contiguous(std::move(sizes), dtype, kCPU);
  return t;
}

absl::StatusOr<TensorRef> AsDtype(const TensorRef& t, ScalarType dtype,
                                  std::unique_ptr<TempTensor>& holder) {
  if (t.meta->dtype == dtype) return t;
  TD_ASSIGN_OR_RETURN(holder, TempTensor::Make(t.meta->sizes, dtype));
  TD_RETURN_IF_ERROR(CopyConvert(holder->ref(), t));
  return holder->ref();
}

absl::StatusOr<TensorRef> AsContiguous(const TensorRef& t, std::unique_ptr<TempTensor>& holder) {
  if (t.meta->is_contiguous()) return t;
  TD_ASSIGN_OR_RETURN(holder, TempTensor::Make(t.meta->sizes, t.meta->dtype));
  TD_RETURN_IF_ERROR(CopyConvert(holder->ref(), t));
  return holder->ref();
}

TensorMeta ViewMeta(const TensorMeta& base, Shape sizes, Shape strides, int64_t storage_offset) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = storage_offset;
  m.dtype = base.dtype;
  m.device = base.device;
  return m;
}

// ---- copies -------------------------------------------------------------------

namespace {

template <typename U>
void CopySameRun(char* d, const char* s, int64_t ds, int64_t ss, int64_t n) {
  constexpr int64_t kSize = sizeof(U);
  if (ds == kSize && ss == kSize) {
    std::memcpy(d, s, static_cast<size_t>(n * kSize));
  } else if (ds == kSize && ss == 0) {
    U v;
    std::memcpy(&v, s, kSize);
    U* dp = reinterpret_cast<U*>(d);
    for (int64_t i = 0; i < n; ++i) dp[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds, s + i * ss, kSize);
  }
}

template <typename D, typename S>
void ConvertRun(char* d, const char* s, int64_t ds, int64_t ss, int64_t n) {
  if (ds == sizeof(D) && ss == sizeof(S)) {
    for (int64_t i = 0; i < n; ++i) {
      Store<D>(d + i * static_cast<int64_t>(sizeof(D)),
               ConvertValue<D, S>(Load<S>(s + i * static_cast<int64_t>(sizeof(S)))));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      Store<D>(d + i * ds, ConvertValue<D, S>(Load<S>(s + i * ss)));
    }
  }
}

}  // namespace

absl::Status CopyConvert(const TensorRef& dst, const TensorRef& src) {
  StridedLoop loop(dst.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(dst));
  TD_RETURN_IF_ERROR(loop.AddTensor(src));
  loop.Build();
  if (loop.numel() == 0) return absl::OkStatus();
  if (dst.meta->dtype == src.meta->dtype) {
    // bool is copied as bytes, normalised to 0/1 so later loads stay exact.
    if (dst.meta->dtype == ScalarType::kBool) {
      loop.Run([](char* const* p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) p[0][i * s[0]] = p[1][i * s[1]] != 0 ? 1 : 0;
      });
      return absl::OkStatus();
    }
    return DispatchBySize(dst.meta->itemsize(), [&](auto tag) -> absl::Status {
      using U = typename decltype(tag)::type;
      loop.Run([](char* const* p, const int64_t* s, int64_t n) {
        CopySameRun<U>(p[0], p[1], s[0], s[1], n);
      });
      return absl::OkStatus();
    });
  }
  return Dispatch<kSetAll>(dst.meta->dtype, "copy_", [&](auto dtag) -> absl::Status {
    using D = typename decltype(dtag)::type;
    return Dispatch<kSetAll>(src.meta->dtype, "copy_", [&](auto stag) -> absl::Status {
      using S = typename decltype(stag)::type;
      loop.Run([](char* const* p, const int64_t* s, int64_t n) {
        ConvertRun<D, S>(p[0], p[1], s[0], s[1], n);
      });
      return absl::OkStatus();
    });
  });
}

absl::Status CopyReshape(const TensorRef& dst, const TensorRef& src) {
  const int64_t n = dst.meta->numel();
  TD_INTERNAL_CHECK(n == src.meta->numel(), "reshape copy of ", ShapeToString(src.meta->sizes),
                    " into ", ShapeToString(dst.meta->sizes));
  if (dst.meta->sizes == src.meta->sizes) return CopyConvert(dst, src);
  if (n == 0) return absl::OkStatus();
  if (dst.meta->is_contiguous()) {
    TensorMeta view = ViewMeta(*dst.meta, src.meta->sizes, ContiguousStrides(src.meta->sizes),
                               dst.meta->storage_offset);
    return CopyConvert(TensorRef{dst.base, &view}, src);
  }
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(TensorRef s, AsContiguous(src, holder));
  TensorMeta view = ViewMeta(*s.meta, dst.meta->sizes, ContiguousStrides(dst.meta->sizes),
                             s.meta->storage_offset);
  return CopyConvert(dst, TensorRef{s.base, &view});
}

absl::Status Fill(const TensorRef& dst, const Scalar& value) {
  StridedLoop loop(dst.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(dst));
  loop.Build();
  if (loop.numel() == 0) return absl::OkStatus();
  alignas(8) char pattern[8] = {};
  TD_RETURN_IF_ERROR(Dispatch<kSetAll>(dst.meta->dtype, "fill_", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Store<T>(pattern, ScalarTo<T>(value));
    return absl::OkStatus();
  }));
  return DispatchBySize(dst.meta->itemsize(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U v;
    std::memcpy(&v, pattern, sizeof(U));
    loop.Run([v](char* const* p, const int64_t* s, int64_t n) {
      if (s[0] == static_cast<int64_t>(sizeof(U))) {
        U* d = reinterpret_cast<U*>(p[0]);
        for (int64_t i = 0; i < n; ++i) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], &v, sizeof(U));
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<InPlacePlan> PlanInPlace(const KernelContext& ctx) {
  const TensorRef& out = ctx.outputs[0];
  // The out-of-place twin: the same full name without the base name's '_'.
  std::string name = ctx.op->schema.name;
  TD_INTERNAL_CHECK(!name.empty() && name.back() == '_', ctx.op->full_name(), " is not an in-place op");
  name.pop_back();
  const std::string full =
      ctx.op->schema.overload.empty() ? name : absl::StrCat(name, ".", ctx.op->schema.overload);
  const OpEntry* twin = OpTable::Get().Find(full);
  TD_INTERNAL_CHECK(twin != nullptr, ctx.op->full_name(), " has no out-of-place op ", full);
  TD_ASSIGN_OR_RETURN(MetaResult r, twin->meta(ctx.op->name(), ctx.args));
  TD_INTERNAL_CHECK(r.outputs.size() == 1, full, ": expected one output");
  InPlacePlan plan;
  plan.result = std::move(r.outputs[0]);
  plan.direct = plan.result.dtype == out.meta->dtype && plan.result.sizes == out.meta->sizes;
  for (size_t i = 0; i < ctx.args.size() && plan.direct; ++i) {
    if (!ctx.args[i].is_tensor()) continue;
    const TensorMeta* m = ctx.args[i].tensor_ptr();
    const char* b = ctx.input_base ? ctx.input_base(m) : nullptr;
    // An input in out's storage is safe only when it is exactly out (each
    // element is read before the same element is written, by one thread).
    if (b != nullptr && b == out.base && !(*m == *out.meta)) plan.direct = false;
  }
  return plan;
}

absl::Status RunInPlace(KernelContext& ctx, KernelFn base) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  TD_ASSIGN_OR_RETURN(const InPlacePlan plan, PlanInPlace(ctx));
  if (plan.direct) return base(ctx);
  TD_ASSIGN_OR_RETURN(std::unique_ptr<TempTensor> tmp, TempTensor::Make(plan.result.sizes, plan.result.dtype));
  KernelContext inner = ctx;
  inner.outputs[0] = tmp->ref();
  TD_RETURN_IF_ERROR(base(inner));
  return CopyConvert(out, tmp->ref());
}

bool GemmMatrixLayout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, bool* transposed, int64_t* ld) {
  // Not transposed: element (i, j) at i * ld + j.
  if (cols == 1 || s_col == 1) {
    const int64_t l = rows == 1 ? std::max<int64_t>(1, cols) : s_row;
    if (l >= std::max<int64_t>(1, cols) && l <= INT_MAX) {
      *transposed = false;
      *ld = l;
      return true;
    }
  }
  // Transposed: element (i, j) at j * ld + i.
  if (rows == 1 || s_row == 1) {
    const int64_t l = cols == 1 ? std::max<int64_t>(1, rows) : s_col;
    if (l >= std::max<int64_t>(1, rows) && l <= INT_MAX) {
      *transposed = true;
      *ld = l;
      return true;
    }
  }
  return false;
}

}  // namespace tensord::cpu
