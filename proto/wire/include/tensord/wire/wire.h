// tensord/wire/wire.h — conversions between the wire messages
// (tensord/v1/tensord.proto) and meta's types, shared by server/ and client/
// so that both sides encode and validate identically.
//
// Layering: `wire` depends on `proto` and `meta`; server/ and client/ depend
// on it. proto/ itself still depends on nothing.
#ifndef TENSORD_WIRE_WIRE_H_
#define TENSORD_WIRE_WIRE_H_

#include <cstdint>
#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"
#include "tensord/v1/tensord.pb.h"

namespace tensord::wire {

// 2: OpCall.call_site_id (interned call sites; a version-1 daemon would
// drop the sites of a version-2 client from its errors).
// 3: Sync.peek and Ack.errors_pending (a version-2 daemon would report the
// errors in a peek's reply, which a version-3 client does not raise there).
// 4: the MemoryStats request (a version-3 daemon would not answer it, and
// the client would wait for the reply forever).
// Not bumped for fields a peer may leave unset with no harm (the handshake
// wants equal versions, so a bump costs every mixed pair its connection):
// DeviceInfo's free memory and capability, OpenSessionResponse's CUDA
// versions and cuda_unavailable_reason (a client names no reason when it is
// empty), MemoryStats.empty_cache (an older daemon answers without emptying).
inline constexpr uint32_t kProtocolVersion = 4;
// The most call sites one stream may intern (OpCall.call_site_id).
inline constexpr uint32_t kMaxCallSiteIds = 65536;

void ToProto(const TensorMeta& m, v1::TensorMetaProto* out);
// Decodes and validates (TensorMeta::Validate) a peer's metadata.
absl::StatusOr<TensorMeta> FromProto(const v1::TensorMetaProto& p, absl::string_view what);

// Encodes one bound argument. `handle_of` maps a tensor argument's meta
// pointer to its handle (0 for None inside Tensor?[]); it is only called
// during the call (a FunctionRef: no std::function is built per argument).
absl::Status EncodeValue(const Value& v, absl::FunctionRef<uint64_t(const TensorMeta*)> handle_of, v1::Value* out);

// Decodes one argument according to its schema entry (a `Scalar` argument
// becomes Value(Scalar), `int[N]` accepts one int, ...). Tensor handles are
// resolved by `lookup`, whose error is returned as is. Wrong kinds are
// TypeErr naming the op and argument; an out-of-range dtype is RuntimeErr.
absl::StatusOr<Value> DecodeValue(absl::string_view op, const Argument& arg, const v1::Value& v,
                                  const std::function<absl::StatusOr<const TensorMeta*>(uint64_t)>& lookup);

// `text` as well-formed UTF-8: each byte of an ill-formed sequence becomes
// U+FFFD (what a proto3 string field must hold).
std::string ValidUtf8(absl::string_view text);

// An error for the wire; its texts made valid UTF-8 (ValidUtf8).
void ToProto(const absl::Status& s, absl::string_view op, uint64_t call_id, absl::string_view call_site,
             v1::Error* out);
// Rebuilds the Status (same ErrorKind), message prefixed by op/call site when
// present: "add.Tensor (call 12 at knn.py:30): <message>".
absl::Status FromProto(const v1::Error& e);

}  // namespace tensord::wire

#endif  // TENSORD_WIRE_WIRE_H_
