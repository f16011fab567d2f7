// Tests of the C++ client's autograd side: local requires_grad/grad_fn
// prediction (meta mode, no daemon), grad mode, the in-place rules, and the
// wire protocol of backward with a Function callback, against a scripted fake
// daemon (so the client's half is checked independently of the real engine).
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon_fixture.h"
#include "tensord/client/client.h"
#include "tensord/meta/errors.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/wire.h"

namespace tc = tensord::client;
namespace v1 = tensord::v1;
using tensord::ErrorKind;
using tensord::KindOf;
using tensord::ScalarType;
using ::testing::HasSubstr;

namespace {

// ---------------------------------------------------------------- meta mode

TEST(AutogradMeta, FlagsFollowTheSharedRules) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({3, 4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, tc::Randn({4, 2}));
  ASSERT_TRUE(x.SetRequiresGrad(true).ok());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Matmul(x, w));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name, "MatmulBackward0");
  ASSERT_EQ(y.grad_fn()->next_functions.size(), 2u);
  ASSERT_NE(y.grad_fn()->next_functions[0].first, nullptr);
  EXPECT_EQ(y.grad_fn()->next_functions[0].first->name, "AccumulateGrad");
  EXPECT_EQ(y.grad_fn()->next_functions[0].first->variable.lock(), x.impl());
  EXPECT_EQ(y.grad_fn()->next_functions[1].first, nullptr);
  ASSERT_OK_AND_ASSIGN(tc::Tensor idx, tc::Call1("argmax", {y}));
  EXPECT_FALSE(idx.requires_grad());  // integer outputs never require grad
  {
    tc::NoGradGuard no_grad;
    ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Mul(x, x));
    EXPECT_FALSE(z.requires_grad());
    {
      tc::EnableGradGuard enable;
      ASSERT_OK_AND_ASSIGN(tc::Tensor e, tc::Mul(x, x));
      EXPECT_TRUE(e.requires_grad());
    }
  }
  EXPECT_TRUE(tc::IsGradEnabled());
}

TEST(AutogradMeta, GradModeIsThreadLocal) {
  tc::NoGradGuard no_grad;
  bool other = false;
  std::thread t([&] { other = tc::IsGradEnabled(); });
  t.join();
  EXPECT_TRUE(other);
  EXPECT_FALSE(tc::IsGradEnabled());
}

TEST(AutogradMeta, InPlaceOpsReturnSelfAndRebase) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({3}));
  ASSERT_TRUE(x.SetRequiresGrad(true).ok());
  auto leaf_err = tc::Call1("add_", {x, 1}, {}, tc::CallMode::kMethod);
  ASSERT_FALSE(leaf_err.ok());
  EXPECT_EQ(KindOf(leaf_err.status()), ErrorKind::kRuntime);
  EXPECT_THAT(leaf_err.status().message(), HasSubstr("a leaf Variable that requires grad"));
  {
    tc::NoGradGuard no_grad;
    ASSERT_OK_AND_ASSIGN(tc::Tensor same, tc::Call1("mul_", {x, 2}, {}, tc::CallMode::kMethod));
    EXPECT_EQ(same.impl(), x.impl());
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Zeros({3}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r, tc::Call1("add_", {a, x}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(r.impl(), a.impl());
  EXPECT_TRUE(a.requires_grad());
  ASSERT_NE(a.grad_fn(), nullptr);
  EXPECT_EQ(a.grad_fn()->name, "AddBackward0");
  // A view of something that requires grad cannot be modified while recording.
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Call1("unsqueeze", {a, 0}));
  auto view_err = tc::Call1("mul_", {v, 2}, {}, tc::CallMode::kMethod);
  ASSERT_FALSE(view_err.ok());
  EXPECT_EQ(KindOf(view_err.status()), ErrorKind::kNotImplemented);
}

TEST(AutogradMeta, RequiresGradErrors) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor i, tc::Zeros({2}, ScalarType::kInt64));
  EXPECT_THAT(i.SetRequiresGrad(true).message(), HasSubstr("only Tensors of floating point"));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({2}));
  EXPECT_THAT(x.RetainGrad().message(), HasSubstr("requires_grad=False"));
  ASSERT_TRUE(x.SetRequiresGrad(true).ok());
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Mul(x, x));
  EXPECT_THAT(y.SetRequiresGrad(false).message(), HasSubstr("leaf variables"));
  auto b = tc::Backward({y});
  EXPECT_THAT(b.message(), HasSubstr("grad can be implicitly created only for scalar outputs"));
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(y));
  // Meta: no values, but every leaf gets a meta .grad of its own shape, as PyTorch's meta device.
  ASSERT_TRUE(tc::Backward({s}).ok());
  ASSERT_OK_AND_ASSIGN(std::optional<tc::Tensor> g, x.Grad());
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(g->is_meta());
  EXPECT_EQ(g->sizes(), x.sizes());
}

// ---------------------------------------------------------------- a scripted fake daemon

// Accepts the handshake and one session; on a Backward request it sends a
// BackwardCallback carrying one daemon-named gradient, waits for the
// CallbackResult, then acks the backward saying that `changed_handle`'s .grad
// changed and that function 42 is gone. Records every request it reads.
class FakeEngine final : public v1::Tensord::Service {
 public:
  grpc::Status Handshake(grpc::ServerContext*, const v1::HandshakeRequest* req,
                         v1::HandshakeResponse* resp) override {
    resp->set_accepted(true);
    resp->set_protocol_version(req->protocol_version());
    resp->set_op_table_digest(req->op_table_digest());
    return grpc::Status::OK;
  }
  grpc::Status OpenSession(grpc::ServerContext*, const v1::OpenSessionRequest*,
                           v1::OpenSessionResponse* resp) override {
    resp->set_session_id(7);
    resp->set_token("t");
    resp->set_server_version("fake");
    v1::DeviceInfo* cpu = resp->add_devices();  // what every daemon serves; clients check devices by it
    cpu->set_name("cpu");
    cpu->set_type(static_cast<int32_t>(tensord::DeviceType::kCPU));
    return grpc::Status::OK;
  }
  grpc::Status CloseSession(grpc::ServerContext*, const v1::CloseSessionRequest*,
                            v1::CloseSessionResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Stream(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::ServerMessage, v1::ClientMessage>* stream) override {
    v1::ClientMessage msg;
    uint64_t pending_backward = 0;
    while (stream->Read(&msg)) {
      for (const v1::Request& r : msg.requests()) {
        {
          absl::MutexLock l(&mu);
          requests.push_back(r);
        }
        v1::ServerMessage out;
        if (r.has_sync()) {
          out.mutable_ack()->set_request_id(r.sync().request_id());
          stream->Write(out);
        } else if (r.has_backward()) {
          pending_backward = r.backward().request_id();
          v1::BackwardCallback* cb = out.mutable_callback();
          cb->set_callback_id(5);
          cb->set_function_id(42);
          cb->add_grads((uint64_t{1} << 63) | 1);
          tensord::wire::ToProto(tensord::TensorMeta::Contiguous({3}, ScalarType::kFloat32, tensord::kCPU),
                                 cb->add_metas());
          cb->add_requires_grad(false);
          stream->Write(out);
        } else if (r.has_callback_result()) {
          v1::Ack* ack = out.mutable_ack();
          ack->set_request_id(pending_backward);
          ack->add_grad_changed(changed_handle);
          tensord::wire::ToProto(tensord::TensorMeta::Contiguous({3}, ScalarType::kFloat32, tensord::kCPU),
                                 ack->add_grad_metas());
          ack->add_grad_requires_grad(false);
          ack->add_released_functions(42);
          stream->Write(out);
        }
      }
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu;
  std::vector<v1::Request> requests ABSL_GUARDED_BY(mu);
  uint64_t changed_handle = 0;
};

TEST(AutogradWire, BackwardRunsFunctionCallbacksOnTheWaitingThread) {
  FakeEngine engine;
  const std::string path = "/tmp/tensord-autograd-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&engine);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect("unix:" + path));
  tc::SessionGuard use(s);

  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::FromVector(std::vector<float>{1, 2, 3}, {3}));
  ASSERT_TRUE(x.SetRequiresGrad(true).ok());
  engine.changed_handle = x.handle();
  tc::Tensor y;
  {
    tc::NoGradGuard no_grad;  // a Function's forward
    ASSERT_OK_AND_ASSIGN(y, tc::Mul(x, x));
  }
  tc::FunctionRecord rec;
  rec.function_id = 42;
  rec.name = "SquareBackward";
  rec.inputs = {x};
  rec.outputs = {y};
  ASSERT_OK_AND_ASSIGN(bool recorded, tc::RecordFunction(rec));
  EXPECT_TRUE(recorded);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(y.grad_fn()->name, "SquareBackward");
  EXPECT_EQ(y.grad_fn()->function_id, 42u);

  const std::thread::id waiting = std::this_thread::get_id();
  std::thread::id ran_on;
  uint64_t returned_handle = 0;
  uint64_t incoming_handle = 0;
  tc::SetBackwardCallbackHandler(
      [&](const tc::BackwardCallbackRequest& req) -> absl::StatusOr<std::vector<std::optional<tc::Tensor>>> {
        ran_on = std::this_thread::get_id();
        EXPECT_EQ(req.function_id, 42u);
        EXPECT_EQ(req.grads.size(), 1u);
        if (req.grads.size() != 1 || !req.grads[0].has_value()) return tensord::RuntimeErr("no grad");
        incoming_handle = req.grads[0]->handle();
        EXPECT_EQ(req.grads[0]->sizes(), (tensord::Shape{3}));
        TD_ASSIGN_OR_RETURN(tc::Tensor g, tc::Call1("mul", {*req.grads[0], 2.0}));
        returned_handle = g.handle();
        return std::vector<std::optional<tc::Tensor>>{g};
      });
  ASSERT_OK_AND_ASSIGN(tc::Tensor ones, tc::FromVector(std::vector<float>{1, 1, 1}, {3}));
  absl::Status st = tc::Backward({y}, {ones});
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ran_on, waiting);
  EXPECT_EQ(incoming_handle, (uint64_t{1} << 63) | 1);
  EXPECT_EQ(tc::TakeReleasedFunctions(), (std::vector<uint64_t>{42}));

  // The .grad the Ack announced is bound to a new handle on first access and cached.
  ASSERT_OK_AND_ASSIGN(std::optional<tc::Tensor> g1, x.Grad());
  ASSERT_TRUE(g1.has_value());
  ASSERT_OK_AND_ASSIGN(std::optional<tc::Tensor> g2, x.Grad());
  EXPECT_EQ(g1->impl(), g2->impl());
  EXPECT_EQ(g1->sizes(), (tensord::Shape{3}));
  ASSERT_TRUE(s->Synchronize().ok());

  tc::SetBackwardCallbackHandler(nullptr);
  s->Close().IgnoreError();  // the fake's stream ends: its requests are all recorded
  server->Shutdown();
  ::unlink(path.c_str());
  std::vector<v1::Request> requests;
  {
    absl::MutexLock l(&engine.mu);
    requests = engine.requests;
  }
  bool saw_record = false, saw_set_rg = false, saw_get_grad = false, op_before_result = false;
  bool saw_result = false;
  for (const v1::Request& r : requests) {
    if (r.has_set_requires_grad()) saw_set_rg = r.set_requires_grad().handles(0) == x.handle();
    if (r.has_record_function()) {
      saw_record = r.record_function().function_id() == 42 && r.record_function().outputs(0) == y.handle() &&
                   r.record_function().inputs(0) == x.handle() && r.record_function().materialize_grads();
    }
    if (r.has_call() && r.call().outputs_size() == 1 && r.call().outputs(0) == returned_handle) {
      op_before_result = !saw_result;
      EXPECT_FALSE(r.call().record_grad());  // grads without create_graph: nothing recorded
    }
    if (r.has_callback_result()) {
      saw_result = true;
      EXPECT_EQ(r.callback_result().callback_id(), 5u);
      ASSERT_EQ(r.callback_result().grads_size(), 1);
      EXPECT_EQ(r.callback_result().grads(0), returned_handle);
      EXPECT_FALSE(r.callback_result().has_error());
    }
    if (r.has_get_grad()) saw_get_grad = r.get_grad().handle() == x.handle() && r.get_grad().output() == g1->handle();
  }
  EXPECT_TRUE(saw_set_rg);
  EXPECT_TRUE(saw_record);
  EXPECT_TRUE(op_before_result);
  EXPECT_TRUE(saw_result);
  EXPECT_TRUE(saw_get_grad);
}

TEST(AutogradWire, InPlaceCallsSendHandleZeroAndRecordGrad) {
  FakeEngine engine;
  const std::string path = "/tmp/tensord-autograd-test2-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&engine);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect("unix:" + path));
  tc::SessionGuard use(s);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::FromVector(std::vector<float>{1, 2, 3}, {3}));
  ASSERT_TRUE(x.SetRequiresGrad(true).ok());
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Zeros({3}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r, tc::Call1("add_", {a, x}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(r.impl(), a.impl());
  ASSERT_TRUE(tc::ManualSeed(11).ok());
  ASSERT_TRUE(s->Synchronize().ok());
  s->Close().IgnoreError();
  server->Shutdown();
  ::unlink(path.c_str());
  std::vector<v1::Request> requests;
  {
    absl::MutexLock l(&engine.mu);
    requests = engine.requests;
  }
  bool saw_inplace = false, saw_seed = false;
  for (const v1::Request& r2 : requests) {
    if (r2.has_call() && tensord::OpTable::Get().at(r2.call().op_id()).name() == "add_") {
      saw_inplace = true;
      ASSERT_EQ(r2.call().outputs_size(), 1);
      EXPECT_EQ(r2.call().outputs(0), 0u);
      EXPECT_TRUE(r2.call().record_grad());
    }
    if (r2.has_manual_seed()) saw_seed = r2.manual_seed().seed() == 11;
  }
  EXPECT_TRUE(saw_inplace);
  EXPECT_TRUE(saw_seed);
}

// SetMathMode goes to the current session at once, and to a session opened
// later as that session's first requests, while the switches differ from
// PyTorch's defaults; back at the defaults, a new session gets nothing.
TEST(AutogradWire, MathModeIsSentNowAndToSessionsOpenedLater) {
  FakeEngine engine;
  const std::string path = "/tmp/tensord-autograd-test3-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&engine);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto math_requests = [&engine] {
    std::vector<v1::SetMathMode> out;
    absl::MutexLock l(&engine.mu);
    for (const v1::Request& r : engine.requests) {
      if (r.has_set_math_mode()) out.push_back(r.set_math_mode());
    }
    return out;
  };
  EXPECT_TRUE(tc::GetMathMode() == tensord::MathMode());
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect("unix:" + path));
    tc::SessionGuard use(s);
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_TRUE(math_requests().empty());  // defaults: nothing to say
    tensord::MathMode tf32;
    tf32.matmul_allow_tf32 = true;
    ASSERT_TRUE(tc::SetMathMode(tf32).ok());
    ASSERT_TRUE(s->Synchronize().ok());
    const std::vector<v1::SetMathMode> sent = math_requests();
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_TRUE(sent[0].matmul_allow_tf32());
    EXPECT_TRUE(sent[0].conv_allow_tf32());
    s->Close().IgnoreError();
  }
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect("unix:" + path));
    ASSERT_TRUE(s->Synchronize().ok());
    const std::vector<v1::SetMathMode> sent = math_requests();
    ASSERT_EQ(sent.size(), 2u);  // the later session got the switches on opening
    EXPECT_TRUE(sent[1].matmul_allow_tf32());
    s->Close().IgnoreError();
  }
  ASSERT_TRUE(tc::SetMathMode(tensord::MathMode()).ok());  // no current session: kept for later ones
  EXPECT_TRUE(tc::GetMathMode() == tensord::MathMode());
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect("unix:" + path));
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_EQ(math_requests().size(), 2u);
    s->Close().IgnoreError();
  }
  server->Shutdown();
  ::unlink(path.c_str());
}

}  // namespace
