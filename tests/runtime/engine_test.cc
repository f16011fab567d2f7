// The runtime on its own, with no session, protobuf or socket: a Dispatcher
// over the CPU backend runs ops and records the graph, and the engine runs
// backward passes from a plan, asking its hooks what only a caller can do.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/dispatcher.h"
#include "tensord/runtime/engine.h"

namespace tensord::runtime {
namespace {

class RecordingHooks final : public BackwardHooks {
 public:
  absl::StatusOr<std::vector<Tensor>> CallFunction(Node& node, const std::shared_ptr<Node>& self,
                                                  const std::vector<Tensor>& grads, bool create_graph) override {
    ++calls;
    if (function_result.ok()) seen_grads = grads;
    return function_result;
  }
  bool Cancelled() override { return cancel; }
  void HoldGrad(const std::shared_ptr<AutogradMeta>& ag) override { held.push_back(ag); }

  int calls = 0;
  std::vector<Tensor> seen_grads;
  absl::StatusOr<std::vector<Tensor>> function_result = std::vector<Tensor>{};
  bool cancel = false;
  std::vector<std::shared_ptr<AutogradMeta>> held;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<backends::CpuBackend>> cpu = backends::CpuBackend::Create({});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    devices_.Add(*std::move(cpu));
    account_ = MemoryAccount::Create(int64_t{1} << 30);
    d_ = std::make_unique<Dispatcher>(&devices_, account_);
  }

  // A float32 tensor of `values` (a 1-d leaf), made by ops of the table.
  Tensor Make(const std::vector<double>& values, bool requires_grad) {
    absl::StatusOr<std::vector<Tensor>> t =
        d_->RunOp("zeros", {Shape{static_cast<int64_t>(values.size())}, ScalarType::kFloat32}, false);
    EXPECT_TRUE(t.ok()) << t.status();
    Tensor out = (*t)[0];
    float* p = reinterpret_cast<float*>(out.storage->data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
    out.ag = std::make_shared<AutogradMeta>();
    out.ag->requires_grad = requires_grad;
    return out;
  }

  Tensor Run(absl::string_view op, std::vector<Arg> args) {
    absl::StatusOr<std::vector<Tensor>> t = d_->RunOp(op, std::move(args), /*record=*/true);
    EXPECT_TRUE(t.ok()) << op << ": " << t.status();
    return t.ok() ? (*t)[0] : Tensor();
  }

  // The elements of a 0-d or 1-d float32 tensor, whatever its stride (a
  // gradient may be an expanded view, stride 0).
  static std::vector<float> Values(const Tensor& t) {
    const float* p = reinterpret_cast<const float*>(t.storage->data()) + t.meta.storage_offset;
    const int64_t stride = t.meta.dim() == 0 ? 1 : t.meta.strides[0];
    std::vector<float> out;
    for (int64_t i = 0; i < t.meta.numel(); ++i) out.push_back(p[i * stride]);
    return out;
  }

  Backends devices_;
  std::shared_ptr<MemoryAccount> account_;
  std::unique_ptr<Dispatcher> d_;
  RecordingHooks hooks_;
};

TEST_F(EngineTest, BackwardAccumulatesIntoLeafGrad) {
  Tensor x = Make({1, 2, 3}, true);
  Tensor loss = Run("sum", {Run("mul.Tensor", {x, x})});
  ASSERT_NE(loss.ag->grad_fn, nullptr);
  EXPECT_EQ(loss.ag->grad_fn->name, "SumBackward0");

  BackwardPlan plan;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  BackwardResult result;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  ASSERT_EQ(result.changed.size(), 1u);
  EXPECT_EQ(result.changed[0], x.ag);
  ASSERT_NE(x.ag->grad, nullptr);
  EXPECT_EQ(Values(*x.ag->grad), (std::vector<float>{2, 4, 6}));

  // The graph was freed (no retain_graph): a second pass says so in
  // PyTorch's words.
  absl::Status again = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(again.message().find("second time"), absl::string_view::npos) << again;
}

TEST_F(EngineTest, GradCapturesWithoutTouchingGrad) {
  Tensor x = Make({1, 2, 3}, true);
  Tensor w = Make({4, 5, 6}, true);
  Tensor loss = Run("sum", {Run("mul.Tensor", {x, w})});
  BackwardPlan plan;
  plan.accumulate = false;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  plan.inputs = {x};
  BackwardResult result;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  ASSERT_EQ(result.captured.size(), 1u);
  EXPECT_EQ(Values(result.captured[0]), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(x.ag->grad, nullptr);
  EXPECT_EQ(w.ag->grad, nullptr);
  EXPECT_TRUE(result.changed.empty());
}

TEST_F(EngineTest, BroadcastGradientIsSummedToTheInputShape) {
  Tensor x = Make({1, 2, 3}, true);
  Tensor b = Make({10}, true);  // broadcast over x's 3 elements
  Tensor loss = Run("sum", {Run("add.Tensor", {x, b})});
  BackwardPlan plan;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  BackwardResult result;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  ASSERT_NE(b.ag->grad, nullptr);
  EXPECT_EQ(b.ag->grad->meta.sizes, Shape{1});
  EXPECT_EQ(Values(*b.ag->grad), std::vector<float>{3});
}

TEST_F(EngineTest, RootChecksAreMetasAndInPyTorchsWords) {
  Tensor x = Make({1, 2, 3}, true);
  Tensor y = Run("mul.Tensor", {x, x});  // not a scalar: an implicit gradient is refused
  BackwardPlan plan;
  plan.roots = {y};
  plan.root_grads = {Tensor()};
  BackwardResult result;
  absl::Status s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(s.message().find("grad can be implicitly created only for scalar outputs"), absl::string_view::npos) << s;

  Tensor plain = Make({1}, false);
  plan.accumulate = false;
  plan.roots = {Run("sum", {x})};
  plan.inputs = {plain};
  s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(s.message().find("One of the differentiated Tensors does not require grad"), absl::string_view::npos)
      << s;

  plan.inputs = {};
  s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(s.message().find("grad requires non-empty inputs"), absl::string_view::npos) << s;
}

TEST_F(EngineTest, UnusedInputNeedsAllowUnused) {
  Tensor x = Make({1, 2}, true);
  Tensor unused = Make({1, 2}, true);
  BackwardPlan plan;
  plan.accumulate = false;
  plan.roots = {Run("sum", {x})};
  plan.root_grads = {Tensor()};
  plan.inputs = {x, unused};
  plan.retain_graph = true;
  BackwardResult result;
  absl::Status s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(s.message().find("appears to not have been used in the graph"), absl::string_view::npos) << s;
  plan.allow_unused = true;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  ASSERT_EQ(result.captured.size(), 2u);
  EXPECT_TRUE(result.captured[0].defined());
  EXPECT_FALSE(result.captured[1].defined());
}

TEST_F(EngineTest, CreateGraphRecordsTheBackwardAndHoldsTheGrad) {
  Tensor x = Make({3}, true);
  Tensor loss = Run("sum", {Run("mul.Tensor", {x, Run("mul.Tensor", {x, x})})});  // x^3
  BackwardPlan plan;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  plan.create_graph = true;
  BackwardResult result;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  ASSERT_NE(x.ag->grad, nullptr);
  EXPECT_EQ(Values(*x.ag->grad), std::vector<float>{27});  // 3 x^2
  EXPECT_TRUE(x.ag->grad->requires_grad());                // the backward was recorded
  ASSERT_EQ(hooks_.held.size(), 1u);                         // ... so the caller keeps the identity
  EXPECT_EQ(hooks_.held[0], x.ag);

  // Second order, through the graph the first pass recorded: 6x.
  Tensor g = *x.ag->grad;
  x.ag->grad.reset();
  BackwardPlan second;
  second.accumulate = false;
  second.roots = {g};
  second.root_grads = {Tensor()};
  second.root_grads_given = 0;
  second.inputs = {x};
  ASSERT_TRUE(RunBackward(*d_, second, hooks_, &result).ok());
  EXPECT_EQ(Values(result.captured[0]), std::vector<float>{18});
}

TEST_F(EngineTest, FunctionNodesGoToTheHooks) {
  Tensor x = Make({1, 2}, true);
  // A user-defined Function's node, as a session records it: y = f(x).
  Tensor y = Run("mul.Scalar", {x, 1.0});
  y.ag = std::make_shared<AutogradMeta>();
  auto fn = std::make_shared<Node>(Node::Kind::kFunction, d_->NextNodeSeq(), "MyFunctionBackward");
  fn->next.push_back(d_->GradientEdge(x));
  fn->input_metas.push_back(x.meta);
  fn->input_present.push_back(true);
  fn->output_metas.push_back(y.meta);
  fn->output_differentiable.push_back(true);
  y.ag->grad_fn = fn;
  Tensor loss = Run("sum", {y});

  Tensor given = Make({7, 8}, false);
  hooks_.function_result = std::vector<Tensor>{given};
  BackwardPlan plan;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  plan.retain_graph = true;
  BackwardResult result;
  ASSERT_TRUE(RunBackward(*d_, plan, hooks_, &result).ok());
  EXPECT_EQ(hooks_.calls, 1);
  ASSERT_EQ(hooks_.seen_grads.size(), 1u);
  EXPECT_EQ(Values(hooks_.seen_grads[0]), (std::vector<float>{1, 1}));
  EXPECT_EQ(Values(*x.ag->grad), (std::vector<float>{7, 8}));

  // The hook's error is the backward's.
  hooks_.function_result = RuntimeErr("the client's backward raised");
  absl::Status s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_EQ(s.message(), "the client's backward raised");
}

TEST_F(EngineTest, CancelledStopsBeforeTheNextNode) {
  Tensor x = Make({1, 2}, true);
  Tensor loss = Run("sum", {Run("mul.Tensor", {x, x})});
  hooks_.cancel = true;
  BackwardPlan plan;
  plan.roots = {loss};
  plan.root_grads = {Tensor()};
  BackwardResult result;
  absl::Status s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_NE(s.message().find("closing"), absl::string_view::npos) << s;
  EXPECT_EQ(x.ag->grad, nullptr);
}

TEST_F(EngineTest, FailedInputGoesThroughTheDispatchersHook) {
  Tensor x = Make({1}, true);
  Tensor bad;
  bad.meta = x.meta;
  bad.error = std::make_shared<OpError>();
  bad.error->status = RuntimeErr("index 5 is out of bounds");
  int asked = 0;
  d_->set_failed_input([&asked](const std::shared_ptr<OpError>& e) {
    ++asked;
    return absl::Status(e->status.code(), absl::StrCat("earlier: ", e->status.message()));
  });
  BackwardPlan plan;
  plan.roots = {bad};
  plan.root_grads = {Tensor()};
  BackwardResult result;
  absl::Status s = RunBackward(*d_, plan, hooks_, &result);
  EXPECT_EQ(s.message(), "earlier: index 5 is out of bounds");
  EXPECT_EQ(asked, 1);
  absl::StatusOr<std::vector<Tensor>> r = d_->RunOp("neg", {bad}, false);
  EXPECT_EQ(r.status().message(), "earlier: index 5 is out of bounds");
  EXPECT_EQ(asked, 2);
}

TEST_F(EngineTest, DispatcherChargesItsAccountAndNamesUnservedDevices) {
  const int64_t before = account_->bytes_in_use();
  Tensor big;
  {
    absl::StatusOr<std::vector<Tensor>> t = d_->RunOp("zeros", {Shape{1024}, ScalarType::kFloat32}, false);
    ASSERT_TRUE(t.ok()) << t.status();
    big = (*t)[0];
  }
  EXPECT_GE(account_->bytes_in_use() - before, 4096);
  big.storage.reset();  // the last reference: the bytes go back
  EXPECT_EQ(account_->bytes_in_use(), before);
  EXPECT_EQ(d_->ops_executed(), 1u);

  absl::StatusOr<std::vector<Tensor>> elsewhere =
      d_->RunOp("zeros", {Shape{2}, ScalarType::kFloat32, Device{DeviceType::kPrivateUse1, 0}}, false);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_NE(elsewhere.status().message().find("is not available: this daemon serves cpu"), absl::string_view::npos)
      << elsewhere.status();
}

}  // namespace
}  // namespace tensord::runtime
