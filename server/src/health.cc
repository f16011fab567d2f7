#include "health.h"

#include "absl/strings/str_cat.h"
#include "tensord/v1/tensord.grpc.pb.h"

namespace tensord::server {

grpc::Status HealthService::Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) {
  using Response = grpc::health::v1::HealthCheckResponse;
  if (!request->service().empty() && request->service() != v1::Tensord::service_full_name()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("health: unknown service '", request->service(), "' (this daemon serves '",
                                     v1::Tensord::service_full_name(), "')"));
  }
  response->set_status(serving_.load(std::memory_order_relaxed) ? Response::SERVING : Response::NOT_SERVING);
  return grpc::Status::OK;
}

}  // namespace tensord::server
