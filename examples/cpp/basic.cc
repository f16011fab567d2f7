// tensord_example — the C++ client in a few lines.
//
// 1. Spawns a private daemon (or connects to $TENSORD_ADDRESS), uploads two
//    matrices, multiplies them in the daemon, sums, and prints the values.
// 2. Infers the shapes of an attention projection in meta mode, with no
//    daemon at all.
//
//   ./build/bin/tensord_example
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tensord/client/client.h"

namespace tc = tensord::client;

namespace {

// Prints `what` and exits when `s` is an error (examples keep it short).
template <typename T>
T Check(absl::StatusOr<T> s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, std::string(s.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(s);
}

void PrintMatrix(const char* name, const tc::Tensor& t) {
  tc::HostData d = Check(t.Fetch(), "fetch");
  const std::vector<double> v = d.ToDoubles();
  const int64_t rows = t.dim() == 2 ? t.sizes()[0] : 1;
  const int64_t cols = t.dim() == 2 ? t.sizes()[1] : t.numel();
  std::printf("%s %s =\n", name, tensord::ShapeToString(t.sizes()).c_str());
  for (int64_t r = 0; r < rows; ++r) {
    std::printf("  ");
    for (int64_t c = 0; c < cols; ++c) std::printf("%8.2f", v[r * cols + c]);
    std::printf("\n");
  }
}

}  // namespace

int main() {
  // ---- 1. real tensors in a daemon ---------------------------------------
  std::shared_ptr<tc::Session> session;
  if (const char* addr = std::getenv("TENSORD_ADDRESS"); addr != nullptr && *addr != '\0') {
    session = Check(tc::Session::Connect(addr), "connect");
  } else {
    session = Check(tc::Session::SpawnEmbedded(), "spawn embedded daemon");
  }
  tc::SessionGuard use(session);
  std::printf("session %llu with the daemon at %s\n", static_cast<unsigned long long>(session->session_id()),
              session->address().c_str());

  tc::Tensor a = Check(tc::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}), "upload a");
  tc::Tensor b = Check(tc::FromVector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2}), "upload b");
  tc::Tensor c = Check(tc::Matmul(a, b), "matmul");          // streamed, no wait
  tc::Tensor s = Check(tc::Sum(c), "sum");                    // streamed, no wait
  tc::Tensor r = Check(tc::Call1("arange", {6}), "arange");   // any op of the table by name
  tc::Tensor m = Check(tc::Call1("reshape", {r, tensord::Shape{2, 3}}), "reshape");
  tc::Tensor mx = Check(tc::Call1("amax", {m, 1}), "amax");

  PrintMatrix("a", a);
  PrintMatrix("a @ b", c);
  std::printf("sum(a @ b) = %g\n", Check(s.Item(), "item").to_double());
  PrintMatrix("arange(6).reshape(2, 3).amax(1)", mx);

  tc::Stats st = session->stats();
  std::printf("ops issued %lld, uploads %lld, messages sent %lld, round trips %lld\n",
              static_cast<long long>(st.ops_issued), static_cast<long long>(st.uploads),
              static_cast<long long>(st.messages_sent), static_cast<long long>(st.round_trips));
  if (absl::Status cs = session->Close(); !cs.ok()) {
    std::fprintf(stderr, "close failed: %s\n", std::string(cs.message()).c_str());
    return 1;
  }

  // ---- 2. meta mode: shapes without data, no daemon ----------------------
  {
    tc::DeviceGuard meta(tensord::kMetaDevice);
    const int64_t seq = 128, d_model = 512, heads = 8, head_dim = d_model / heads;
    tc::Tensor x = Check(tc::Randn({seq, d_model}), "randn");
    tc::Tensor w = Check(tc::Randn({d_model, 3 * d_model}), "randn");
    tc::Tensor qkv = Check(tc::Matmul(x, w), "matmul");
    tc::Tensor q = Check(tc::Index(qkv, {tc::Slice{}, tc::Slice{0, d_model, std::nullopt}}), "slice");
    q = Check(tc::Reshape(q, {seq, heads, head_dim}), "reshape");
    q = Check(tc::Call1("transpose", {q, 0, 1}), "transpose");
    std::printf("meta: q is %s, strides %s, on %s (meta ops run: %lld)\n", tensord::ShapeToString(q.sizes()).c_str(),
                tensord::ShapeToString(q.strides()).c_str(), q.device().ToString().c_str(),
                static_cast<long long>(tc::MetaOpsRun()));
  }
  return 0;
}
