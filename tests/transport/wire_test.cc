// wire: encoding and decoding of metadata, argument values and errors.
#include <malloc.h>

#include <memory>

#include "gmock/gmock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "requests.h"
#include "sanitizers.h"
#include "tensord/meta/errors.h"
#include "tensord/wire/data_frame.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

const Argument& Arg(const std::string& op, const std::string& name) {
  const OpEntry* e = OpTable::Get().Find(op);
  EXPECT_NE(e, nullptr);
  return e->schema.arguments[e->schema.ArgIndex(name)];
}

absl::StatusOr<const TensorMeta*> NoTensors(uint64_t h) {
  return RuntimeErr(absl::StrCat("unknown tensor handle ", h));
}

grpc::ByteBuffer Encode(const v1::ClientMessage& m) {
  grpc::ByteBuffer bb;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<v1::ClientMessage>::Serialize(m, &bb, &own).ok());
  return bb;
}

// Bytes held by malloc in this process (arenas and blocks of their own).
int64_t MallocBytes() {
  const struct mallinfo2 mi = ::mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

// What parsing `bb` really allocates beyond its own bytes: parsed onto the
// heap (every object its own allocation, no arena block slack to hide in)
// and measured while the message lives.
int64_t ParsedExtraBytes(grpc::ByteBuffer bb) {
  const int64_t before = MallocBytes();
  auto m = std::make_unique<v1::ClientMessage>();
  EXPECT_TRUE(grpc::SerializationTraits<v1::ClientMessage>::Deserialize(&bb, m.get()).ok());
  return MallocBytes() - before;
}

// The bound covers what a parse really takes, for the shapes that expand
// most (empty submessages, packed one-byte varints, short strings, unknown
// fields), and stays near nothing for a message that is mostly data.
TEST(DecodedExtraBytes, BoundsWhatAParseTakesAndIsSmallForData) {
  const auto* type = v1::ClientMessage::descriptor();
  std::vector<std::pair<std::string, v1::ClientMessage>> shapes;
  {
    v1::ClientMessage m;
    for (int i = 0; i < 200000; ++i) m.add_requests();
    shapes.emplace_back("empty requests", std::move(m));
  }
  {
    v1::ClientMessage m;
    for (int i = 0; i < 2000; ++i) {
      *m.add_requests() = Call(i + 1, "add.Tensor", {IL(std::vector<int64_t>(100, 1)), None(), None()}, {7},
                               std::string(i % 40, 'c'));
    }
    shapes.emplace_back("calls with packed lists and strings", std::move(m));
  }
  {
    v1::ClientMessage m;
    m.GetReflection()->MutableUnknownFields(&m)->AddLengthDelimited(126, "x");
    for (int i = 0; i < 20000; ++i) {
      v1::Request* r = m.add_requests();
      r->GetReflection()->MutableUnknownFields(r)->AddVarint(99, i);
    }
    shapes.emplace_back("unknown fields", std::move(m));
  }
  {
    // Request.call (a message) sent as varints: protobuf keeps each as an
    // unknown field.
    v1::ClientMessage m;
    for (int i = 0; i < 20000; ++i) {
      v1::Request* r = m.add_requests();
      r->GetReflection()->MutableUnknownFields(r)->AddVarint(v1::Request::kCallFieldNumber, i);
    }
    shapes.emplace_back("known numbers, other wire types", std::move(m));
  }
  for (auto& [what, m] : shapes) {
    SCOPED_TRACE(what);
    const grpc::ByteBuffer bb = Encode(m);
    m.Clear();
    const std::optional<int64_t> bound = wire::DecodedExtraBytes(bb, type);
    ASSERT_TRUE(bound.has_value());
    if (!kMemoryIsMeasurable) continue;
    const int64_t real = ParsedExtraBytes(bb);
    // Strings' bytes are copied (at most the message's own size again).
    EXPECT_GE(*bound + static_cast<int64_t>(bb.Length()), real) << bb.Length() << " bytes";
    EXPECT_LT(*bound, 4 * real) << "a bound far past the real cost would refuse honest messages";
  }
  // An upload chunk: megabytes of data, a few hundred bytes of anything else.
  v1::ClientMessage upload;
  upload.add_requests()->mutable_upload()->set_data(std::string(4 << 20, 'd'));
  const std::optional<int64_t> data_bound = wire::DecodedExtraBytes(Encode(upload), type);
  ASSERT_TRUE(data_bound.has_value());
  EXPECT_LT(*data_bound, 1024);
  // Empty requests expand most: two bytes each on the wire.
  v1::ClientMessage empties;
  for (int i = 0; i < 1000; ++i) empties.add_requests();
  EXPECT_GT(*wire::DecodedExtraBytes(Encode(empties), type), 10 * 2000);
}

TEST(DecodedExtraBytes, WhatIsNoEncodingGivesNothing) {
  const auto* type = v1::ClientMessage::descriptor();
  v1::ClientMessage m;
  m.add_requests()->mutable_upload()->set_data(std::string(1000, 'd'));
  std::string bytes = m.SerializeAsString();
  const auto of = [&](const std::string& b) {
    grpc::ByteBuffer bb;
    grpc::Slice slice(b);
    bb = grpc::ByteBuffer(&slice, 1);
    return wire::DecodedExtraBytes(bb, type);
  };
  EXPECT_TRUE(of(bytes).has_value());
  EXPECT_FALSE(of(bytes.substr(0, bytes.size() - 1)).has_value());  // cut short
  EXPECT_FALSE(of(bytes + std::string("\x0b", 1)).has_value());     // a group (field 1, start)
  EXPECT_FALSE(of(bytes + std::string("\x00", 1)).has_value());     // tag 0
}

TEST(WireTest, MetaRoundTrips) {
  TensorMeta m = TensorMeta::Contiguous({2, 3, 4}, ScalarType::kBFloat16, kCPU);
  m.strides = {1, 2, 6};
  m.storage_offset = 5;
  v1::TensorMetaProto p;
  wire::ToProto(m, &p);
  absl::StatusOr<TensorMeta> back = wire::FromProto(p, "x");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
}

TEST(WireTest, MetaFromAPeerIsValidated) {
  v1::TensorMetaProto p = MetaProto({2, 2}, ScalarType::kFloat32);
  p.set_dtype(12);
  EXPECT_THAT(std::string(wire::FromProto(p, "t").status().message()), HasSubstr("t: invalid dtype 12"));
  p = MetaProto({2, 2}, ScalarType::kFloat32);
  p.set_device_index(3);
  EXPECT_THAT(std::string(wire::FromProto(p, "t").status().message()), HasSubstr("device index 3"));
  p = MetaProto({2, 2}, ScalarType::kFloat32);
  p.set_device_index(-1);
  EXPECT_FALSE(wire::FromProto(p, "t").ok());
  p = MetaProto({}, ScalarType::kFloat32);
  for (int i = 0; i < 65; ++i) {
    p.add_sizes(1);
    p.add_strides(1);
  }
  EXPECT_THAT(std::string(wire::FromProto(p, "t").status().message()), HasSubstr("rank 65 exceeds 64"));
}

TEST(WireTest, ScalarArgumentsKeepTheirKind) {
  const Argument& alpha = Arg("add.Tensor", "alpha");
  absl::StatusOr<Value> v = wire::DecodeValue("add.Tensor", alpha, I(3), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind(), Value::Kind::kScalar);
  EXPECT_TRUE(v->scalar().is_int());
  v = wire::DecodeValue("add.Tensor", alpha, F(2.5), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->scalar().is_float());
  EXPECT_EQ(v->scalar().to_double(), 2.5);
  v = wire::DecodeValue("add.Tensor", alpha, B(true), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->scalar().is_bool());
  v = wire::DecodeValue("add.Tensor", alpha, IL({1}), NoTensors);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(KindOf(v.status()), ErrorKind::kType);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("argument 'alpha' expected Scalar, got int list"));
}

TEST(WireTest, FixedLengthIntListAcceptsOneInt) {
  const Argument& dim = Arg("sum", "dim");
  absl::StatusOr<Value> v = wire::DecodeValue("sum", dim, I(-1), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->int_list(), Shape({-1}));
  v = wire::DecodeValue("sum", dim, None(), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_none());
  // Not optional: None is refused.
  EXPECT_FALSE(wire::DecodeValue("view", Arg("view", "size"), None(), NoTensors).ok());
}

TEST(WireTest, TensorsResolveThroughLookupAndHandleZeroIsNoneInOptionalLists) {
  TensorMeta a = TensorMeta::Contiguous({2}, ScalarType::kFloat32, kCPU);
  auto lookup = [&](uint64_t h) -> absl::StatusOr<const TensorMeta*> {
    if (h == 7) return &a;
    return RuntimeErr(absl::StrCat("unknown tensor handle ", h));
  };
  absl::StatusOr<Value> v = wire::DecodeValue("neg", Arg("neg", "self"), T(7), lookup);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->tensor_ptr(), &a);
  v = wire::DecodeValue("neg", Arg("neg", "self"), T(8), lookup);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("unknown tensor handle 8"));
  v = wire::DecodeValue("index.Tensor", Arg("index.Tensor", "indices"), TL({0, 7}), lookup);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->tensor_list().size(), 2u);
  EXPECT_EQ(v->tensor_list()[0], nullptr);
  EXPECT_EQ(v->tensor_list()[1], &a);
  v = wire::DecodeValue("cat", Arg("cat", "tensors"), TL({7, 0}), lookup);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("got None at index 1"));
}

TEST(WireTest, DtypeAndDeviceAreRangeChecked) {
  const Argument& dtype = Arg("to.dtype", "dtype");
  absl::StatusOr<Value> v = wire::DecodeValue("to.dtype", dtype, Dt(9), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->dtype(), ScalarType::kFloat64);
  v = wire::DecodeValue("to.dtype", dtype, Dt(12), NoTensors);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(KindOf(v.status()), ErrorKind::kRuntime);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("12 is not a valid dtype"));
  const Argument& device = Arg("zeros", "device");
  v = wire::DecodeValue("zeros", device, Dev("cuda:1"), NoTensors);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->device(), (Device{DeviceType::kCUDA, 1}));
  EXPECT_FALSE(wire::DecodeValue("zeros", device, Dev("cuda:-1"), NoTensors).ok());
}

TEST(WireTest, EncodeThenDecodeGivesTheSameValues) {
  const OpEntry* op = OpTable::Get().Find("sum");
  ASSERT_NE(op, nullptr);
  TensorMeta a = TensorMeta::Contiguous({2, 3}, ScalarType::kFloat32, kCPU);
  std::vector<Value> vals = {Value(&a), Value(std::vector<int64_t>{0, 1}), Value(true), Value(ScalarType::kFloat64)};
  for (size_t i = 0; i < vals.size(); ++i) {
    v1::Value p;
    ASSERT_TRUE(wire::EncodeValue(vals[i], [&](const TensorMeta* m) { return m == &a ? 42u : 0u; }, &p).ok());
    absl::StatusOr<Value> back = wire::DecodeValue("sum", op->schema.arguments[i], p,
                                                   [&](uint64_t h) -> absl::StatusOr<const TensorMeta*> {
                                                     EXPECT_EQ(h, 42u);
                                                     return &a;
                                                   });
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ToString(), vals[i].ToString());
  }
}

TEST(WireTest, ErrorsKeepTheirKindAndSayWhereTheyCameFrom) {
  v1::Error e;
  wire::ToProto(IndexErr("select(): index 5 is out of bounds"), "select.int", 12, "knn.py:30", &e);
  EXPECT_EQ(e.kind(), "IndexError");
  absl::Status s = wire::FromProto(e);
  EXPECT_EQ(KindOf(s), ErrorKind::kIndex);
  // The message's own "select(): " is dropped: the prefix names the op.
  EXPECT_EQ(s.message(), "select.int (call 12 at knn.py:30): index 5 is out of bounds");
  wire::ToProto(IndexErr("index_put: index 3 is out of bounds"), "index_put", 5, "s.py:3", &e);
  EXPECT_EQ(wire::FromProto(e).message(), "index_put (call 5 at s.py:3): index 3 is out of bounds");
  wire::ToProto(IndexErr("gather(): bad"), "index_put", 5, "s.py:3", &e);  // another op's name stays
  EXPECT_EQ(wire::FromProto(e).message(), "index_put (call 5 at s.py:3): gather(): bad");
  wire::ToProto(TypeErr("bad"), "", 0, "", &e);
  s = wire::FromProto(e);
  EXPECT_EQ(KindOf(s), ErrorKind::kType);
  EXPECT_EQ(s.message(), "bad");
  e.set_kind("SomethingElse");
  EXPECT_EQ(KindOf(wire::FromProto(e)), ErrorKind::kRuntime);
}

}  // namespace
TEST(WireErrorTest, ErrorTextsBecomeValidUtf8) {
  // A kernel's message with stray bytes must not make the reply unparsable.
  v1::Error e;
  wire::ToProto(RuntimeErr("bad \xff\xfe tail \xc3\xa9 \xe2\x82"), "mylib::f", 7, "a.py:1 \xed\xa0\x80", &e);
  EXPECT_EQ(e.message(), "bad \xEF\xBF\xBD\xEF\xBF\xBD tail \xc3\xa9 \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(e.call_site(), "a.py:1 \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate is not UTF-8
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  v1::Error back;
  EXPECT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(wire::ValidUtf8("\xf0\x9f\x98\x80 ok"), "\xf0\x9f\x98\x80 ok");  // 4-byte forms stay
  EXPECT_EQ(wire::ValidUtf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // overlong
}

}  // namespace tensord::testing
