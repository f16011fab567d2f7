// Data chunks as gRPC byte buffers: a small slice with the protobuf encoding
// of everything but the bytes, then the caller's slice of bytes.
#include "tensord/wire/data_frame.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "tensord/wire/copy.h"

namespace tensord::wire {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

size_t LengthDelimitedSize(int field, size_t payload) {
  return CodedOutputStream::VarintSize32(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) +
         CodedOutputStream::VarintSize64(payload) + payload;
}

void WriteLengthDelimitedHeader(CodedOutputStream* out, int field, size_t payload) {
  out->WriteTag(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  out->WriteVarint64(payload);
}

// `outer` field numbers from the outermost message inwards, then the
// innermost message's serialized other fields and its bytes field `data_field`.
template <size_t N>
grpc::ByteBuffer Encode(const int (&outer)[N], const google::protobuf::MessageLite& head, int data_field,
                        grpc::Slice data) {
  // Sizes from the inside out: the innermost message is head + data field.
  size_t sizes[N + 1];
  sizes[N] = head.ByteSizeLong() + LengthDelimitedSize(data_field, data.size());
  for (size_t i = N; i > 0; --i) sizes[i - 1] = LengthDelimitedSize(outer[i - 1], sizes[i]);
  std::string prefix;
  {
    google::protobuf::io::StringOutputStream raw(&prefix);
    CodedOutputStream out(&raw);
    for (size_t i = 0; i < N; ++i) WriteLengthDelimitedHeader(&out, outer[i], sizes[i + 1]);
    head.SerializeWithCachedSizes(&out);
    WriteLengthDelimitedHeader(&out, data_field, data.size());
  }
  grpc::Slice slices[2] = {grpc::Slice(prefix), std::move(data)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace

grpc::Slice BorrowedSlices::Borrow(const void* data, size_t n) {
  {
    absl::MutexLock l(&mu_);
    ++held_;
  }
  // gRPC's slice API takes a mutable pointer; it only reads through it.
  return grpc::Slice(const_cast<void*>(data), n, &BorrowedSlices::Released, this);
}

void BorrowedSlices::Released(void* self) {
  BorrowedSlices* b = static_cast<BorrowedSlices*>(self);
  absl::MutexLock l(&b->mu_);
  --b->held_;
}

void BorrowedSlices::WaitUntilReleased() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(+[](int* held) { return *held == 0; }, &held_));
}

grpc::ByteBuffer EncodeUploadChunk(const v1::Upload& head, grpc::Slice data) {
  static constexpr int kPath[] = {v1::ClientMessage::kRequestsFieldNumber, v1::Request::kUploadFieldNumber};
  return Encode(kPath, head, v1::Upload::kDataFieldNumber, std::move(data));
}

grpc::ByteBuffer EncodeFetchChunk(const v1::FetchData& head, grpc::Slice data) {
  static constexpr int kPath[] = {v1::ServerMessage::kDataFieldNumber};
  return Encode(kPath, head, v1::FetchData::kDataFieldNumber, std::move(data));
}

namespace {

// Copies the bytes of `bb` from `offset` to its end into `dst` with
// non-temporal stores, slice by slice. False if gRPC cannot list the slices.
bool CopySuffix(const grpc::ByteBuffer& bb, size_t offset, char* dst) {
  std::vector<grpc::Slice> slices;
  if (!bb.Dump(&slices).ok()) return false;
  for (const grpc::Slice& s : slices) {
    const size_t size = s.size();
    if (offset >= size) {
      offset -= size;
      continue;
    }
    const size_t n = size - offset;
    NonTemporalCopy(dst, reinterpret_cast<const char*>(s.begin()) + offset, n);
    dst += n;
    offset = 0;
  }
  return true;
}

// What reading a data chunk's head found.
enum class HeadRead {
  kOk,          // the head is parsed; `in` is at the data
  kOtherShape,  // not `outer` around an Inner whose data comes last (or, in a prefix, not all there)
  kMalformed,   // a field of the head does not parse
};

// Reads from `in` (the start of a `total`-byte message) `outer` (field
// numbers from the outermost message inwards, each a single
// length-delimited field spanning the rest of the message) around an
// `Inner` whose bytes field `data_field` comes last; parses the Inner's
// other fields into inner_of() (*head) and its data's size into *n.
template <typename Inner, size_t N>
HeadRead ReadHead(google::protobuf::io::CodedInputStream& in, size_t total, const int (&outer)[N], int data_field,
                  const std::function<Inner*()>& inner_of, Inner** head, uint32_t* n) {
  for (int field : outer) {
    uint64_t len = 0;
    if (in.ReadTag() != WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED) ||
        !in.ReadVarint64(&len) || static_cast<uint64_t>(in.CurrentPosition()) + len != total) {
      return HeadRead::kOtherShape;
    }
  }
  std::string head_bytes;  // the inner message's other fields, as they came
  google::protobuf::io::StringOutputStream raw(&head_bytes);
  CodedOutputStream out(&raw);
  const uint32_t data_tag = WireFormatLite::MakeTag(data_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  // ReadTag gives 0 at the end of the input.
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag != data_tag) {
      if (!WireFormatLite::SkipField(&in, tag, &out)) return HeadRead::kMalformed;
      continue;
    }
    // Read as 64 bits: ReadVarint32 would drop the high bits of an overlong
    // length that protobuf's own parser refuses.
    uint64_t len = 0;
    if (!in.ReadVarint64(&len) || len > total || static_cast<uint64_t>(in.CurrentPosition()) + len != total) {
      return HeadRead::kOtherShape;
    }
    *n = static_cast<uint32_t>(len);  // total fits in an int (the callers check)
    out.Trim();
    *head = inner_of();
    return (*head)->ParseFromString(head_bytes) ? HeadRead::kOk : HeadRead::kMalformed;
  }
  return HeadRead::kOtherShape;
}

// Parses `bb` into `msg` when it has ReadHead's shape; the data is copied to
// place(inner, n) unless that is nullptr. Returns nullopt when `bb` does not
// have that shape (nothing is placed then), else whether it parsed.
template <typename Inner, size_t N>
std::optional<bool> ParsePlaced(grpc::ByteBuffer* bb, const int (&outer)[N], int data_field,
                                const std::function<Inner*()>& inner_of,
                                absl::FunctionRef<Placement(const Inner& head, size_t n)> place) {
  const size_t total = bb->Length();
  if (total < kMinBorrowedBytes || total > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  grpc::ProtoBufferReader reader(bb);
  if (!reader.status().ok()) return false;
  google::protobuf::io::CodedInputStream in(&reader);
  Inner* head = nullptr;
  uint32_t n = 0;
  switch (ReadHead(in, total, outer, data_field, inner_of, &head, &n)) {
    case HeadRead::kOtherShape:
      return std::nullopt;
    case HeadRead::kMalformed:
      return false;
    case HeadRead::kOk:
      break;
  }
  const Placement dst = place(*head, n);
  if (dst.data == nullptr) return in.ReadString(head->mutable_data(), n);
  if (dst.transfer_bytes < kNonTemporalCopyMinBytes) return in.ReadRaw(dst.data, static_cast<int>(n));
  // A piece of a large transfer: straight from gRPC's slices with
  // non-temporal stores (tensord/wire/copy.h). The data is the last n bytes
  // of `bb`, as ReadHead checked.
  return CopySuffix(*bb, total - n, dst.data);
}

// ReadHead over the first `prefix_len` bytes of a `total`-byte message, for
// a receiver that has not read the rest (see ParseClientMessageHead): the
// data's offset and destination, or nullopt when the head is not all in the
// prefix, does not parse, or place(inner, n) gives no destination.
template <typename Inner, size_t N>
std::optional<DataDestination> ParseHead(const char* prefix, size_t prefix_len, size_t total, const int (&outer)[N],
                                         int data_field, const std::function<Inner*()>& inner_of,
                                         absl::FunctionRef<Placement(const Inner& head, size_t n)> place) {
  if (total < kMinBorrowedBytes || total > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      prefix_len > total) {
    return std::nullopt;
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(prefix), static_cast<int>(prefix_len));
  Inner* head = nullptr;
  uint32_t n = 0;
  if (ReadHead(in, total, outer, data_field, inner_of, &head, &n) != HeadRead::kOk) return std::nullopt;
  const Placement dst = place(*head, n);
  if (dst.data == nullptr) return std::nullopt;
  return DataDestination{static_cast<size_t>(in.CurrentPosition()), dst.data};
}

template <typename Message>
bool ParseWhole(grpc::ByteBuffer* bb, Message* msg) {
  msg->Clear();
  // A message in one slice (a small one, and every same-host stream
  // record) is parsed from its flat bytes: protobuf's array parser skips
  // the zero-copy stream's set-up and its buffer-boundary checks, a
  // visible share of a small round trip's cost.
  // Either way the buffer is emptied, as gRPC's Deserialize does.
  grpc::Slice slice;
  if (bb->TrySingleSlice(&slice).ok() && slice.size() <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    const bool ok = msg->ParseFromArray(slice.begin(), static_cast<int>(slice.size()));
    bb->Clear();
    return ok;
  }
  return grpc::SerializationTraits<Message>::Deserialize(bb, msg).ok();
}

}  // namespace

bool ParseServerMessage(grpc::ByteBuffer* bb, v1::ServerMessage* msg,
                        absl::FunctionRef<Placement(const v1::FetchData& head, size_t n)> place) {
  msg->Clear();
  static constexpr int kPath[] = {v1::ServerMessage::kDataFieldNumber};
  const std::optional<bool> r = ParsePlaced<v1::FetchData>(
      bb, kPath, v1::FetchData::kDataFieldNumber, [msg] { return msg->mutable_data(); }, place);
  // Not the fast path's shape: protobuf parses it (from the start).
  return r.has_value() ? *r : ParseWhole(bb, msg);
}

bool ParseClientMessage(grpc::ByteBuffer* bb, v1::ClientMessage* msg,
                        absl::FunctionRef<Placement(const v1::Upload& head, size_t n)> place) {
  msg->Clear();
  static constexpr int kPath[] = {v1::ClientMessage::kRequestsFieldNumber, v1::Request::kUploadFieldNumber};
  const std::optional<bool> r = ParsePlaced<v1::Upload>(
      bb, kPath, v1::Upload::kDataFieldNumber, [msg] { return msg->add_requests()->mutable_upload(); }, place);
  return r.has_value() ? *r : ParseWhole(bb, msg);
}

std::optional<DataDestination> ParseClientMessageHead(const char* prefix, size_t prefix_len, size_t total,
                                                      v1::ClientMessage* msg,
                                                      absl::FunctionRef<Placement(const v1::Upload& head, size_t n)> place) {
  msg->Clear();
  static constexpr int kPath[] = {v1::ClientMessage::kRequestsFieldNumber, v1::Request::kUploadFieldNumber};
  return ParseHead<v1::Upload>(
      prefix, prefix_len, total, kPath, v1::Upload::kDataFieldNumber,
      [msg] { return msg->add_requests()->mutable_upload(); }, place);
}

std::optional<DataDestination> ParseServerMessageHead(const char* prefix, size_t prefix_len, size_t total,
                                                      v1::ServerMessage* msg,
                                                      absl::FunctionRef<Placement(const v1::FetchData& head, size_t n)> place) {
  msg->Clear();
  static constexpr int kPath[] = {v1::ServerMessage::kDataFieldNumber};
  return ParseHead<v1::FetchData>(prefix, prefix_len, total, kPath, v1::FetchData::kDataFieldNumber,
                                  [msg] { return msg->mutable_data(); }, place);
}

namespace {

namespace pb = ::google::protobuf;
using WFL = pb::internal::WireFormatLite;

// The size of an empty message of each type reachable from a root type: what
// one more of them costs (sizeof the generated class). Built once per root
// and never freed (a handful of types).
class MessageSizes {
 public:
  static const MessageSizes& For(const pb::Descriptor* root) {
    static absl::Mutex mu;
    static auto* const by_root = new absl::flat_hash_map<const pb::Descriptor*, std::unique_ptr<MessageSizes>>();
    absl::MutexLock lock(&mu);
    std::unique_ptr<MessageSizes>& s = (*by_root)[root];
    if (s == nullptr) s.reset(new MessageSizes(root));
    return *s;
  }
  int64_t Of(const pb::Descriptor* d) const {
    auto it = bytes_.find(d);
    return it != bytes_.end() ? it->second : kUnknownType;
  }

 private:
  // A type outside the closure (never, for a generated root): a generous guess.
  static constexpr int64_t kUnknownType = 1024;
  explicit MessageSizes(const pb::Descriptor* root) {
    std::vector<const pb::Descriptor*> todo = {root};
    while (!todo.empty()) {
      const pb::Descriptor* d = todo.back();
      todo.pop_back();
      if (bytes_.contains(d)) continue;
      const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(d);
      bytes_[d] = prototype != nullptr ? static_cast<int64_t>(prototype->SpaceUsedLong()) : kUnknownType;
      for (int i = 0; i < d->field_count(); ++i) {
        if (d->field(i)->message_type() != nullptr) todo.push_back(d->field(i)->message_type());
      }
    }
  }
  absl::flat_hash_map<const pb::Descriptor*, int64_t> bytes_;
};

// What each kind of element costs beyond its encoding, at most (see
// DecodedExtraBytes): malloc's header and rounding of one allocation (a
// message parsed off an arena makes one per object); a pointer or scalar
// slot of a repeated field, doubled by its growth; a string object with
// its allocation and an arena's destructor record; an unknown field's
// record, with its share of the message's set of them.
constexpr int64_t kAllocationBytes = 32;
constexpr int64_t kSlotBytes = 16;
constexpr int64_t kStringBytes = 64 + kAllocationBytes;
constexpr int64_t kUnknownFieldBytes = 128 + kAllocationBytes;
constexpr int kMaxDepth = 100;  // protobuf's default recursion limit

bool WalkExtra(pb::io::CodedInputStream* in, const pb::Descriptor* type, const MessageSizes& sizes, int depth,
               int64_t* extra) {
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return in->ConsumedEntireMessage();  // else a tag 0 or a cut field: not an encoding
    const WFL::WireType wire_type = WFL::GetTagWireType(tag);
    const pb::FieldDescriptor* f = type->FindFieldByNumber(WFL::GetTagFieldNumber(tag));
    if (f != nullptr && wire_type != WFL::WireTypeForFieldType(static_cast<WFL::FieldType>(f->type())) &&
        !(f->is_packable() && wire_type == WFL::WIRETYPE_LENGTH_DELIMITED)) {
      f = nullptr;  // a known number with another wire type: kept as an unknown field
    }
    const bool repeated = f != nullptr && f->is_repeated();
    switch (wire_type) {
      case WFL::WIRETYPE_VARINT: {
        uint64_t v;
        if (!in->ReadVarint64(&v)) return false;
        *extra += f == nullptr ? kUnknownFieldBytes : repeated ? kSlotBytes : 0;
        break;
      }
      case WFL::WIRETYPE_FIXED64:
      case WFL::WIRETYPE_FIXED32: {
        if (!in->Skip(wire_type == WFL::WIRETYPE_FIXED64 ? 8 : 4)) return false;
        *extra += f == nullptr ? kUnknownFieldBytes : repeated ? kSlotBytes : 0;
        break;
      }
      case WFL::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t len;
        if (!in->ReadVarint32(&len) || len > static_cast<uint32_t>(std::numeric_limits<int>::max())) return false;
        if (f != nullptr && f->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
          if (depth >= kMaxDepth) return false;
          *extra += sizes.Of(f->message_type()) + kAllocationBytes + kSlotBytes;
          const pb::io::CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(len));
          if (!WalkExtra(in, f->message_type(), sizes, depth + 1, extra)) return false;
          in->PopLimit(limit);
        } else if (f != nullptr && f->is_packable() &&
                   WFL::WireTypeForFieldType(static_cast<WFL::FieldType>(f->type())) == WFL::WIRETYPE_VARINT) {
          // Packed varints: an 8-byte slot each (doubled by growth), however
          // few bytes each took on the wire.
          const pb::io::CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(len));
          for (uint64_t v; in->BytesUntilLimit() > 0;) {
            if (!in->ReadVarint64(&v)) return false;
            *extra += kSlotBytes;
          }
          in->PopLimit(limit);
        } else {
          if (!in->Skip(static_cast<int>(len))) return false;
          if (f == nullptr) {
            *extra += kUnknownFieldBytes;
          } else if (f->type() == pb::FieldDescriptor::TYPE_STRING || f->type() == pb::FieldDescriptor::TYPE_BYTES) {
            *extra += kStringBytes + (repeated ? kSlotBytes : 0);
          } else {
            *extra += int64_t{len} + kSlotBytes;  // packed fixed-size scalars: reserved exactly
          }
        }
        break;
      }
      default:  // groups (never sent by tensord) and invalid wire types
        return false;
    }
  }
}

}  // namespace

std::optional<int64_t> DecodedExtraBytes(const grpc::ByteBuffer& bb, const google::protobuf::Descriptor* type) {
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bb));  // reads; does not consume
  pb::io::CodedInputStream in(&reader);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (bb.Length() > static_cast<size_t>(std::numeric_limits<int>::max())) return std::nullopt;
  in.PushLimit(static_cast<int>(bb.Length()));  // the end of the walk is the end of `bb`
  const MessageSizes& sizes = MessageSizes::For(type);
  int64_t extra = sizes.Of(type);
  if (!WalkExtra(&in, type, sizes, 0, &extra)) return std::nullopt;
  return extra;
}

}  // namespace tensord::wire
