// The grpc.health.v1.Health service of the daemon (Check; Watch answers
// UNIMPLEMENTED), on gRPC's synchronous API: see
// proto/grpc/health/v1/health.proto for why not grpc++'s built-in one.
//
//   HealthService health;           // SERVING for "" and tensord.v1.Tensord
//   builder.RegisterService(&health);
//   ...
//   health.Shutdown();              // NOT_SERVING from now on
#ifndef TENSORD_SERVER_SRC_HEALTH_H_
#define TENSORD_SERVER_SRC_HEALTH_H_

#include <atomic>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tensord::server {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // SERVING (NOT_SERVING after Shutdown) for the empty service name and for
  // tensord.v1.Tensord; NOT_FOUND for any other name.
  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Every later Check answers NOT_SERVING (the daemon is shutting down).
  void Shutdown() { serving_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> serving_{true};
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_HEALTH_H_
