// tensord/client/transport_options.h — the advanced settings of how a
// session's messages and tensors travel (SessionOptions::transport): upload
// sizes, the shared-memory side channel, and the same-host and TCP streams
// beside gRPC. The defaults suit every deployment; a setting here changes
// speed, never results. Each stream and the side channel can also be turned
// off per process by its environment variable, named below.
#ifndef TENSORD_CLIENT_TRANSPORT_OPTIONS_H_
#define TENSORD_CLIENT_TRANSPORT_OPTIONS_H_

#include <cstddef>

namespace tensord::client {

struct TransportOptions {
  // Uploads up to this size travel inline in the batch; larger ones are
  // streamed in chunks of `chunk_bytes`.
  size_t inline_upload_limit = 64 * 1024;
  size_t chunk_bytes = 4 * 1024 * 1024;
  // Same-host fast path: over a Unix socket, tensors of more than
  // `inline_upload_limit` bytes travel through shared-memory segments (one
  // copy each way) when the daemon offers its side channel; otherwise, or
  // with this false or $TENSORD_SHM=0, through the stream. The segments, kept
  // for reuse, total at most `shm_pool_bytes`.
  bool shared_memory = true;
  size_t shm_pool_bytes = size_t{1} << 30;
  // Uploads of at least this many bytes through shared memory get a segment
  // of their own that the daemon adopts as the tensor's storage: one copy
  // (here, into the segment) instead of two. The segment returns to the pool
  // when the daemon frees the storage (every tensor viewing it released).
  // Adopted segments hold at most half of `shm_pool_bytes`; beyond that,
  // uploads copy. SIZE_MAX: never adopt.
  size_t shm_adopt_min_bytes = size_t{1} << 20;
  // Same-host stream: over a Unix socket, the session's messages (ops,
  // sync points, replies) go over the daemon's side-channel socket
  // ("<socket>.shm") instead of the gRPC stream: the same protobuf messages
  // without HTTP/2 and gRPC's thread hand-offs, so a round trip costs one
  // socket wake-up each way. The handshake and opening and closing the
  // session stay on gRPC. Used when the daemon offers the channel; false, or
  // $TENSORD_SAME_HOST_STREAM=0, keeps the gRPC stream.
  bool same_host_stream = true;
  // TCP stream: connected at HOST:PORT, the session's messages go over a
  // second TCP connection to the same port instead of the gRPC stream (the
  // daemon tells the two apart by their first bytes): the same protobuf
  // messages, each one length-prefixed record, without HTTP/2 and gRPC's
  // thread hand-offs. The handshake and opening and closing the session
  // stay on gRPC. When that connection cannot be made (within
  // SessionOptions::connect_timeout_ms) or the daemon refuses it, the gRPC
  // stream is used; false, or $TENSORD_TCP_STREAM=0, always uses it.
  bool tcp_stream = true;
  // On the same-host stream, how long (microseconds) a thread waiting for a
  // reply polls the socket before it blocks: a reply that comes within it
  // costs no wake-up of a halted core (see wire::StreamReceiver for when it
  // polls). 0 never polls; -1 (the default) takes $TENSORD_STREAM_SPIN_US
  // when set, else 100. At most 1,000,000: Connect fails (InvalidArgument,
  // naming the setting) for a value out of range, or a
  // $TENSORD_STREAM_SPIN_US that is not a whole number in that range.
  int stream_spin_us = -1;
};

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_TRANSPORT_OPTIONS_H_
