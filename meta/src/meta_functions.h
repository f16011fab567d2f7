// Internal: the meta functions the op table (ops.cc) points at. Each takes
// the call's arguments bound in schema order (kinds already validated) and
// returns the outputs' metadata and aliasing. Shared helpers (broadcasting,
// promotion, elementwise output layout) live in meta/include/tensord/meta/.
#ifndef TENSORD_META_SRC_META_FUNCTIONS_H_
#define TENSORD_META_SRC_META_FUNCTIONS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/op_table.h"

namespace tensord::meta {

absl::StatusOr<MetaResult> AmaxAmin(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Arange(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ArangeStart(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ArgMaxMin(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryArith(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryArithScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryBitwise(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryBitwiseScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryCompare(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryCompareScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinarySub(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinarySubScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryTrueDiv(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryTrueDivScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Bmm(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Cat(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Clamp(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Clone(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Contiguous(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> DataDependent(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Empty(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> EmptyLike(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Expand(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Eye(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Flatten(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Full(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Gather(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Index(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> IndexSelect(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaskedFill(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Matmul(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxMinAll(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxMinDim(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Mm(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Narrow(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Permute(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> PowScalarSelf(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Reshape(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Select(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Slice(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Squeeze(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SqueezeDim(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Stack(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SumMean(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> T(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ToDevice(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ToDtype(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Topk(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Transpose(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryBool(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryFloat(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryIntegral(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryNeg(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnarySame(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Unsqueeze(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> View(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Where(absl::string_view op, absl::Span<const Value> args);

}  // namespace tensord::meta

#endif  // TENSORD_META_SRC_META_FUNCTIONS_H_
