// The session stream on gRPC: the Tensord.Stream call, written and read as
// byte buffers.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "transport.h"

namespace tensord::client::internal {
namespace {

// The stream writes and reads byte buffers: batches are serialized by
// protobuf (Transport::Send), upload chunks are encoded around the caller's
// memory without copying it (wire::EncodeUploadChunk), and fetched data is
// copied from gRPC's buffer straight into the fetch's buffer
// (wire::ParseServerMessage, the session's PlaceData).
class GrpcTransport final : public Transport {
 public:
  explicit GrpcTransport(const std::shared_ptr<grpc::Channel>& channel)
      : ctx_(std::make_unique<grpc::ClientContext>()),
        // What the generated stub's Stream() does, with a byte buffer as the
        // written type (the daemon parses the same protobuf messages).
        method_(absl::StrCat("/", v1::Tensord::service_full_name(), "/Stream")) {
    stream_.reset(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
        channel.get(), grpc::internal::RpcMethod(method_.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel),
        ctx_.get()));
  }

  TransportKind kind() const override { return TransportKind::kGrpc; }

  bool SendBytes(const grpc::ByteBuffer& bb) override {
    const bool ok = stream_->Write(bb);
    if (!ok) write_failed_ = true;
    return ok;
  }

  bool Read(v1::ServerMessage* msg, PlaceFn place, grpc::Status* end) override {
    if (!stream_->Read(&read_bytes_)) {
      *end = stream_->Finish();
      return false;
    }
    if (wire::ParseServerMessage(&read_bytes_, msg, place)) return true;
    Cancel();
    stream_->Finish().IgnoreError();
    *end = grpc::Status(grpc::StatusCode::INTERNAL, "the daemon sent a message that does not parse");
    return false;
  }

  // A failed Write means the call is over: Read gives what the daemon sent
  // before (a StreamEnd saying why), then its end, without waiting.
  bool ReadableAfterFailedSend() override { return true; }

  // From any thread, Close's included: after Close there is no call left to
  // cancel (and no context to ask).
  void Cancel() override {
    absl::MutexLock l(&close_mu_);
    if (ctx_ != nullptr) ctx_->TryCancel();
  }

  // Not after a failed write: the call is over.
  void CloseWrites() override {
    if (!write_failed_) stream_->WritesDone();
  }

  void Close() override {
    absl::MutexLock l(&close_mu_);
    stream_.reset();
    ctx_.reset();
  }

 private:
  absl::Mutex close_mu_;  // Cancel against Close
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::string method_;  // "/tensord.v1.Tensord/Stream", named by the RpcMethod
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
  bool write_failed_ = false;  // by the sending thread
  grpc::ByteBuffer read_bytes_;  // by the reading thread
};

}  // namespace

std::unique_ptr<Transport> StartGrpcTransport(const std::shared_ptr<grpc::Channel>& channel) {
  return std::make_unique<GrpcTransport>(channel);
}

}  // namespace tensord::client::internal
