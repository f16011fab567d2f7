// Test helpers: protocol messages built by hand (argument values, op calls,
// uploads), with no daemon and no client library behind them. The daemon's
// tests (raw_client.h) and the wire's (tests/transport) share them.
#ifndef TENSORD_TESTS_COMMON_REQUESTS_H_
#define TENSORD_TESTS_COMMON_REQUESTS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/wire.h"

namespace tensord::testing {

namespace v1 = ::tensord::v1;

inline uint32_t OpId(const std::string& full_name) {
  const OpEntry* e = OpTable::Get().Find(full_name);
  EXPECT_NE(e, nullptr) << "no op " << full_name;
  return e == nullptr ? 0 : e->id;
}

// --- raw argument values -------------------------------------------------
inline v1::Value T(uint64_t h) { v1::Value v; v.set_tensor(h); return v; }
inline v1::Value I(int64_t i) { v1::Value v; v.set_i(i); return v; }
inline v1::Value F(double f) { v1::Value v; v.set_f(f); return v; }
inline v1::Value B(bool b) { v1::Value v; v.set_b(b); return v; }
inline v1::Value None() { v1::Value v; v.set_none(true); return v; }
inline v1::Value Dt(int32_t d) { v1::Value v; v.set_dtype(d); return v; }
inline v1::Value Dev(const std::string& d) { v1::Value v; v.set_device(d); return v; }
inline v1::Value IL(std::vector<int64_t> l) {
  v1::Value v;
  for (int64_t x : l) v.mutable_int_list()->add_values(x);
  return v;
}
inline v1::Value TL(std::vector<uint64_t> hs) {
  v1::Value v;
  for (uint64_t h : hs) v.mutable_tensor_list()->add_handles(h);
  return v;
}

inline v1::Request Call(uint64_t call_id, uint32_t op_id, std::vector<v1::Value> args, std::vector<uint64_t> outs,
                        const std::string& site = "test.py:1") {
  v1::Request r;
  v1::OpCall* c = r.mutable_call();
  c->set_call_id(call_id);
  c->set_op_id(op_id);
  for (auto& a : args) *c->add_args() = a;
  for (uint64_t o : outs) c->add_outputs(o);
  c->set_call_site(site);
  return r;
}
inline v1::Request Call(uint64_t call_id, const std::string& op, std::vector<v1::Value> args,
                        std::vector<uint64_t> outs, const std::string& site = "test.py:1") {
  return Call(call_id, OpId(op), std::move(args), std::move(outs), site);
}

inline v1::TensorMetaProto MetaProto(const std::vector<int64_t>& sizes, ScalarType dtype) {
  v1::TensorMetaProto p;
  wire::ToProto(TensorMeta::Contiguous(Shape(sizes.begin(), sizes.end()), dtype, kCPU), &p);
  return p;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <typename T>
std::vector<T> FromBytes(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

// One-message upload of a contiguous tensor.
inline v1::Request UploadReq(uint64_t handle, const v1::TensorMetaProto& meta, std::string data, uint64_t call_id = 0) {
  v1::Request r;
  v1::Upload* u = r.mutable_upload();
  u->set_handle(handle);
  *u->mutable_meta() = meta;
  u->set_total_bytes(data.size());
  u->set_offset(0);
  u->set_data(std::move(data));
  u->set_last(true);
  u->set_call_id(call_id);
  return r;
}

inline v1::Request Chunk(uint64_t handle, uint64_t offset, std::string data, bool last) {
  v1::Request r;
  v1::Upload* u = r.mutable_upload();
  u->set_handle(handle);
  u->set_offset(offset);
  u->set_data(std::move(data));
  u->set_last(last);
  return r;
}

// A MemoryStats request for device (type, index), any values.
inline v1::Request MemoryStatsReq(uint64_t request_id, int32_t device_type, int32_t device_index,
                                  bool reset_peak = false) {
  v1::Request r;
  v1::MemoryStats* m = r.mutable_memory_stats();
  m->set_request_id(request_id);
  m->set_device_type(device_type);
  m->set_device_index(device_index);
  m->set_reset_peak(reset_peak);
  return r;
}

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_COMMON_REQUESTS_H_
