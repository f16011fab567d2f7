// The client's transports, alone: Cancel is safe from any thread at any
// time, after Close too (Session::Close may cancel a stream another
// thread's Close already freed).
#include <grpcpp/grpcpp.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport.h"

namespace tensord::client::internal {
namespace {

TEST(GrpcTransport, CancelAfterCloseAndAlongsideItIsHarmless) {
  // No daemon listens there: the call never connects, which is all a
  // cancel and a close need.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix:/nonexistent/tensord-test.sock", grpc::InsecureChannelCredentials());
  std::unique_ptr<Transport> t = StartGrpcTransport(channel);
  t->Cancel();
  t->Close();
  t->Cancel();  // the context is gone: nothing to cancel
  EXPECT_EQ(t->kind(), TransportKind::kGrpc);

  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<Transport> u = StartGrpcTransport(channel);
    std::vector<std::thread> cancellers;
    for (int i = 0; i < 4; ++i) {
      cancellers.emplace_back([&u] {
        for (int k = 0; k < 200; ++k) u->Cancel();
      });
    }
    u->Close();
    for (std::thread& c : cancellers) c.join();
  }
}

}  // namespace
}  // namespace tensord::client::internal
