// The daemon's health service (see health.h).
#include "health.h"

#include "absl/strings/str_cat.h"

namespace tensord::server {

using grpc::health::v1::HealthCheckResponse;

grpc::Status HealthService::Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  if (!request->service().empty() && request->service() != service_name_) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("unknown service '", request->service(), "' (this daemon serves '",
                                     service_name_, "')"));
  }
  response->set_status(serving_.load() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest*,
                                  grpc::ServerWriter<HealthCheckResponse>*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "tensord answers grpc.health.v1.Health/Check only: a Watch would hold a daemon thread");
}

}  // namespace tensord::server
