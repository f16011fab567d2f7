// What every transport shares: serializing a ClientMessage for SendBytes.
#include "transport.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/slice.h>

#include <algorithm>

namespace tensord::client::internal {

// A message up to kOneSliceBytes (every batch of small ops) is sized once
// and written into one slice; gRPC's serializer would size it twice
// (ByteSizeLong, then again inside SerializeToZeroCopyStream) and go
// through a ZeroCopyOutputStream. A larger one up to kWriteBufferMaxBytes
// (an inline upload near inline_upload_limit, a long batch) is serialized
// into write_buffer_, which is kept: a fresh buffer of that size comes from
// the top of this process's heap, which glibc gives back to the system when
// it is freed, so every such message paid a page fault per 4 KiB again (a
// cost that dominated a 64 KiB upload's round trip when it was measured).
// A client library cannot mallopt its host process, as the
// daemon does. A still larger one goes through gRPC's serializer, as the
// generated stub would, in slices of at most 1 MiB.
bool Transport::Send(const v1::ClientMessage& m) {
  grpc::ByteBuffer bb;
  const size_t n = m.ByteSizeLong();
  if (n <= kOneSliceBytes) {
    grpc::Slice slice(n);
    uint8_t* end = m.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
    if (end != slice.end()) return false;
    grpc::ByteBuffer one(&slice, 1);
    bb.Swap(&one);
  } else if (n <= kWriteBufferMaxBytes) {
    if (write_buffer_bytes_ < n) {
      write_buffer_bytes_ = std::min(kWriteBufferMaxBytes, std::max(n, 2 * write_buffer_bytes_));
      write_buffer_.reset(new uint8_t[write_buffer_bytes_]);
    }
    if (m.SerializeWithCachedSizesToArray(write_buffer_.get()) != write_buffer_.get() + n) return false;
    // Lent to the transport until it lets go (a socket stream's send has
    // copied it by then; gRPC may hold it a little longer).
    wire::BorrowedSlices borrowed;
    grpc::Slice slice = borrowed.Borrow(write_buffer_.get(), n);
    grpc::ByteBuffer one(&slice, 1);
    bb.Swap(&one);
    slice = grpc::Slice();
    const bool ok = SendBytes(bb);
    bb.Clear();
    borrowed.WaitUntilReleased();
    return ok;
  } else {
    bool own = false;
    if (!grpc::SerializationTraits<v1::ClientMessage>::Serialize(m, &bb, &own).ok()) return false;
  }
  return SendBytes(bb);
}

}  // namespace tensord::client::internal
