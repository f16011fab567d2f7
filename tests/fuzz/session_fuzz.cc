// Fuzz target: a session's requests as the daemon receives them. Each input
// runs against a fresh session that already holds a few tensors and two
// mapped shared-memory segments (memfds, as the side channel maps them; the
// second is the adopted storage of a tensor), through the daemon's own
// handler, Session::ExecuteMessage.
//
// Input: records, each a tag byte, a little-endian 16-bit length and that
// many bytes (cut at the end of the input):
//   tag % 4 == 0: a v1::ClientMessage, parsed by protobuf and executed;
//   tag % 4 == 1: the same through wire::ParseClientMessage and
//                 Session::PlaceUploadData (the gRPC stream's path);
//   tag % 4 == 2: bytes the client writes into segment 1 at the offset in
//                 the record's first two bytes (between messages, as a client
//                 may at any time);
//   tag % 4 == 3: the same for segment 2 (a tensor's adopted storage).
// A backward that waits for a callback's result reads the next message record.
//
// Seeds: TENSORD_FUZZ_WRITE_SEEDS=DIR session_fuzz writes the seed corpus
// (tests/fuzz/corpus/session) built from the op table, then exits.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/meta/op_registry.h"
#include "tensord/meta/op_table.h"
#include "tensord/server/session.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/data_frame.h"

namespace {

using tensord::server::Session;
namespace v1 = tensord::v1;

constexpr uint64_t kSegmentBytes = 64 << 10;
constexpr int64_t kSessionLimitBytes = 64 << 20;
constexpr size_t kMaxReplyBytes = 8 << 20;

struct Globals {
  tensord::runtime::Backends devices;
};

Globals& G() {
  static Globals* g = [] {
    auto* g = new Globals;
    tensord::backends::CpuAllocatorOptions o;
    o.cache_limit_bytes = 0;  // every free unmaps: ASan sees use after free
    auto cpu = tensord::backends::CpuBackend::Create(o);
    if (!cpu.ok()) abort();
    g->devices.Add(*std::move(cpu));
    return g;
  }();
  return *g;
}

uint32_t OpId(const char* full_name) {
  const tensord::OpEntry* e = tensord::OpTable::Get().Find(full_name);
  if (!e) {
    fprintf(stderr, "session_fuzz: no op %s\n", full_name);
    abort();
  }
  return e->id;
}

// A sealed memfd of kSegmentBytes, mapped here for the "client" to write.
struct Segment {
  int fd = -1;
  char* data = nullptr;
  Segment() {
    fd = ::memfd_create("tensord-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, kSegmentBytes) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
      perror("session_fuzz: memfd");
      abort();
    }
    void* p = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) abort();
    data = static_cast<char*>(p);
  }
  ~Segment() {
    ::munmap(data, kSegmentBytes);
    ::close(fd);
  }
};

void SetMeta(v1::TensorMetaProto* m, std::vector<int64_t> sizes, tensord::ScalarType dtype) {
  for (int64_t s : sizes) m->add_sizes(s);
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  for (int64_t s : strides) m->add_strides(s);
  m->set_dtype(static_cast<int32_t>(dtype));
}

// The session's starting tensors: 1 = float32 [2, 3] (data in the message),
// 2 = int64 [4] indices {0, 1, 1, 0}, 3 = float32 [4] adopting segment 2 at 0.
v1::ClientMessage Preamble() {
  v1::ClientMessage m;
  {
    v1::Upload* u = m.add_requests()->mutable_upload();
    u->set_handle(1);
    SetMeta(u->mutable_meta(), {2, 3}, tensord::ScalarType::kFloat32);
    const float v[6] = {1, 2, 3, 4, 5, 6};
    u->set_total_bytes(sizeof(v));
    u->set_data(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
    u->set_last(true);
    u->set_call_id(1);
  }
  {
    v1::Upload* u = m.add_requests()->mutable_upload();
    u->set_handle(2);
    SetMeta(u->mutable_meta(), {4}, tensord::ScalarType::kInt64);
    const int64_t v[4] = {0, 1, 1, 0};
    u->set_total_bytes(sizeof(v));
    u->set_data(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
    u->set_last(true);
    u->set_call_id(2);
  }
  {
    v1::Upload* u = m.add_requests()->mutable_upload();
    u->set_handle(3);
    SetMeta(u->mutable_meta(), {4}, tensord::ScalarType::kFloat32);
    u->set_total_bytes(16);
    u->set_shm_segment(2);
    u->set_shm_offset(0);
    u->set_shm_adopt(true);
    u->set_last(true);
    u->set_call_id(3);
  }
  return m;
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  // The next record; false at the end.
  bool Next(uint8_t* tag, const uint8_t** bytes, size_t* n) {
    if (end_ - p_ < 3) return false;
    *tag = p_[0];
    size_t len = p_[1] | (size_t{p_[2]} << 8);
    p_ += 3;
    if (len > static_cast<size_t>(end_ - p_)) len = end_ - p_;
    *bytes = p_;
    *n = len;
    p_ += len;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

void WriteSegment(Segment& seg, const uint8_t* bytes, size_t n) {
  if (n < 2) return;
  const size_t offset = (bytes[0] | (size_t{bytes[1]} << 8)) % kSegmentBytes;
  n -= 2;
  if (n > kSegmentBytes - offset) n = kSegmentBytes - offset;
  memcpy(seg.data + offset, bytes + 2, n);
}

void RunOne(const uint8_t* data, size_t size) {
  Globals& g = G();
  Segment seg1, seg2;
  auto session = std::make_unique<Session>(
      7, "token", "fuzz", tensord::runtime::MemoryAccount::Create(kSessionLimitBytes), &g.devices);
  if (!session->ClaimShmChannel() || !session->MapShmSegment(1, kSegmentBytes, seg1.fd).ok() ||
      !session->MapShmSegment(2, kSegmentBytes, seg2.fd).ok()) {
    fprintf(stderr, "session_fuzz: cannot map the segments\n");
    abort();
  }
  // What the transport does with a reply: serialize it. A client reads at
  // most kMaxReplyBytes (a fetch of a huge expanded view streams all of its
  // bytes), then goes away: the stream is gone.
  size_t reply_bytes = 0;
  const auto write = [&reply_bytes](const v1::ServerMessage& reply) {
    std::string out;
    if (!reply.SerializeToString(&out)) return false;
    reply_bytes += out.size();
    return reply_bytes <= kMaxReplyBytes;
  };
  Input in(data, size);
  // A backward waiting for a callback result reads the next message record
  // (segment writes on the way are applied in order).
  const Session::Reader read = [&](v1::ClientMessage* m) {
    uint8_t tag;
    const uint8_t* bytes;
    size_t n;
    while (in.Next(&tag, &bytes, &n)) {
      if (tag % 4 == 2) WriteSegment(seg1, bytes, n);
      else if (tag % 4 == 3) WriteSegment(seg2, bytes, n);
      else if (m->ParseFromArray(bytes, static_cast<int>(n))) return true;
    }
    return false;
  };
  const v1::ClientMessage preamble = Preamble();
  if (!session->ExecuteMessage(preamble, write, read)) abort();

  uint8_t tag;
  const uint8_t* bytes;
  size_t n;
  while (in.Next(&tag, &bytes, &n)) {
    switch (tag % 4) {
      case 0: {
        v1::ClientMessage m;
        if (!m.ParseFromArray(bytes, static_cast<int>(n))) break;
        if (!session->ExecuteMessage(m, write, read)) goto done;
        break;
      }
      case 1: {
        grpc::Slice slice(bytes, n);
        grpc::ByteBuffer bb(&slice, 1);
        v1::ClientMessage m;
        std::shared_ptr<tensord::runtime::Storage> keep;
        const bool ok = tensord::wire::ParseClientMessage(
            &bb, &m, [&](const v1::Upload& head, size_t len) { return session->PlaceUploadData(head, len, &keep); });
        if (!ok) break;
        if (!session->ExecuteMessage(m, write, read)) goto done;
        break;
      }
      case 2: WriteSegment(seg1, bytes, n); break;
      case 3: WriteSegment(seg2, bytes, n); break;
    }
  }
done:
  session->Close();
  // Everything a session allocated is given back when it closes.
  if (session->memory().bytes_in_use() != 0) {
    fprintf(stderr, "session_fuzz: %lld bytes still in use after Close\n",
            static_cast<long long>(session->memory().bytes_in_use()));
    abort();
  }
}

// ---- seed corpus -----------------------------------------------------------

void AddRecord(std::string* out, uint8_t tag, const std::string& bytes) {
  out->push_back(static_cast<char>(tag));
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>(bytes.size() >> 8));
  out->append(bytes);
}
void AddMessage(std::string* out, const v1::ClientMessage& m, uint8_t tag = 0) {
  AddRecord(out, tag, m.SerializeAsString());
}

v1::Value TensorArg(uint64_t h) {
  v1::Value v;
  v.set_tensor(h);
  return v;
}
v1::Value IntArg(int64_t i) {
  v1::Value v;
  v.set_i(i);
  return v;
}
v1::Value IntListArg(std::vector<int64_t> l) {
  v1::Value v;
  for (int64_t x : l) v.mutable_int_list()->add_values(x);
  return v;
}
v1::Value NoneArg() {
  v1::Value v;
  v.set_none(true);
  return v;
}

v1::OpCall* AddCall(v1::ClientMessage* m, const char* op, std::vector<v1::Value> args, std::vector<uint64_t> outs) {
  static uint64_t call_id = 100;
  v1::OpCall* c = m->add_requests()->mutable_call();
  c->set_call_id(++call_id);
  c->set_op_id(OpId(op));
  for (v1::Value& a : args) *c->add_args() = std::move(a);
  for (uint64_t o : outs) c->add_outputs(o);
  c->set_call_site("fuzz.py:1");
  return c;
}
void AddFetch(v1::ClientMessage* m, uint64_t handle, uint32_t segment = 0, uint64_t capacity = 0) {
  v1::Fetch* f = m->add_requests()->mutable_fetch();
  f->set_request_id(handle + 1000);
  f->set_handle(handle);
  f->set_shm_segment(segment);
  f->set_shm_capacity(capacity);
}
void AddSync(v1::ClientMessage* m) { m->add_requests()->mutable_sync()->set_request_id(9); }

std::string Le64(const std::vector<int64_t>& v, uint16_t offset) {
  std::string s;
  s.push_back(static_cast<char>(offset & 0xff));
  s.push_back(static_cast<char>(offset >> 8));
  s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  return s;
}

void WriteSeeds(const char* dir) {
  std::vector<std::pair<std::string, std::string>> seeds;
  {  // add, sum, fetch in the message and into segment 1
    std::string s;
    v1::ClientMessage m;
    AddCall(&m, "add.Tensor", {TensorArg(1), TensorArg(1), IntArg(1)}, {10});
    AddCall(&m, "sum", {TensorArg(10), NoneArg(), [] { v1::Value v; v.set_b(false); return v; }(), NoneArg()},
            {11});
    AddFetch(&m, 10);
    AddFetch(&m, 11, 1, kSegmentBytes);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("add_sum_fetch", s);
  }
  {  // index_select with the indices uploaded, then through segment-backed storage
    std::string s;
    v1::ClientMessage m;
    AddCall(&m, "index_select", {TensorArg(1), IntArg(1), TensorArg(2)}, {10});
    AddFetch(&m, 10);
    AddMessage(&s, m);
    seeds.emplace_back("index_select", s);
  }
  {  // indices from an adopted segment that the client rewrites between messages
    std::string s;
    v1::ClientMessage up;
    v1::Upload* u = up.add_requests()->mutable_upload();
    u->set_handle(20);
    SetMeta(u->mutable_meta(), {4}, tensord::ScalarType::kInt64);
    u->set_total_bytes(32);
    u->set_shm_segment(1);
    u->set_shm_offset(4096);
    u->set_shm_adopt(true);
    u->set_last(true);
    u->set_call_id(50);
    AddRecord(&s, 2, Le64({0, 1, 2, 1}, 4096));
    AddMessage(&s, up);
    v1::ClientMessage m;
    AddCall(&m, "index_select", {TensorArg(1), IntArg(1), TensorArg(20)}, {21});
    AddCall(&m, "gather", {TensorArg(3), IntArg(0), TensorArg(20), [] { v1::Value v; v.set_b(false); return v; }()},
            {22});
    AddFetch(&m, 21);
    AddFetch(&m, 22, 1, 64);
    AddMessage(&s, m);
    AddRecord(&s, 2, Le64({5, -9, 1LL << 40, 3}, 4096));
    AddMessage(&s, m, 1);
    seeds.emplace_back("shm_indices_rewritten", s);
  }
  {  // a huge expanded view fetched into a small segment (sizes that overflow)
    std::string s;
    v1::ClientMessage m;
    AddCall(&m, "view", {TensorArg(3), IntListArg({4, 1})}, {30});
    AddCall(&m, "expand", {TensorArg(30), IntListArg({4, 1LL << 31}), [] { v1::Value v; v.set_b(false); return v; }()},
            {31});
    AddFetch(&m, 31, 1, kSegmentBytes);
    AddFetch(&m, 31);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("expand_overflow_fetch", s);
  }
  {  // One element expanded to [2**31, 2**31] float32: 2**64 bytes, 0 when it
     // wraps. It crashed the fetch (a signed overflow of numel * itemsize), so
     // it is a crash reproducer (regressions/), not a seed.
    std::string s;
    v1::ClientMessage m;
    AddCall(&m, "sum", {TensorArg(1), NoneArg(), [] { v1::Value v; v.set_b(false); return v; }(), NoneArg()},
            {32});
    AddCall(&m, "expand", {TensorArg(32), IntListArg({1LL << 31, 1LL << 31}),
                           [] { v1::Value v; v.set_b(false); return v; }()},
            {33});
    AddFetch(&m, 33, 1, kSegmentBytes);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("../../regressions/session/fetch_expand_2pow64_bytes_wraps", s);
  }
  {  // uploads: chunked, out-of-range segment offset, describe, release
    std::string s;
    v1::ClientMessage m;
    v1::Upload* u = m.add_requests()->mutable_upload();
    u->set_handle(40);
    SetMeta(u->mutable_meta(), {3, 2}, tensord::ScalarType::kFloat64);
    u->set_total_bytes(48);
    u->set_data(std::string(24, '\1'));
    u->set_call_id(60);
    v1::Upload* u2 = m.add_requests()->mutable_upload();
    u2->set_handle(40);
    u2->set_offset(24);
    u2->set_data(std::string(24, '\2'));
    u2->set_last(true);
    v1::Upload* u3 = m.add_requests()->mutable_upload();
    u3->set_handle(41);
    SetMeta(u3->mutable_meta(), {1 << 20}, tensord::ScalarType::kFloat32);
    u3->set_total_bytes(4 << 20);
    u3->set_shm_segment(1);
    u3->set_shm_offset(kSegmentBytes - 8);
    u3->set_last(true);
    v1::Describe* d = m.add_requests()->mutable_describe();
    d->set_request_id(5);
    d->add_handles(40);
    d->add_handles(41);
    d->add_handles(3);
    m.add_requests()->mutable_release()->add_handles(40);
    AddFetch(&m, 40);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("uploads_describe_release", s);
  }
  {  // autograd: requires_grad, an op, backward, grad
    std::string s;
    v1::ClientMessage m;
    v1::SetRequiresGrad* r = m.add_requests()->mutable_set_requires_grad();
    r->add_handles(1);
    r->set_requires_grad(true);
    v1::OpCall* c = AddCall(&m, "sum", {TensorArg(1), NoneArg(), [] { v1::Value v; v.set_b(false); return v; }(),
                                        NoneArg()},
                            {50});
    c->set_record_grad(true);
    v1::Backward* b = m.add_requests()->mutable_backward();
    b->set_request_id(7);
    b->add_roots(50);
    b->add_grad_roots(0);
    b->set_accumulate(true);
    v1::GetGrad* gg = m.add_requests()->mutable_get_grad();
    gg->set_handle(1);
    gg->set_output(51);
    AddFetch(&m, 51);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("autograd_backward", s);
  }
  {  // matmul with an indexed scatter, through the byte-buffer path
    std::string s;
    v1::ClientMessage m;
    AddCall(&m, "matmul", {TensorArg(1), [] { v1::Value v; v.set_tensor(1); return v; }()}, {60});
    AddCall(&m, "scatter_add", {TensorArg(3), IntArg(0), TensorArg(2), TensorArg(3)}, {61});
    AddFetch(&m, 61);
    AddSync(&m);
    AddMessage(&s, m, 1);
    seeds.emplace_back("matmul_scatter_bytebuffer", s);
  }
  {  // ops defined at run time: their definitions, then a call to each
    tensord::ExtensionOps ext;
    std::string s;
    v1::ClientMessage m;
    v1::DefineOps* d = m.add_requests()->mutable_define_ops();
    d->set_first(0);
    for (const auto& [schema, rule] : {std::pair<const char*, const char*>{"fz::scale(Tensor x, Scalar s) -> Tensor",
                                                                          "like:mul.Scalar"},
                                      {"fz::bias(Tensor x, Tensor b, Scalar alpha=1) -> Tensor",
                                       "like:add.Tensor"}}) {
      if (!ext.Define(schema, rule).ok()) abort();
      d->add_schemas(schema);
      d->add_shape_rules(rule);
    }
    d->set_digest(ext.digest());
    v1::OpCall* c = AddCall(&m, "neg", {TensorArg(1)}, {70});
    c->set_op_id(tensord::kFirstExtensionOpId);
    c->clear_args();
    *c->add_args() = TensorArg(1);
    *c->add_args() = [] { v1::Value v; v.set_f(2.0); return v; }();
    c = AddCall(&m, "neg", {TensorArg(1)}, {71});
    c->set_op_id(tensord::kFirstExtensionOpId + 1);
    c->clear_args();
    *c->add_args() = TensorArg(1);
    *c->add_args() = TensorArg(1);
    *c->add_args() = IntArg(1);
    AddFetch(&m, 70);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("define_ops_calls", s);
  }
  {  // memory statistics: of the cpu around a release and a peak's reset, then of
     // devices not served (the fuzz daemon serves the cpu only) and malformed ones
    std::string s;
    v1::ClientMessage m;
    auto stats = [&m](uint64_t id, int32_t type, int32_t index, bool reset) {
      v1::MemoryStats* r = m.add_requests()->mutable_memory_stats();
      r->set_request_id(id);
      r->set_device_type(type);
      r->set_device_index(index);
      r->set_reset_peak(reset);
    };
    stats(20, 0, 0, false);
    m.add_requests()->mutable_release()->add_handles(3);
    stats(21, 0, 0, true);
    stats(22, 0, 0, false);
    stats(23, 3, 0, false);
    stats(24, 1, 2147483647, true);
    stats(25, 2, 0, false);
    stats(26, 99, -1, true);
    AddSync(&m);
    AddMessage(&s, m);
    seeds.emplace_back("memory_stats", s);
  }
  seeds.emplace_back("empty", "");
  for (const auto& [name, bytes] : seeds) {
    const std::string path = std::string(dir) + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
  }
  fprintf(stderr, "session_fuzz: wrote %zu seeds to %s\n", seeds.size(), dir);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (const char* dir = getenv("TENSORD_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    exit(0);
  }
  G();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunOne(data, size);
  return 0;
}
