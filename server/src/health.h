// The daemon's gRPC health service (grpc.health.v1.Health, the standard
// protocol), on the synchronous API like the rest of the daemon. Internal
// to server/.
#ifndef TENSORD_SERVER_SRC_HEALTH_H_
#define TENSORD_SERVER_SRC_HEALTH_H_

#include <atomic>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tensord::server {

// Check answers SERVING for "" (the daemon as a whole) and for
// `service_name` (tensord.v1.Tensord) until Shutdown, NOT_SERVING after;
// any other name is NOT_FOUND, as the protocol says. Watch is
// UNIMPLEMENTED (allowed by the protocol): each watcher would hold one of
// the daemon's threads for as long as it watches.
//
// gRPC's built-in health service (EnableDefaultHealthCheckService) is not
// used: it runs on the callback API, whose completion-queue threads then
// poll the daemon's sockets too and hand each session message to a
// synchronous handler thread, adding 15-30 us to every round trip on the
// gRPC stream (measured with bench/wire_bench, figure 2 over TCP).
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  explicit HealthService(std::string service_name) : service_name_(std::move(service_name)) {}

  // NOT_SERVING from now on (the daemon is shutting down).
  void Shutdown() { serving_.store(false); }

  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  const std::string service_name_;
  std::atomic<bool> serving_{true};
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_HEALTH_H_
