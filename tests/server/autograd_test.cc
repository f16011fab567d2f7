// The daemon's autograd engine, driven through the raw stub: recorded graphs,
// backward and autograd.grad with values checked (against hand-derived
// gradients and finite differences), version counters, freed graphs, double
// backward, Python-function callbacks answered by a fake client, formula
// completeness over the op table, and hostile autograd requests.
#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

#include "raw_client.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/runtime/autograd.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

void NoErrors(const std::vector<v1::Error>& errors) {
  for (const v1::Error& e : errors) ADD_FAILURE() << e.DebugString();
}

v1::Request RequiresGrad(std::vector<uint64_t> hs, bool on = true) {
  v1::Request r;
  for (uint64_t h : hs) r.mutable_set_requires_grad()->add_handles(h);
  r.mutable_set_requires_grad()->set_requires_grad(on);
  return r;
}
v1::Request Rec(v1::Request r) {
  r.mutable_call()->set_record_grad(true);
  return r;
}
v1::Request SetGradReq(uint64_t h, uint64_t grad) {
  v1::Request r;
  r.mutable_set_grad()->set_handle(h);
  r.mutable_set_grad()->set_grad(grad);
  return r;
}
v1::Request GetGradReq(uint64_t h, uint64_t out) {
  v1::Request r;
  r.mutable_get_grad()->set_handle(h);
  r.mutable_get_grad()->set_output(out);
  return r;
}
v1::Request ReleaseReq(std::vector<uint64_t> hs) {
  v1::Request r;
  for (uint64_t h : hs) r.mutable_release()->add_handles(h);
  return r;
}

struct BackwardArgs {
  std::vector<uint64_t> roots, grad_roots, inputs, outputs;
  bool retain_graph = false, create_graph = false, accumulate = true, allow_unused = false;
};
v1::Request BackwardReq(uint64_t id, const BackwardArgs& a) {
  v1::Request r;
  v1::Backward* b = r.mutable_backward();
  b->set_request_id(id);
  for (uint64_t h : a.roots) b->add_roots(h);
  for (uint64_t h : a.grad_roots) b->add_grad_roots(h);
  for (uint64_t h : a.inputs) b->add_inputs(h);
  for (uint64_t h : a.outputs) b->add_outputs(h);
  b->set_retain_graph(a.retain_graph);
  b->set_create_graph(a.create_graph);
  b->set_accumulate(a.accumulate);
  b->set_allow_unused(a.allow_unused);
  b->set_call_site("test.py:9");
  return r;
}

class AutogradTest : public DaemonFixture {
 protected:
  // Sends a Backward and returns its Ack.
  v1::Ack Backward(RawSession& s, const BackwardArgs& a) {
    s.Send(BackwardReq(++request_id_, a));
    v1::ServerMessage m;
    EXPECT_TRUE(s.Read(&m));
    EXPECT_TRUE(m.has_ack()) << m.DebugString();
    EXPECT_EQ(m.ack().request_id(), request_id_);
    return m.ack();
  }
  std::vector<double> Grad(RawSession& s, uint64_t h) {
    const uint64_t out = ++fresh_;
    s.Send(GetGradReq(h, out));
    return s.FetchValues<double>(out);
  }
  uint64_t request_id_ = 1000;
  uint64_t fresh_ = 5000;
};

constexpr ScalarType kF64 = ScalarType::kFloat64;

TEST_F(AutogradTest, AddMulSumBackwardGivesTheHandDerivedGradients) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {1, 2, 3});
  s.Upload<double>(2, {3}, kF64, {4, 5, 6});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(2)}, {3})));
  s.Send(Rec(Call(2, "add.Tensor", {T(3), T(1), I(1)}, {4})));
  s.Send(Rec(Call(3, "sum", {T(4), None(), B(false), None()}, {5})));
  NoErrors(s.Sync());
  v1::Ack ack = Backward(s, {.roots = {5}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.grad_changed(), ::testing::ElementsAre(1, 2));
  ASSERT_EQ(ack.grad_metas_size(), 2);
  EXPECT_THAT(ack.grad_metas(0).sizes(), ::testing::ElementsAre(3));
  EXPECT_THAT(ack.grad_requires_grad(), ::testing::ElementsAre(false, false));
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(5, 6, 7));  // y + 1
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(1, 2, 3));  // x
  // A second backward (new graph) accumulates in place: no grad_changed.
  s.Send(Rec(Call(4, "sum", {T(1), None(), B(false), None()}, {6})));
  ack = Backward(s, {.roots = {6}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_EQ(ack.grad_changed_size(), 0);
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(6, 7, 8));
}

TEST_F(AutogradTest, BroadcastGradientsAreSummedBackToTheInputShape) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2, 3}, kF64, {1, 2, 3, 4, 5, 6});
  s.Upload<double>(2, {3}, kF64, {10, 20, 30});
  s.Upload<double>(3, {2, 1}, kF64, {100, 200});
  s.Send(RequiresGrad({1, 2, 3}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(2)}, {4})));        // [2,3]
  s.Send(Rec(Call(2, "add.Tensor", {T(4), T(3), I(2)}, {5})));  // + 2 * [2,1]
  s.Send(Rec(Call(3, "sum", {T(5), None(), B(false), None()}, {6})));
  v1::Ack ack = Backward(s, {.roots = {6}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(10, 20, 30, 10, 20, 30));
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(5, 7, 9));
  EXPECT_THAT(Grad(s, 3), ::testing::ElementsAre(6, 6));
  v1::Ack d = s.Describe({});
  (void)d;
}

TEST_F(AutogradTest, MatmulGradients) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2, 3}, kF64, {1, 2, 3, 4, 5, 6});
  s.Upload<double>(2, {3, 2}, kF64, {1, -1, 2, 0.5, -3, 4});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "matmul", {T(1), T(2)}, {3})));
  s.Send(Rec(Call(2, "sum", {T(3), None(), B(false), None()}, {4})));
  v1::Ack ack = Backward(s, {.roots = {4}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  // dA = ones(2,2) @ B^T: each row = row sums of B; dB = A^T @ ones(2,2): column sums of A per row.
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(0, 2.5, 1, 0, 2.5, 1));
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(5, 5, 7, 7, 9, 9));
}

// Finite differences against the engine for graphs built by `build` from
// input handles (float64). `build(s, ins, first_handle, record)` returns the
// handle of a scalar.
using Builder = std::function<uint64_t(RawSession&, const std::vector<uint64_t>&, uint64_t, bool)>;

void CheckNumeric(AutogradTest* t, RawSession& s, const std::vector<std::vector<int64_t>>& shapes,
                  const std::vector<std::vector<double>>& values, const Builder& build, const std::string& what) {
  static uint64_t next = 100000;
  std::vector<uint64_t> ins;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ins.push_back(++next);
    s.Upload<double>(ins.back(), shapes[i], kF64, values[i]);
  }
  s.Send(RequiresGrad(ins));
  const uint64_t root = build(s, ins, next + 1, true);
  next += 1000;
  v1::Request r = BackwardReq(777, {.roots = {root}, .inputs = ins, .outputs = {}, .accumulate = false});
  for (size_t i = 0; i < ins.size(); ++i) r.mutable_backward()->add_outputs(++next);
  s.Send(r);
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_ack());
  ASSERT_EQ(m.ack().errors_size(), 0) << what << ": " << m.ack().DebugString();
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::vector<double> analytic = s.FetchValues<double>(r.backward().outputs(i));
    ASSERT_EQ(analytic.size(), values[i].size()) << what;
    for (size_t k = 0; k < values[i].size(); ++k) {
      double f[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<uint64_t> moved = ins;
        std::vector<double> v = values[i];
        const double eps = 1e-6;
        v[k] += side == 0 ? eps : -eps;
        moved[i] = ++next;
        s.Upload<double>(moved[i], shapes[i], kF64, v);
        const uint64_t out = build(s, moved, next + 1, false);
        next += 1000;
        std::vector<double> got = s.FetchValues<double>(out);
        ASSERT_EQ(got.size(), 1u) << what;
        f[side] = got[0];
      }
      const double numeric = (f[0] - f[1]) / 2e-6;
      EXPECT_NEAR(analytic[k], numeric, 1e-4 * std::max(1.0, std::abs(numeric))) << what << " input " << i
                                                                                 << " element " << k;
    }
  }
  (void)t;
}

// out = sum(op(x) * w) with a fixed weight so the gradient is not all ones.
Builder UnaryThen(const std::string& op, std::vector<v1::Value> extra = {}) {
  return [op, extra](RawSession& s, const std::vector<uint64_t>& in, uint64_t h, bool rec) {
    std::vector<v1::Value> args = {T(in[0])};
    for (const auto& e : extra) args.push_back(e);
    v1::Request c = Call(1, op, args, {h});
    c.mutable_call()->set_record_grad(rec);
    s.Send(c);
    v1::Request w = Call(2, "mul.Tensor", {T(h), T(h)}, {h + 1});  // square: non-trivial upstream grad
    w.mutable_call()->set_record_grad(rec);
    s.Send(w);
    v1::Request sm = Call(3, "sum", {T(h + 1), None(), B(false), None()}, {h + 2});
    sm.mutable_call()->set_record_grad(rec);
    s.Send(sm);
    return h + 2;
  };
}

TEST_F(AutogradTest, FormulasMatchFiniteDifferences) {
  RawSession s(stub_.get());
  const std::vector<double> x = {0.3, -0.7, 1.1, 0.45, -0.2, 0.9};
  const std::vector<double> pos = {0.3, 0.7, 1.1, 0.45, 0.2, 0.9};
  for (const char* op : {"exp", "tanh", "sigmoid", "sin", "cos", "neg", "relu", "erf"}) {
    CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen(op), op);
  }
  for (const char* op : {"log", "sqrt", "rsqrt", "reciprocal"}) {
    CheckNumeric(this, s, {{2, 3}}, {pos}, UnaryThen(op), op);
  }
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("gelu", {[] { v1::Value v; v.set_s("none"); return v; }()}), "gelu");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("gelu", {[] { v1::Value v; v.set_s("tanh"); return v; }()}),
               "gelu tanh");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("softmax.int", {I(1), None()}), "softmax");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("log_softmax.int", {I(0), None()}), "log_softmax");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("transpose.int", {I(0), I(1)}), "transpose");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("sum", {IL({1}), B(true), None()}), "sum keepdim");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("mean", {IL({0}), B(false), None()}), "mean");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("amax", {IL({1}), B(false)}), "amax");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("pow.Tensor_Scalar", {I(3)}), "pow scalar");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("select.int", {I(1), I(-1)}), "select");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("slice.Tensor", {I(1), I(1), None(), I(1)}), "slice");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("expand", {IL({4, 2, 3}), B(false)}), "expand");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("reshape", {IL({3, 2})}), "reshape");
  CheckNumeric(this, s, {{2, 3}}, {x}, UnaryThen("clamp", {F(-0.5), F(1.0)}), "clamp");

  // Binary ops with broadcasting.
  auto binary = [](const std::string& op, bool alpha) -> Builder {
    return [op, alpha](RawSession& s, const std::vector<uint64_t>& in, uint64_t h, bool rec) {
      std::vector<v1::Value> args = {T(in[0]), T(in[1])};
      if (alpha) args.push_back(F(1.5));
      v1::Request c = Call(1, op, args, {h});
      c.mutable_call()->set_record_grad(rec);
      s.Send(c);
      return UnaryThen("sum", {None(), B(false), None()})(s, {h}, h + 1, rec);
    };
  };
  const std::vector<double> b = {0.5, -1.5, 2.0};
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("add.Tensor", true), "add");
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("sub.Tensor", true), "sub");
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("mul.Tensor", false), "mul");
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("div.Tensor", false), "div");
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("maximum", false), "maximum");
  CheckNumeric(this, s, {{2, 3}, {3}}, {pos, {0.5, 1.5, 2.0}}, binary("pow.Tensor_Tensor", false), "pow");
  CheckNumeric(this, s, {{2, 3}, {3, 2}}, {x, {1, 2, 3, 4, 5, 6}}, binary("matmul", false), "matmul 2x2");
  CheckNumeric(this, s, {{2, 3}, {3}}, {x, b}, binary("matmul", false), "matmul 2x1");
  CheckNumeric(this, s, {{3}, {3, 2}}, {b, {1, 2, 3, 4, 5, 6}}, binary("matmul", false), "matmul 1x2");
  CheckNumeric(this, s, {{3}, {3}}, {b, {0.1, 0.2, 0.3}}, binary("matmul", false), "dot");
  CheckNumeric(this, s, {{1, 2, 3}, {4, 3, 2}}, {x, std::vector<double>(24, 0.5)}, binary("matmul", false),
               "batched matmul");
  // cat and stack through tensor lists.
  auto joined = [](const std::string& op) -> Builder {
    return [op](RawSession& s, const std::vector<uint64_t>& in, uint64_t h, bool rec) {
      v1::Request c = Call(1, op, {TL({in[0], in[1], in[0]}), I(0)}, {h});
      c.mutable_call()->set_record_grad(rec);
      s.Send(c);
      return UnaryThen("sum", {None(), B(false), None()})(s, {h}, h + 1, rec);
    };
  };
  CheckNumeric(this, s, {{2, 3}, {2, 3}}, {x, pos}, joined("cat"), "cat");
  CheckNumeric(this, s, {{2, 3}, {2, 3}}, {x, pos}, joined("stack"), "stack");
  NoErrors(s.Sync());
}

TEST_F(AutogradTest, InPlaceChangeOfASavedTensorIsReportedAtBackward) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "exp", {T(1)}, {2})));
  s.Send(Rec(Call(2, "add_.Scalar", {T(2), I(1), I(1)}, {0})));  // y.add_(1): output handle 0
  s.Send(Rec(Call(3, "sum", {T(2), None(), B(false), None()}, {3})));
  NoErrors(s.Sync());
  // y is self: version 1 and the in-place node is its grad_fn.
  v1::Ack ack = Backward(s, {.roots = {3}});
  ASSERT_EQ(ack.errors_size(), 1) << ack.DebugString();
  EXPECT_THAT(ack.errors(0).message(),
              HasSubstr("one of the variables needed for gradient computation has been modified by an inplace "
                        "operation: [torch.FloatTensor [3]], which is output 0 of ExpBackward0, is at version 1; "
                        "expected version 0 instead."));
  EXPECT_EQ(ack.errors(0).kind(), "RuntimeError");
  EXPECT_EQ(ack.grad_changed_size(), 0);
}

TEST_F(AutogradTest, InPlaceOnANonLeafRebasesItsHistory) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {1, 2, 3});
  s.Upload<double>(2, {3}, kF64, {2, 2, 2});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "mul.Scalar", {T(1), I(1)}, {3})));     // y = x * 1 (non-leaf)
  s.Send(Rec(Call(2, "mul_.Tensor", {T(3), T(2)}, {0})));    // y *= w
  s.Send(Rec(Call(3, "sum", {T(3), None(), B(false), None()}, {4})));
  v1::Ack ack = Backward(s, {.roots = {4}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(2, 2, 2));  // w
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(1, 2, 3));  // y before the op
  EXPECT_THAT(s.FetchValues<double>(3), ::testing::ElementsAre(2, 4, 6));
}

// An in-place op whose other argument's history reaches back to self's own
// identity (x.mul_(x.view(-1).view(3)): the views' nodes saved x; z.mul_(z *
// z): that mul's node saved z) must not tie the graph into a reference
// cycle: once the session closes, every node it recorded is gone.
TEST_F(AutogradTest, InPlaceOpsOnSavedTensorsLeaveNoCycleBehind) {
  const int64_t before = runtime::Node::Live();
  {
    RawSession s(stub_.get());
    s.Upload<double>(1, {3}, kF64, {1, 2, 3});
    s.Send(RequiresGrad({1}));
    s.Send(Rec(Call(1, "mul.Scalar", {T(1), I(1)}, {2})));          // x = w * 1
    s.Send(Rec(Call(2, "view", {T(2), IL({-1})}, {3})));
    s.Send(Rec(Call(3, "view", {T(3), IL({3})}, {4})));
    s.Send(Rec(Call(4, "mul_.Tensor", {T(2), T(4)}, {0})));         // x.mul_(x.view(-1).view(3))
    s.Send(Rec(Call(5, "mul.Scalar", {T(1), I(2)}, {5})));          // z = w * 2
    s.Send(Rec(Call(6, "mul.Tensor", {T(5), T(5)}, {6})));          // y = z * z
    s.Send(Rec(Call(7, "mul_.Tensor", {T(5), T(6)}, {0})));         // z.mul_(y)
    s.Send(Rec(Call(8, "sum", {T(5), None(), B(false), None()}, {7})));
    NoErrors(s.Sync());
    EXPECT_GT(runtime::Node::Live(), before);
    v1::Ack ack = Backward(s, {.roots = {7}});  // y saved z before the write: an error, as in PyTorch
    ASSERT_EQ(ack.errors_size(), 1) << ack.DebugString();
    s.Send(ReleaseReq({1, 2, 3, 4, 5, 6, 7}));
    NoErrors(s.Sync());
    ASSERT_TRUE(s.Close().ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (runtime::Node::Live() != before && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(runtime::Node::Live(), before);
}

// Waits (up to 10 s: a closed session's graph is freed on the daemon's
// threads) for the count of live nodes to come back to `before`.
int64_t LiveNodesAfterClose(int64_t before) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (runtime::Node::Live() != before && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  return runtime::Node::Live();
}

// A leaf that requires grad can still be rebased by an in-place op once
// requires_grad_(False) is set: neither its AccumulateGrad node (w * 2) nor a
// node that saved it (w * w) may then keep its identity alive, or w's new
// grad_fn (w.mul_(z)), which reaches both through z, closes a cycle.
TEST_F(AutogradTest, ALeafRebasedAfterRequiresGradFalseLeavesNoCycleBehind) {
  const int64_t before = runtime::Node::Live();
  for (const char* first : {"mul.Scalar", "mul.Tensor"}) {
    SCOPED_TRACE(first);
    RawSession s(stub_.get());
    s.Upload<double>(1, {3}, kF64, {1, 2, 3});
    s.Send(RequiresGrad({1}));
    if (std::string(first) == "mul.Scalar") {
      s.Send(Rec(Call(1, first, {T(1), I(2)}, {2})));   // z = w * 2: an edge to w's AccumulateGrad
    } else {
      s.Send(Rec(Call(1, first, {T(1), T(1)}, {2})));   // z = w * w: saves w as well
    }
    s.Send(RequiresGrad({1}, false));
    s.Send(Rec(Call(2, "mul_.Tensor", {T(1), T(2)}, {0})));  // w.mul_(z): w is no leaf any more
    s.Send(Rec(Call(3, "sum", {T(2), None(), B(false), None()}, {3})));
    NoErrors(s.Sync());
    EXPECT_GT(runtime::Node::Live(), before);
    // As PyTorch: z's backward reaches w's AccumulateGrad (or reads w, modified since).
    v1::Ack ack = Backward(s, {.roots = {3}, .retain_graph = true});
    ASSERT_EQ(ack.errors_size(), 1) << ack.DebugString();
    EXPECT_THAT(ack.errors(0).message(),
                std::string(first) == "mul.Scalar"
                    ? HasSubstr("leaf variable has been moved into the graph interior")
                    : HasSubstr("modified by an inplace operation"));
    s.Send(ReleaseReq({1, 2, 3}));
    NoErrors(s.Sync());
    ASSERT_TRUE(s.Close().ok());
  }
  EXPECT_EQ(LiveNodesAfterClose(before), before);
}

// backward(create_graph=True) leaves w.grad with a history that reaches the
// nodes that saved w: closing the session frees them all.
TEST_F(AutogradTest, CreateGraphBackwardIntoALeafsGradLeavesNoCycleBehind) {
  const int64_t before = runtime::Node::Live();
  {
    RawSession s(stub_.get());
    s.Upload<double>(1, {3}, kF64, {1, 2, 3});
    s.Send(RequiresGrad({1}));
    s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(1)}, {2})));  // z = w * w
    s.Send(Rec(Call(2, "sum", {T(2), None(), B(false), None()}, {3})));
    v1::Ack ack = Backward(s, {.roots = {3}, .create_graph = true});  // w.grad = 2w, with history
    ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
    EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(2, 4, 6));
    s.Send(ReleaseReq({1, 2, 3}));
    NoErrors(s.Sync());
    ASSERT_TRUE(s.Close().ok());
  }
  EXPECT_EQ(LiveNodesAfterClose(before), before);
}

TEST_F(AutogradTest, InPlaceOnALeafThatRequiresGradIsRefused) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(7, "add_.Scalar", {T(1), I(1), I(1)}, {0})));
  ExpectOneError(s.Sync(), "a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_THAT(s.FetchValues<float>(1), ::testing::ElementsAre(1, 2));
  // Under no_grad (record_grad false) the same op runs: the optimizer's case.
  s.Send(Call(8, "add_.Scalar", {T(1), I(1), I(1)}, {0}));
  NoErrors(s.Sync());
  EXPECT_THAT(s.FetchValues<float>(1), ::testing::ElementsAre(2, 3));
}

TEST_F(AutogradTest, ASecondBackwardThroughAFreedGraphFailsUnlessRetained) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(1)}, {2})));
  s.Send(Rec(Call(2, "sum", {T(2), None(), B(false), None()}, {3})));
  ASSERT_EQ(Backward(s, {.roots = {3}, .retain_graph = true}).errors_size(), 0);
  ASSERT_EQ(Backward(s, {.roots = {3}}).errors_size(), 0);
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(4, 8));  // 2 * 2x
  v1::Ack ack = Backward(s, {.roots = {3}});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("Trying to backward through the graph a second time"));
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(4, 8));
}

// A predicted backward (Backward.predicted): the client says which .grad the
// daemon will set; nothing is answered; a failure or a wrong prediction is an
// error at the next sync point, held by the expected .grad tensors.
v1::Request PredictedBackwardReq(std::vector<uint64_t> roots, std::vector<uint64_t> expect, bool retain_graph = false) {
  v1::Request r = BackwardReq(0, {.roots = std::move(roots), .retain_graph = retain_graph, .allow_unused = true});
  r.mutable_backward()->set_predicted(true);
  for (uint64_t h : expect) {
    r.mutable_backward()->add_expect_grad_changed(h);
    *r.mutable_backward()->add_expect_grad_metas() = MetaProto({3}, kF64);
  }
  return r;
}

// Leaves 1 = [1, 2, 3] and 2 = [4, 5, 6] (float64, requiring grad); 4 = (1 * 2).sum().
void MulSumOfTwoLeaves(RawSession& s) {
  s.Upload<double>(1, {3}, kF64, {1, 2, 3});
  s.Upload<double>(2, {3}, kF64, {4, 5, 6});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(2)}, {3})));
  s.Send(Rec(Call(2, "sum", {T(3), None(), B(false), None()}, {4})));
}

TEST_F(AutogradTest, APredictedBackwardIsNotAnsweredAndSetsTheExpectedGrads) {
  RawSession s(stub_.get());
  MulSumOfTwoLeaves(s);
  s.Send(PredictedBackwardReq({4}, {1, 2}));
  // The Sync's Ack is the next message: the backward wrote none.
  NoErrors(s.Sync());
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(4, 5, 6));
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(1, 2, 3));
}

TEST_F(AutogradTest, AWrongPredictionIsAnErrorAtTheNextSyncAndTheGradHoldsIt) {
  RawSession s(stub_.get());
  MulSumOfTwoLeaves(s);
  s.Send(PredictedBackwardReq({4}, {1}));  // handle 2 gets a .grad too
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "backward");
  EXPECT_THAT(errors[0].message(), HasSubstr("2 tensors got a new .grad, the client expected 1"));
  s.Send(GetGradReq(1, 50));
  FetchResult f = s.Fetch(50);
  EXPECT_FALSE(f.ok);
  EXPECT_THAT(f.error.message(), HasSubstr("prediction of the gradients differs"));
  // The session goes on.
  s.Send(Rec(Call(3, "sum", {T(1), None(), B(false), None()}, {5})));
  EXPECT_THAT(s.FetchValues<double>(5), ::testing::ElementsAre(6));
}

TEST_F(AutogradTest, AFailedPredictedBackwardFailsTheExpectedGrads) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {1, 2, 3});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(1)}, {2})));
  s.Send(Rec(Call(2, "sum", {T(2), None(), B(false), None()}, {3})));
  s.Send(PredictedBackwardReq({3}, {1}));
  NoErrors(s.Sync());
  s.Send(SetGradReq(1, 0));                // .grad = None
  s.Send(PredictedBackwardReq({3}, {1}));  // through the freed graph
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("Trying to backward through the graph a second time"));
  EXPECT_EQ(errors[0].call_site(), "test.py:9");
  s.Send(GetGradReq(1, 51));
  FetchResult f = s.Fetch(51);
  EXPECT_FALSE(f.ok);
  EXPECT_THAT(f.error.message(), HasSubstr("Trying to backward through the graph a second time"));
}

TEST_F(AutogradTest, RootErrors) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Upload<double>(2, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Scalar", {T(1), I(3)}, {3})));
  v1::Ack ack = Backward(s, {.roots = {2}});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(),
              HasSubstr("element 0 of tensors does not require grad and does not have a grad_fn"));
  ack = Backward(s, {.roots = {3}});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("grad can be implicitly created only for scalar outputs"));
  // An explicit gradient of the root's shape works; another shape does not.
  s.Upload<double>(4, {2}, kF64, {1, 10});
  s.Upload<double>(5, {3}, kF64, {1, 10, 100});
  ack = Backward(s, {.roots = {3}, .grad_roots = {5}, .retain_graph = true});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("Mismatch in shape"));
  ASSERT_EQ(Backward(s, {.roots = {3}, .grad_roots = {4}}).errors_size(), 0);
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(3, 30));
}

TEST_F(AutogradTest, AutogradGradWithCreateGraphGivesTheSecondDerivative) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {}, kF64, {2.0});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(1)}, {2})));
  s.Send(Rec(Call(2, "mul.Tensor", {T(2), T(1)}, {3})));  // x^3
  v1::Ack ack = Backward(s, {.roots = {3}, .inputs = {1}, .outputs = {10}, .create_graph = true, .accumulate = false});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.defined(), ::testing::ElementsAre(true));
  EXPECT_THAT(ack.grad_requires_grad(), ::testing::ElementsAre(true));
  EXPECT_THAT(s.FetchValues<double>(10), ::testing::ElementsAre(12.0));  // 3x^2
  ack = Backward(s, {.roots = {10}, .inputs = {1}, .outputs = {11}, .accumulate = false});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.grad_requires_grad(), ::testing::ElementsAre(false));
  EXPECT_THAT(s.FetchValues<double>(11), ::testing::ElementsAre(12.0));  // 6x
  // grad() does not touch .grad.
  s.Send(GetGradReq(1, 12));
  ExpectOneError(s.Sync(), "has no .grad");
}

TEST_F(AutogradTest, UnusedInputsNeedAllowUnused) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Upload<double>(2, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "sum", {T(1), None(), B(false), None()}, {3})));
  v1::Ack ack = Backward(s, {.roots = {3}, .inputs = {1, 2}, .outputs = {10, 11}, .retain_graph = true,
                             .accumulate = false});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("appears to not have been used in the graph"));
  ack = Backward(s, {.roots = {3}, .inputs = {1, 2}, .outputs = {12, 13}, .accumulate = false, .allow_unused = true});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.defined(), ::testing::ElementsAre(true, false));
  EXPECT_THAT(s.FetchValues<double>(12), ::testing::ElementsAre(1, 1));
}

TEST_F(AutogradTest, RetainGradKeepsANonLeafGradient) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Scalar", {T(1), I(3)}, {2})));
  v1::Request rg;
  rg.mutable_retain_grad()->set_handle(2);
  s.Send(rg);
  s.Send(Rec(Call(2, "mul.Tensor", {T(2), T(2)}, {3})));
  s.Send(Rec(Call(3, "sum", {T(3), None(), B(false), None()}, {4})));
  v1::Ack ack = Backward(s, {.roots = {4}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.grad_changed(), ::testing::ElementsAre(1, 2));
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(6, 12));  // 2y
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(18, 36));
}

TEST_F(AutogradTest, IntegerOutputsDoNotRequireGradAndMaxDimFlowsToTheIndices) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2, 3}, kF64, {1, 5, 2, 7, 0, 3});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "max.dim", {T(1), I(1), B(false)}, {2, 3})));
  s.Send(Rec(Call(2, "sum", {T(2), None(), B(false), None()}, {4})));
  v1::Ack ack = Backward(s, {.roots = {4}});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(0, 1, 0, 1, 0, 0));
  // The indices output has no history.
  ack = Backward(s, {.roots = {3}});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("does not require grad"));
}

// A user-defined Function: the fake client answers the BackwardCallback.
TEST_F(AutogradTest, BackwardCallsAPythonFunctionBackOverTheStream) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {0, 1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Call(1, "exp", {T(1)}, {2}));  // the Function's forward, not recorded
  v1::Request rf;
  v1::RecordFunction* f = rf.mutable_record_function();
  f->set_function_id(77);
  f->set_name("MyExpBackward");
  f->add_inputs(1);
  f->add_outputs(2);
  f->set_materialize_grads(true);
  s.Send(rf);
  s.Send(Rec(Call(2, "mul.Scalar", {T(2), I(2)}, {3})));  // a daemon op after the Function
  s.Send(Rec(Call(3, "sum", {T(3), None(), B(false), None()}, {4})));
  NoErrors(s.Sync());
  s.Send(BackwardReq(50, {.roots = {4}}));
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback()) << m.DebugString();
  const v1::BackwardCallback cb = m.callback();
  EXPECT_EQ(cb.function_id(), 77u);
  ASSERT_EQ(cb.grads_size(), 1);
  const uint64_t g = cb.grads(0);
  EXPECT_NE(g & (uint64_t{1} << 63), 0u);
  ASSERT_EQ(cb.metas_size(), 1);
  EXPECT_THAT(cb.metas(0).sizes(), ::testing::ElementsAre(3));
  EXPECT_FALSE(cb.create_graph());
  // The client's backward: fetch the incoming grad (a request executed while
  // the daemon waits), compute grad * exp(x), then answer; a Sync in the same
  // message must run after the backward finished.
  EXPECT_THAT(s.FetchValues<double>(g), ::testing::ElementsAre(2, 2, 2));
  s.Send(Call(4, "mul.Tensor", {T(g), T(2)}, {20}));
  v1::Request res;
  res.mutable_callback_result()->set_callback_id(cb.callback_id());
  res.mutable_callback_result()->add_grads(20);
  v1::Request sync;
  sync.mutable_sync()->set_request_id(51);
  s.Send({res, sync, ReleaseReq({g, 20})});
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_ack()) << m.DebugString();
  EXPECT_EQ(m.ack().request_id(), 50u);
  EXPECT_EQ(m.ack().errors_size(), 0) << m.DebugString();
  EXPECT_THAT(m.ack().grad_changed(), ::testing::ElementsAre(1));
  ASSERT_TRUE(s.Read(&m));
  EXPECT_EQ(m.ack().request_id(), 51u);
  std::vector<double> gx = Grad(s, 1);
  ASSERT_EQ(gx.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(gx[i], 2 * std::exp(i), 1e-12);
  // Releasing the Function's outputs frees its node: the next Ack says so.
  s.Send(ReleaseReq({2, 3, 4}));
  v1::Request sy;
  sy.mutable_sync()->set_request_id(52);
  s.Send(sy);
  ASSERT_TRUE(s.Read(&m));
  EXPECT_THAT(m.ack().released_functions(), ::testing::ElementsAre(77));
}

// Two client threads' backwards nest: the outer callback's result arrives
// while the daemon waits inside the inner backward, and the client releases
// that result's tensor right after answering (as the client library does).
// The stored result keeps its tensor until the outer backward takes it.
TEST_F(AutogradTest, AnOuterCallbackResultAnsweredFirstKeepsItsTensorsWhenReleased) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {0, 1, 2});
  s.Upload<double>(11, {3}, kF64, {3, 4, 5});
  s.Send(RequiresGrad({1, 11}));
  for (uint64_t k : {uint64_t{0}, uint64_t{10}}) {  // x -> Function(exp) -> sum, twice
    s.Send(Call(1 + k, "exp", {T(1 + k)}, {2 + k}));
    v1::Request rf;
    rf.mutable_record_function()->set_function_id(77 + k);
    rf.mutable_record_function()->set_name("MyExpBackward");
    rf.mutable_record_function()->add_inputs(1 + k);
    rf.mutable_record_function()->add_outputs(2 + k);
    rf.mutable_record_function()->set_materialize_grads(true);
    s.Send(rf);
    s.Send(Rec(Call(2 + k, "sum", {T(2 + k), None(), B(false), None()}, {3 + k})));
  }
  NoErrors(s.Sync());
  s.Send(BackwardReq(50, {.roots = {3}}));
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback()) << m.DebugString();
  const v1::BackwardCallback outer = m.callback();
  s.Send(BackwardReq(60, {.roots = {13}}));  // runs while the daemon waits for `outer`
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback()) << m.DebugString();
  const v1::BackwardCallback inner = m.callback();
  ASSERT_EQ(inner.function_id(), 87u);
  // The outer result first, its tensor released at once; then the inner one.
  s.Send(Call(4, "mul.Tensor", {T(outer.grads(0)), T(2)}, {20}));
  v1::Request res;
  res.mutable_callback_result()->set_callback_id(outer.callback_id());
  res.mutable_callback_result()->add_grads(20);
  s.Send({res, ReleaseReq({20})});
  s.Send(Call(5, "mul.Tensor", {T(inner.grads(0)), T(12)}, {21}));
  res.mutable_callback_result()->set_callback_id(inner.callback_id());
  res.mutable_callback_result()->set_grads(0, 21);
  s.Send({res, ReleaseReq({21})});
  for (uint64_t want : {60u, 50u}) {
    ASSERT_TRUE(s.Read(&m));
    ASSERT_TRUE(m.has_ack()) << m.DebugString();
    EXPECT_EQ(m.ack().request_id(), want);
    EXPECT_EQ(m.ack().errors_size(), 0) << m.DebugString();
  }
  std::vector<double> g1 = Grad(s, 1), g11 = Grad(s, 11);
  ASSERT_EQ(g1.size(), 3u);
  ASSERT_EQ(g11.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(g1[i], std::exp(i), 1e-12);
    EXPECT_NEAR(g11[i], std::exp(3 + i), 1e-9);
  }
}

TEST_F(AutogradTest, CallbackErrorsAndWrongShapesFailTheBackwardNamingTheFunction) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {3}, kF64, {0, 1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Call(1, "exp", {T(1)}, {2}));
  v1::Request rf;
  rf.mutable_record_function()->set_function_id(5);
  rf.mutable_record_function()->set_name("MyFnBackward");
  rf.mutable_record_function()->add_inputs(1);
  rf.mutable_record_function()->add_outputs(2);
  s.Send(rf);
  s.Send(Rec(Call(2, "sum", {T(2), None(), B(false), None()}, {3})));
  s.Upload<double>(9, {2}, kF64, {1, 2});  // wrong shape

  // 1: a result with a wrong callback id is an error but the daemon keeps waiting.
  s.Send(BackwardReq(60, {.roots = {3}, .retain_graph = true}));
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback());
  v1::Request wrong;
  wrong.mutable_callback_result()->set_callback_id(m.callback().callback_id() + 100);
  v1::Request shape;
  shape.mutable_callback_result()->set_callback_id(m.callback().callback_id());
  shape.mutable_callback_result()->add_grads(9);
  s.Send({wrong, shape});
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_ack());
  ASSERT_EQ(m.ack().errors_size(), 1) << m.DebugString();
  EXPECT_THAT(m.ack().errors(0).message(), HasSubstr("MyFnBackward returned an invalid gradient at index 0"));
  ExpectOneError(s.Sync(), "the daemon waits for callback");

  // 2: the client's error fails the backward with that error.
  s.Send(BackwardReq(61, {.roots = {3}, .retain_graph = true}));
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback());
  v1::Request err;
  err.mutable_callback_result()->set_callback_id(m.callback().callback_id());
  err.mutable_callback_result()->mutable_error()->set_kind("ValueError");
  err.mutable_callback_result()->mutable_error()->set_message("boom in backward");
  s.Send(err);
  ASSERT_TRUE(s.Read(&m));
  ASSERT_EQ(m.ack().errors_size(), 1);
  EXPECT_THAT(m.ack().errors(0).message(), HasSubstr("boom in backward"));

  // 3: wrong number of gradients.
  s.Send(BackwardReq(62, {.roots = {3}}));
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback());
  v1::Request two;
  two.mutable_callback_result()->set_callback_id(m.callback().callback_id());
  two.mutable_callback_result()->add_grads(0);
  two.mutable_callback_result()->add_grads(0);
  s.Send(two);
  ASSERT_TRUE(s.Read(&m));
  ASSERT_EQ(m.ack().errors_size(), 1);
  EXPECT_THAT(m.ack().errors(0).message(), HasSubstr("incorrect number of gradients"));
  NoErrors(s.Sync());
}

TEST_F(AutogradTest, HostileAutogradRequestsNeverCrash) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Upload<int64_t>(2, {2}, ScalarType::kInt64, {1, 2});
  s.Send(RequiresGrad({99}));
  ExpectOneError(s.Sync(), "unknown tensor handle 99");
  s.Send(RequiresGrad({2}));
  ExpectOneError(s.Sync(), "only Tensors of floating point");
  v1::Request cr;
  cr.mutable_callback_result()->set_callback_id(3);
  cr.mutable_callback_result()->add_grads(12345);
  s.Send(cr);
  ExpectOneError(s.Sync(), "no backward callback is waiting");
  v1::Request sg;
  sg.mutable_set_grad()->set_handle(1);
  sg.mutable_set_grad()->set_grad(2);
  s.Send(sg);
  ExpectOneError(s.Sync(), "different type");
  sg.mutable_set_grad()->set_grad(4242);
  s.Send(sg);
  ExpectOneError(s.Sync(), "unknown tensor handle 4242");
  v1::Request rg;
  rg.mutable_retain_grad()->set_handle(31337);
  s.Send(rg);
  ExpectOneError(s.Sync(), "unknown tensor handle");
  s.Send(GetGradReq(31337, 40));
  ExpectOneError(s.Sync(), "unknown tensor handle");
  s.Send(GetGradReq(1, 0));
  ExpectOneError(s.Sync(), "handle 0 is reserved");
  v1::Ack ack = Backward(s, {.roots = {777}});
  EXPECT_EQ(ack.errors_size(), 1);
  ack = Backward(s, {});
  EXPECT_EQ(ack.errors_size(), 1);
  s.Send(RequiresGrad({1}));
  ack = Backward(s, {.roots = {1}, .inputs = {1}, .outputs = {1}, .accumulate = false});
  EXPECT_EQ(ack.errors_size(), 1);
  ack = Backward(s, {.roots = {1}, .grad_roots = {1, 2}});
  EXPECT_EQ(ack.errors_size(), 1);
  v1::Request rf;
  rf.mutable_record_function()->set_function_id(9);
  rf.mutable_record_function()->add_inputs(555);
  s.Send(rf);
  ExpectOneError(s.Sync(), "unknown tensor handle 555");
  // The session still works.
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(1)}, {3})));
  s.Send(Rec(Call(2, "sum", {T(3), None(), B(false), None()}, {4})));
  ASSERT_EQ(Backward(s, {.roots = {4}}).errors_size(), 0);
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(2, 4));
}

TEST_F(AutogradTest, ALongChainIsDifferentiatedAndFreedWithoutDeepRecursion) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {}, kF64, {1.0});
  s.Send(RequiresGrad({1}));
  constexpr int kSteps = 50000;
  std::vector<v1::Request> reqs;
  uint64_t h = 1;
  for (int i = 0; i < kSteps; ++i) {
    reqs.push_back(Rec(Call(i + 1, "mul.Scalar", {T(h), F(1.0)}, {h + 1})));
    reqs.push_back(ReleaseReq({h + 1 == 2 ? 0 : h}));  // keep only the newest (and the leaf)
    if (h + 1 == 2) reqs.pop_back();
    ++h;
  }
  s.Send(std::move(reqs));
  NoErrors(s.Sync());
  ASSERT_EQ(Backward(s, {.roots = {h}}).errors_size(), 0);
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(1.0));
  s.Send(ReleaseReq({h}));
  NoErrors(s.Sync());
}

TEST_F(AutogradTest, GradWithRespectToANonLeafDoesNotRunItsNode) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "exp", {T(1)}, {2})));
  s.Send(Rec(Call(2, "mul.Scalar", {T(2), I(3)}, {3})));
  s.Send(Rec(Call(3, "sum", {T(3), None(), B(false), None()}, {4})));
  // exp's saved result is modified: differentiating w.r.t. y = exp(x) must
  // not run ExpBackward0 (it would fail the version check).
  s.Send(Call(4, "add_.Scalar", {T(2), I(0), I(1)}, {0}));
  v1::Ack ack = Backward(s, {.roots = {4}, .inputs = {2}, .outputs = {10}, .accumulate = false});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(s.FetchValues<double>(10), ::testing::ElementsAre(3, 3));
}

TEST_F(AutogradTest, ReleasingEverythingFreesTheGraphAndItsMemory) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {256}, kF64, std::vector<double>(256, 1.0));
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "exp", {T(1)}, {2})));
  s.Send(Rec(Call(2, "mul.Tensor", {T(2), T(1)}, {3})));
  s.Send(Rec(Call(3, "sum", {T(3), None(), B(false), None()}, {4})));
  ASSERT_EQ(Backward(s, {.roots = {4}, .retain_graph = true}).errors_size(), 0);
  s.Send(ReleaseReq({1, 2, 3, 4}));
  NoErrors(s.Sync());
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
  // With create_graph, .grad's graph reaches the leaf again (a cycle, as in
  // PyTorch); closing the session still frees everything.
  s.Upload<double>(5, {256}, kF64, std::vector<double>(256, 1.0));
  s.Send(RequiresGrad({5}));
  s.Send(Rec(Call(4, "exp", {T(5)}, {6})));
  s.Send(Rec(Call(5, "mul.Tensor", {T(6), T(5)}, {7})));
  s.Send(Rec(Call(6, "sum", {T(7), None(), B(false), None()}, {8})));
  ASSERT_EQ(Backward(s, {.roots = {8}, .create_graph = true}).errors_size(), 0);
  EXPECT_TRUE(s.Finish().ok());
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
}

TEST_F(AutogradTest, FunctionOptionsNoneGradsNonDifferentiableOutputsAndDirtyInputs) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Send(RequiresGrad({1}));
  s.Send(Call(1, "mul.Scalar", {T(1), I(2)}, {2}));
  s.Send(Call(2, "mul.Scalar", {T(1), I(3)}, {3}));
  v1::Request rf;
  v1::RecordFunction* f = rf.mutable_record_function();
  f->set_function_id(8);
  f->set_name("TwoOutBackward");
  f->add_inputs(1);
  f->add_inputs(0);  // a non-tensor forward argument
  f->add_outputs(2);
  f->add_outputs(3);
  f->add_non_differentiable(false);
  f->add_non_differentiable(true);
  f->set_materialize_grads(false);
  s.Send(rf);
  s.Send(Rec(Call(3, "sum", {T(2), None(), B(false), None()}, {4})));
  NoErrors(s.Sync());
  // The non-differentiable output does not require grad.
  v1::Ack ack = Backward(s, {.roots = {3}});
  ASSERT_EQ(ack.errors_size(), 1);
  EXPECT_THAT(ack.errors(0).message(), HasSubstr("does not require grad"));
  s.Send(BackwardReq(70, {.roots = {4}}));
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_callback()) << m.DebugString();
  ASSERT_EQ(m.callback().grads_size(), 2);
  EXPECT_NE(m.callback().grads(0), 0u);
  EXPECT_EQ(m.callback().grads(1), 0u);  // no grad and materialize_grads=false: None
  EXPECT_EQ(m.callback().metas_size(), 1);
  v1::Request res;
  res.mutable_callback_result()->set_callback_id(m.callback().callback_id());
  res.mutable_callback_result()->add_grads(m.callback().grads(0));
  res.mutable_callback_result()->add_grads(0);
  s.Send(res);
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_ack()) << m.DebugString();
  ASSERT_EQ(m.ack().errors_size(), 0) << m.DebugString();
  EXPECT_THAT(Grad(s, 1), ::testing::ElementsAre(1, 1));
}

TEST_F(AutogradTest, BackwardWithInputsAccumulatesOnlyThoseAndCreateGraphGradsRequireGrad) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Upload<double>(2, {2}, kF64, {3, 4});
  s.Send(RequiresGrad({1, 2}));
  s.Send(Rec(Call(1, "mul.Tensor", {T(1), T(2)}, {3})));
  s.Send(Rec(Call(2, "sum", {T(3), None(), B(false), None()}, {4})));
  v1::Ack ack = Backward(s, {.roots = {4}, .inputs = {2}, .create_graph = true});
  ASSERT_EQ(ack.errors_size(), 0) << ack.DebugString();
  EXPECT_THAT(ack.grad_changed(), ::testing::ElementsAre(2));
  EXPECT_THAT(ack.grad_requires_grad(), ::testing::ElementsAre(true));
  EXPECT_THAT(Grad(s, 2), ::testing::ElementsAre(1, 2));
  s.Send(GetGradReq(1, 60));
  ExpectOneError(s.Sync(), "has no .grad");
}

TEST_F(AutogradTest, SetGradThenBackwardAccumulatesIntoTheAssignedTensor) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2}, kF64, {1, 2});
  s.Upload<double>(2, {2}, kF64, {100, 200});
  s.Send(RequiresGrad({1}));
  v1::Request sg;
  sg.mutable_set_grad()->set_handle(1);
  sg.mutable_set_grad()->set_grad(2);
  s.Send(sg);
  s.Send(Rec(Call(1, "sum", {T(1), None(), B(false), None()}, {3})));
  ASSERT_EQ(Backward(s, {.roots = {3}}).errors_size(), 0);
  EXPECT_THAT(s.FetchValues<double>(2), ::testing::ElementsAre(101, 201));  // in place, as PyTorch
  sg.mutable_set_grad()->set_grad(0);
  s.Send(sg);
  s.Send(GetGradReq(1, 61));
  ExpectOneError(s.Sync(), "has no .grad");
}

TEST_F(AutogradTest, InPlaceOnAViewOfATensorThatRequiresGradIsNotImplemented) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {2, 2}, kF64, {1, 2, 3, 4});
  s.Send(RequiresGrad({1}));
  s.Send(Rec(Call(1, "mul.Scalar", {T(1), I(1)}, {2})));
  s.Send(Rec(Call(2, "select.int", {T(2), I(0), I(0)}, {3})));
  s.Send(Rec(Call(3, "mul_.Scalar", {T(3), I(2)}, {0})));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind(), "NotImplementedError");
  EXPECT_THAT(errors[0].message(), HasSubstr("mul_.Scalar"));
  // detach() is no differentiable view: writing it in place is fine.
  s.Send(Call(4, "detach", {T(2)}, {4}));
  s.Send(Call(5, "mul_.Scalar", {T(4), I(2)}, {0}));
  NoErrors(s.Sync());
  EXPECT_THAT(s.FetchValues<double>(2), ::testing::ElementsAre(2, 4, 6, 8));
}

TEST_F(AutogradTest, ManualSeedMakesRandomOpsReproducible) {
  RawSession s(stub_.get());
  v1::Request seed;
  seed.mutable_manual_seed()->set_seed(1234);
  s.Send(seed);
  s.Send(Call(1, "rand", {IL({4}), None(), None()}, {1}));
  s.Send(seed);
  s.Send(Call(2, "rand", {IL({4}), None(), None()}, {2}));
  NoErrors(s.Sync());
  EXPECT_EQ(s.FetchValues<float>(1), s.FetchValues<float>(2));
}

// Every op's record (tensord/meta/ops.inl) gives a differentiable op both
// a formula and a saved-reads rule (from which meta-mode backward predicts a
// second backward's and a modified saved tensor's errors), and a
// TD_OP_ND op neither. (That each rule says what its formula reads is
// checked on every formula run of the Python tests, which set
// TENSORD_CHECK_SAVED_READS=1; test_autograd_meta.py compares outcomes.)
TEST(FormulaCompleteness, EveryDifferentiableOpHasAFormulaAndASavedReadsRule) {
  std::vector<std::string> missing, extra;
  for (const OpEntry& e : OpTable::Get().entries()) {
    const bool differentiable = !e.has(kNotDifferentiable);
    const bool formula = runtime::FindFormula(e) != nullptr;
    const bool rule = HasSavedReadsRule(e);
    if (differentiable && (!formula || !rule)) missing.push_back(e.full_name());
    if (!differentiable && (formula || rule)) extra.push_back(e.full_name());
  }
  EXPECT_TRUE(missing.empty()) << "differentiable ops without a formula or a saved-reads rule: "
                               << ::testing::PrintToString(missing);
  EXPECT_TRUE(extra.empty()) << "non-differentiable ops with a formula or a saved-reads rule: "
                             << ::testing::PrintToString(extra);
}

// An op defined at run time has no built-in formula, whatever its id.
TEST(FormulaCompleteness, OpsOfAnotherTableHaveNoFormula) {
  const OpEntry& mul = *OpTable::Get().Find("mul.Tensor");
  EXPECT_NE(runtime::FindFormula(mul), nullptr);
  OpEntry copy = mul;  // same id, not an entry of the process's table
  EXPECT_EQ(runtime::FindFormula(copy), nullptr);
}

// An in-place op whose formula reads self must read self as it was before
// the op: the daemon saves a clone then (InplaceNeedsOriginalSelf), and the
// client's meta mode treats that saved self as a snapshot no later in-place
// op can change. One whose formula never reads self saves no clone.
TEST(FormulaCompleteness, InPlaceOpsReadingSelfSaveTheOriginal) {
  for (const OpEntry& e : OpTable::Get().entries()) {
    if (!e.is_inplace() || e.has(kNotDifferentiable) || !HasSavedReadsRule(e)) continue;
    std::vector<std::vector<int>> arg_slots;
    int n = 0;
    for (const Argument& a : e.schema.arguments) {
      const bool tensor = a.type == ArgType::kTensor || a.type == ArgType::kTensorList ||
                          a.type == ArgType::kOptionalTensorList;
      arg_slots.push_back(tensor ? std::vector<int>{n++} : std::vector<int>{});
    }
    const std::vector<SavedRead> reads = PredictSavedReads(e, arg_slots, [](int) { return true; });
    const bool reads_self =
        std::find(reads.begin(), reads.end(), SavedRead{SavedRead::Kind::kInput, 0}) != reads.end() ||
        std::find(reads.begin(), reads.end(), SavedRead{SavedRead::Kind::kAnySaved, 0}) != reads.end();
    EXPECT_EQ(runtime::InplaceNeedsOriginalSelf(e), reads_self) << e.full_name();
  }
}

TEST(SavedReads, PredictionFollowsWhichInputsNeedAGradient) {
  const OpEntry& mul = *OpTable::Get().Find("mul.Tensor");
  const std::vector<std::vector<int>> two = {{0}, {1}};
  using K = SavedRead::Kind;
  auto predict = [&](const OpEntry& op, const std::vector<std::vector<int>>& slots, std::vector<bool> needs) {
    return PredictSavedReads(op, slots, [&](int s) { return needs[s]; });
  };
  EXPECT_EQ(predict(mul, two, {true, false}), (std::vector<SavedRead>{{K::kInput, 1}}));
  EXPECT_EQ(predict(mul, two, {false, true}), (std::vector<SavedRead>{{K::kInput, 0}}));
  EXPECT_EQ(predict(mul, two, {true, true}), (std::vector<SavedRead>{{K::kInput, 1}, {K::kInput, 0}}));
  // div reads other always, then self for other's gradient.
  const OpEntry& div = *OpTable::Get().Find("div.Tensor");
  EXPECT_EQ(predict(div, two, {true, false}), (std::vector<SavedRead>{{K::kInput, 1}}));
  EXPECT_EQ(predict(div, two, {false, true}), (std::vector<SavedRead>{{K::kInput, 1}, {K::kInput, 0}}));
  EXPECT_TRUE(predict(*OpTable::Get().Find("add.Tensor"), two, {true, true}).empty());
  EXPECT_EQ(predict(*OpTable::Get().Find("exp"), {{0}}, {true}), (std::vector<SavedRead>{{K::kOutput, 0}}));
  EXPECT_EQ(predict(*OpTable::Get().Find("mul.Scalar"), {{0}, {}}, {true}),
            (std::vector<SavedRead>{{K::kAnySaved, 0}}));
  // index.Tensor reads every index tensor (None items have no slot).
  EXPECT_EQ(predict(*OpTable::Get().Find("index.Tensor"), {{0}, {1, -1, 2}}, {true, false, false}),
            (std::vector<SavedRead>{{K::kInput, 1}, {K::kInput, 2}}));
}

TEST(FormulaCompleteness, AFormulaCallingAMissingOpFailsLoudly) {
  absl::Status error;
  EXPECT_EQ(runtime::RequireOp("no_such_op.Tensor", &error), nullptr);
  EXPECT_THAT(std::string(error.message()), HasSubstr("no_such_op.Tensor"));
  // The first error is kept; a known op is found and leaves it alone.
  EXPECT_NE(runtime::RequireOp("add.Tensor", &error), nullptr);
  EXPECT_EQ(runtime::RequireOp("other_missing_op", &error), nullptr);
  EXPECT_THAT(std::string(error.message()), HasSubstr("no_such_op.Tensor"));
}

}  // namespace
}  // namespace tensord::testing
