// wire/data_frame: data chunks encoded around borrowed memory parse as the
// ordinary protobuf messages, and ParseServerMessage puts a chunk's data
// where it is asked to (or parses anything else as protobuf would).
#include "tensord/wire/data_frame.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/copy.h"

namespace tensord::testing {
namespace {

namespace v1 = ::tensord::v1;

std::string Flatten(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bb.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice s(bytes);
  return grpc::ByteBuffer(&s, 1);
}

std::string Bytes(size_t n) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(i * 7 + 3);
  return b;
}

v1::FetchData FetchHead() {
  v1::FetchData head;
  head.set_request_id(42);
  head.mutable_meta()->add_sizes(3);
  head.mutable_meta()->set_dtype(6);
  head.set_total_bytes(5000);
  head.set_offset(1000);
  head.set_last(true);
  head.add_errors()->set_message("earlier");
  return head;
}

TEST(DataFrameTest, AnUploadChunkParsesAsTheClientMessageWithItsData) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{1} << 20}) {
    const std::string data = Bytes(n);
    v1::Upload head;
    head.set_handle(7);
    head.set_offset(4096);
    head.set_total_bytes(1 << 22);
    head.set_last(n == 1);
    head.set_call_id(9);
    head.mutable_meta()->add_sizes(1 << 20);
    wire::BorrowedSlices borrowed;
    grpc::ByteBuffer bb = wire::EncodeUploadChunk(head, borrowed.Borrow(data.data(), n));
    v1::ClientMessage m;
    ASSERT_TRUE(m.ParseFromString(Flatten(bb))) << n;
    ASSERT_EQ(m.requests_size(), 1);
    ASSERT_TRUE(m.requests(0).has_upload());
    v1::Upload expect = head;
    expect.set_data(data);
    EXPECT_EQ(m.requests(0).upload().SerializeAsString(), expect.SerializeAsString()) << n;
    bb.Clear();
  }
}

TEST(DataFrameTest, AFetchChunkIsPlacedWhereAsked) {
  const std::string data = Bytes(100000);
  wire::BorrowedSlices borrowed;
  grpc::ByteBuffer bb = wire::EncodeFetchChunk(FetchHead(), borrowed.Borrow(data.data(), data.size()));
  // gRPC may split a message anywhere: parse it from many small slices.
  const std::string flat = Flatten(bb);
  bb.Clear();
  std::vector<grpc::Slice> pieces;
  for (size_t i = 0; i < flat.size(); i += 1021) pieces.emplace_back(flat.substr(i, 1021));
  grpc::ByteBuffer split(pieces.data(), pieces.size());
  std::string dest(100000, '\0');
  v1::ServerMessage msg;
  size_t asked = 0;
  ASSERT_TRUE(wire::ParseServerMessage(&split, &msg, [&](const v1::FetchData& head, size_t n) {
    EXPECT_EQ(head.SerializeAsString(), FetchHead().SerializeAsString());
    asked = n;
    return dest.data();
  }));
  EXPECT_EQ(asked, 100000u);
  EXPECT_EQ(dest, data);
  EXPECT_TRUE(msg.data().data().empty());
  EXPECT_EQ(msg.data().request_id(), 42u);
  EXPECT_EQ(msg.data().errors(0).message(), "earlier");
}

// A piece of a large transfer is copied slice by slice with non-temporal
// stores: every byte lands, whatever the slices' sizes and the destination's
// alignment, and nothing past it is written.
TEST(DataFrameTest, APieceOfALargeTransferIsCopiedFromEverySlice) {
  const std::string data = Bytes(100003);
  for (size_t piece : {size_t{1021}, size_t{4096}, size_t{65536}, size_t{1} << 20}) {
    for (size_t misalign : {size_t{0}, size_t{1}, size_t{7}, size_t{16}}) {
      wire::BorrowedSlices borrowed;
      grpc::ByteBuffer bb = wire::EncodeFetchChunk(FetchHead(), borrowed.Borrow(data.data(), data.size()));
      const std::string flat = Flatten(bb);
      bb.Clear();
      std::vector<grpc::Slice> pieces;
      for (size_t i = 0; i < flat.size(); i += piece) pieces.emplace_back(flat.substr(i, piece));
      grpc::ByteBuffer split(pieces.data(), pieces.size());
      std::string dest(data.size() + 64, '#');
      v1::ServerMessage msg;
      ASSERT_TRUE(wire::ParseServerMessage(&split, &msg, [&](const v1::FetchData&, size_t n) {
        EXPECT_EQ(n, data.size());
        return wire::Placement(dest.data() + misalign, wire::kNonTemporalCopyMinBytes);
      }));
      EXPECT_EQ(dest.substr(misalign, data.size()), data) << piece << " " << misalign;
      EXPECT_EQ(dest.substr(0, misalign), std::string(misalign, '#'));
      EXPECT_EQ(dest.substr(misalign + data.size()), std::string(64 - misalign, '#'));
      EXPECT_TRUE(msg.data().data().empty());
      EXPECT_EQ(msg.data().request_id(), 42u);
    }
  }
}

TEST(DataFrameTest, NonTemporalCopyCopiesAnySizeAtAnyAlignment) {
  const std::string src = Bytes(600);
  for (size_t n = 0; n <= 300; ++n) {
    for (size_t s = 0; s < 17; s += 3) {
      for (size_t d = 0; d < 17; ++d) {
        std::string dest(340, '#');
        wire::NonTemporalCopy(dest.data() + d, src.data() + s, n);
        ASSERT_EQ(dest.substr(d, n), src.substr(s, n)) << n << " " << s << " " << d;
        ASSERT_EQ(dest.substr(0, d), std::string(d, '#'));
        ASSERT_EQ(dest.substr(d + n), std::string(340 - d - n, '#'));
      }
    }
  }
}

// Whole same-host transfers: memcpy, one thread of non-temporal stores, or
// pieces on several threads, by size; every byte lands, none outside.
TEST(DataFrameTest, CopyTransferCopiesEverySizeOnAnyNumberOfThreads) {
  const size_t mib = size_t{1} << 20;
  const size_t big = 9 * mib + 64;
  std::string src(big + 16, '\0');
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>((i * 131 + i / 4099) & 0xff);
  std::string dest(big + 64, '#');
  ASSERT_GE(wire::MaxCopyThreads(), 1);
  ASSERT_LE(wire::MaxCopyThreads(), wire::kMaxCopyThreads);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4099}, 4 * mib - 1, 4 * mib, 4 * mib + 3, 9 * mib + 13}) {
    for (int threads : {0, 1, 2, 3, 64}) {
      for (size_t s : {size_t{0}, size_t{5}}) {
        for (size_t d : {size_t{0}, size_t{3}}) {
          for (bool forced : {false, true}) {  // split as the machine allows, or always
            std::fill(dest.begin(), dest.end(), '#');
            if (forced) {
              wire::CopyWithHelpers(dest.data() + d, src.data() + s, n, threads);
            } else {
              wire::CopyTransfer(dest.data() + d, src.data() + s, n, threads);
            }
            ASSERT_EQ(std::memcmp(dest.data() + d, src.data() + s, n), 0)
                << n << " " << threads << " " << s << " " << d << " " << forced;
            ASSERT_EQ(dest.substr(0, d), std::string(d, '#'));
            ASSERT_EQ(dest.substr(d + n), std::string(dest.size() - d - n, '#')) << n << " " << threads;
          }
        }
      }
    }
  }
}

// The threads a split copy starts may run after it returned (a busy machine
// starts them late): they must then find nothing to do and touch neither
// buffer, which the caller frees at once here (AddressSanitizer builds report
// any late access).
TEST(DataFrameTest, CopyTransferLeavesNothingForLateThreads) {
  const size_t n = 5 * (size_t{1} << 20) + 7;
  for (int round = 0; round < 40; ++round) {
    auto src = std::make_unique<char[]>(n);
    auto dst = std::make_unique<char[]>(n);
    std::memset(src.get(), round + 1, n);
    wire::CopyWithHelpers(dst.get(), src.get(), n, wire::kMaxCopyThreads - 1);
    ASSERT_EQ(std::memcmp(dst.get(), src.get(), n), 0) << round;
    // Freed here, while threads of this copy may still be starting.
  }
}

// A child forked while the parent's copies ran (their threads do not exist
// there) copies with threads of its own. The client's copies run in such
// children: multiprocessing workers started with 'fork'.
TEST(DataFrameTest, CopyTransferWorksInAForkedChild) {
  const size_t n = 12 * (size_t{1} << 20);
  std::string src(n, '\0');
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<char>((i * 131 + i / 4099) & 0xff);
  std::string dest(n, '#');
  wire::CopyWithHelpers(dest.data(), src.data(), n, 3);
  ASSERT_EQ(dest, src);
  std::fill(dest.begin(), dest.end(), '#');
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(30);  // a hang ends the child instead of the test
    wire::CopyWithHelpers(dest.data(), src.data(), n, 3);
    ::_exit(std::memcmp(dest.data(), src.data(), n) == 0 ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child's copy did not finish (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DataFrameTest, WithoutAPlaceTheDataStaysInTheMessage) {
  const std::string data = Bytes(wire::kMinBorrowedBytes);
  wire::BorrowedSlices borrowed;
  grpc::ByteBuffer bb = wire::EncodeFetchChunk(FetchHead(), borrowed.Borrow(data.data(), data.size()));
  v1::ServerMessage msg;
  ASSERT_TRUE(wire::ParseServerMessage(&bb, &msg, [](const v1::FetchData&, size_t) { return nullptr; }));
  EXPECT_EQ(msg.data().data(), data);
  EXPECT_EQ(msg.data().total_bytes(), 5000u);
}

TEST(DataFrameTest, OtherMessagesParseAsProtobufWouldWithoutAPlace) {
  v1::ServerMessage ack;
  ack.mutable_ack()->set_request_id(5);
  ack.mutable_ack()->add_errors()->set_message("boom");
  // A FetchData whose data is not its last field (protobuf's own order: 5
  // before 6 and 7), and one without data (shared memory).
  v1::ServerMessage ordered;
  *ordered.mutable_data() = FetchHead();
  ordered.mutable_data()->set_data(Bytes(64));
  v1::ServerMessage shm;
  shm.mutable_data()->set_request_id(3);
  shm.mutable_data()->set_shm_segment(2);
  for (const v1::ServerMessage& m : {ack, ordered, shm}) {
    grpc::ByteBuffer bb = Buffer(m.SerializeAsString());
    v1::ServerMessage out;
    out.mutable_data()->set_data("stale");  // cleared first
    bool asked = false;
    ASSERT_TRUE(wire::ParseServerMessage(&bb, &out, [&](const v1::FetchData&, size_t) {
      asked = true;
      return nullptr;
    }));
    EXPECT_FALSE(asked);
    EXPECT_EQ(out.SerializeAsString(), m.SerializeAsString());
  }
}

TEST(DataFrameTest, AnUploadChunkIsPlacedWhereAskedAndOtherMessagesParseWhole) {
  const std::string data = Bytes(70000);
  v1::Upload head;
  head.set_handle(3);
  head.set_offset(8192);
  head.set_call_id(4);
  wire::BorrowedSlices borrowed;
  grpc::ByteBuffer bb = wire::EncodeUploadChunk(head, borrowed.Borrow(data.data(), data.size()));
  std::string dest(70000, '\0');
  v1::ClientMessage msg;
  ASSERT_TRUE(wire::ParseClientMessage(&bb, &msg, [&](const v1::Upload& h, size_t n) {
    EXPECT_EQ(h.SerializeAsString(), head.SerializeAsString());
    EXPECT_EQ(n, 70000u);
    return dest.data();
  }));
  bb.Clear();
  EXPECT_EQ(dest, data);
  ASSERT_EQ(msg.requests_size(), 1);
  EXPECT_TRUE(msg.requests(0).upload().data().empty());
  EXPECT_EQ(msg.requests(0).upload().offset(), 8192u);

  // Two requests, an attach, an upload whose data is not last: protobuf's parse.
  v1::ClientMessage two;
  two.add_requests()->mutable_sync()->set_request_id(1);
  *two.add_requests()->mutable_upload() = head;
  two.mutable_requests(1)->mutable_upload()->set_data("abc");
  v1::ClientMessage attach;
  attach.mutable_attach()->set_session_id(9);
  v1::ClientMessage ordered;
  *ordered.add_requests()->mutable_upload() = head;
  ordered.mutable_requests(0)->mutable_upload()->set_data("xyz");  // field 5 before call_id (7)
  for (const v1::ClientMessage& m : {two, attach, ordered}) {
    grpc::ByteBuffer whole = Buffer(m.SerializeAsString());
    v1::ClientMessage out;
    bool asked = false;
    ASSERT_TRUE(wire::ParseClientMessage(&whole, &out, [&](const v1::Upload&, size_t) {
      asked = true;
      return dest.data();
    }));
    EXPECT_FALSE(asked);
    EXPECT_EQ(out.SerializeAsString(), m.SerializeAsString());
  }
  grpc::ByteBuffer garbage = Buffer(std::string("\x12\x05\x12\x03\x2a\x09x", 7));
  v1::ClientMessage out;
  EXPECT_FALSE(wire::ParseClientMessage(&garbage, &out, [&](const v1::Upload&, size_t) { return dest.data(); }));
}

// A receiver with only a message's first bytes (the TCP stream's
// StreamReceiver) learns from the head where the data starts and where it
// goes; a head not all in the prefix, another shape, a small message or a
// `place` without a destination leave the message to be read whole.
TEST(DataFrameTest, AChunkHeadInAPrefixSaysWhereTheRestGoes) {
  const std::string data = Bytes(70001);
  v1::Upload head;
  head.set_handle(3);
  head.mutable_meta()->add_sizes(70001);
  head.mutable_meta()->set_dtype(1);
  head.set_total_bytes(70001);
  head.set_call_id(4);
  head.set_call_site("model.py:12");
  wire::BorrowedSlices borrowed;
  grpc::ByteBuffer bb = wire::EncodeUploadChunk(head, borrowed.Borrow(data.data(), data.size()));
  const std::string msg_bytes = Flatten(bb);
  bb.Clear();
  const size_t data_at = msg_bytes.size() - data.size();  // the data comes last
  std::string dest(data.size(), '\0');
  for (size_t prefix : {data_at, data_at + 1, size_t{4096}, msg_bytes.size()}) {
    v1::ClientMessage msg;
    int asked = 0;
    std::optional<wire::DataDestination> to =
        wire::ParseClientMessageHead(msg_bytes.data(), prefix, msg_bytes.size(), &msg, [&](const v1::Upload& h, size_t n) {
          ++asked;
          EXPECT_EQ(h.SerializeAsString(), head.SerializeAsString());
          EXPECT_EQ(n, data.size());
          return dest.data();
        });
    ASSERT_TRUE(to.has_value()) << "prefix " << prefix;
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(to->offset, data_at);
    EXPECT_EQ(to->dst, dest.data());
    ASSERT_EQ(msg.requests_size(), 1);
    EXPECT_TRUE(msg.requests(0).upload().data().empty());
    EXPECT_EQ(msg.requests(0).upload().call_site(), "model.py:12");
  }
  // The head cut anywhere before the data: not asked, read it whole.
  for (size_t prefix = 0; prefix < data_at; ++prefix) {
    v1::ClientMessage msg;
    bool asked = false;
    EXPECT_FALSE(wire::ParseClientMessageHead(msg_bytes.data(), prefix, msg_bytes.size(), &msg,
                                              [&](const v1::Upload&, size_t) {
                                                asked = true;
                                                return dest.data();
                                              })
                     .has_value())
        << "prefix " << prefix;
    EXPECT_FALSE(asked) << "prefix " << prefix;
  }
  // No destination from `place`; a total that does not match the lengths inside.
  v1::ClientMessage msg;
  EXPECT_FALSE(wire::ParseClientMessageHead(msg_bytes.data(), 4096, msg_bytes.size(), &msg,
                                            [](const v1::Upload&, size_t) { return wire::Placement(); })
                   .has_value());
  EXPECT_FALSE(wire::ParseClientMessageHead(msg_bytes.data(), 4096, msg_bytes.size() + 1, &msg,
                                            [&](const v1::Upload&, size_t) { return dest.data(); })
                   .has_value());
  // A large message of another shape (two requests), a small chunk, garbage.
  v1::ClientMessage two;
  two.add_requests()->mutable_sync()->set_request_id(1);
  two.add_requests()->mutable_upload()->set_data(data);
  const std::string two_bytes = two.SerializeAsString();
  const std::string small = Flatten(wire::EncodeUploadChunk(head, grpc::Slice(data.data(), 100)));
  const std::string garbage(70000, '\x12');
  for (const std::string* m : {&two_bytes, &small, &garbage}) {
    bool asked = false;
    EXPECT_FALSE(wire::ParseClientMessageHead(m->data(), std::min<size_t>(4096, m->size()), m->size(), &msg,
                                              [&](const v1::Upload&, size_t) {
                                                asked = true;
                                                return dest.data();
                                              })
                     .has_value());
    EXPECT_FALSE(asked);
  }
  // The data's length as an overlong varint (10 bytes, bit 40 set): the low
  // 32 bits match, but protobuf refuses it, and so does the prefix parser.
  {
    const auto varint = [](uint64_t v, size_t min_bytes) {
      std::string out;
      while (v >= 0x80 || out.size() + 1 < min_bytes) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
      }
      out.push_back(static_cast<char>(v));
      return out;
    };
    const auto field = [&](int number, const std::string& body) {
      return varint((static_cast<uint64_t>(number) << 3) | 2, 1) + varint(body.size(), 1) + body;
    };
    const std::string upload = head.SerializeAsString() +
                               varint((static_cast<uint64_t>(v1::Upload::kDataFieldNumber) << 3) | 2, 1) +
                               varint(data.size() | (uint64_t{1} << 40), 10) + data;
    const std::string overlong =
        field(v1::ClientMessage::kRequestsFieldNumber, field(v1::Request::kUploadFieldNumber, upload));
    bool asked = false;
    EXPECT_FALSE(wire::ParseClientMessageHead(overlong.data(), 4096, overlong.size(), &msg,
                                              [&](const v1::Upload&, size_t) {
                                                asked = true;
                                                return dest.data();
                                              })
                     .has_value());
    EXPECT_FALSE(asked);
    grpc::ByteBuffer whole = Buffer(overlong);
    EXPECT_FALSE(wire::ParseClientMessage(&whole, &msg, [&](const v1::Upload&, size_t) { return dest.data(); }));
  }
  // A fetch chunk, the same way.
  v1::FetchData fetch = FetchHead();
  fetch.set_total_bytes(70001);
  fetch.set_offset(0);
  const std::string fetch_bytes = Flatten(wire::EncodeFetchChunk(fetch, grpc::Slice(data.data(), data.size())));
  v1::ServerMessage reply;
  std::optional<wire::DataDestination> to = wire::ParseServerMessageHead(
      fetch_bytes.data(), 4096, fetch_bytes.size(), &reply, [&](const v1::FetchData& h, size_t n) {
        EXPECT_EQ(h.SerializeAsString(), fetch.SerializeAsString());
        EXPECT_EQ(n, data.size());
        return dest.data();
      });
  ASSERT_TRUE(to.has_value());
  EXPECT_EQ(to->offset, fetch_bytes.size() - data.size());
  EXPECT_EQ(reply.data().request_id(), 42u);
  EXPECT_TRUE(reply.data().data().empty());
}

TEST(DataFrameTest, SmallChunksAreParsedWhole) {
  const std::string data = Bytes(wire::kMinBorrowedBytes / 2);
  grpc::ByteBuffer bb = wire::EncodeFetchChunk(FetchHead(), grpc::Slice(data));
  v1::ServerMessage msg;
  bool asked = false;
  ASSERT_TRUE(wire::ParseServerMessage(&bb, &msg, [&](const v1::FetchData&, size_t) {
    asked = true;
    return nullptr;
  }));
  EXPECT_FALSE(asked);
  EXPECT_EQ(msg.data().data(), data);
}

TEST(DataFrameTest, MalformedMessagesAreRefused) {
  const std::string good = Flatten(wire::EncodeFetchChunk(FetchHead(), grpc::Slice(Bytes(70000))));
  // Large enough for the placed parse: ServerMessage{data: FetchData{...}}
  // around `inner`.
  const auto around = [](const std::string& inner) {
    std::string out = "\x0a";
    for (uint64_t v = inner.size(); ; v >>= 7) {
      if (v < 0x80) {
        out.push_back(static_cast<char>(v));
        break;
      }
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    }
    return out + inner;
  };
  const std::string payload = Bytes(70000);
  const std::vector<std::string> bad = {
      around("\x0f" + payload),                          // wire type 7 in the head
      around(std::string("\x2a\xf0\xa4\x04", 4) + payload),  // data claims 70000 + 256 bytes

      good.substr(0, good.size() - 1),         // truncated data
      good.substr(0, 5),                       // truncated head
      std::string("\x0a\xff", 2),              // a length that never ends
      std::string("\x0a\x04\x2a\x10xy", 6),    // data claims 16 bytes, 2 come
      std::string("\x0a\x03\x0f\x2a\x00", 5),  // wire type 7 in the head
  };
  for (const std::string& b : bad) {
    grpc::ByteBuffer bb = Buffer(b);
    v1::ServerMessage out;
    std::string dest(100, '\0');
    EXPECT_FALSE(wire::ParseServerMessage(&bb, &out, [&](const v1::FetchData&, size_t) { return dest.data(); }))
        << absl::CEscape(b);
  }
}

TEST(DataFrameTest, BorrowedSlicesWaitUntilGrpcLetsGo) {
  std::vector<char> memory(1000);
  std::iota(memory.begin(), memory.end(), 0);
  wire::BorrowedSlices borrowed;
  grpc::ByteBuffer kept;
  {
    grpc::ByteBuffer bb = wire::EncodeUploadChunk(v1::Upload(), borrowed.Borrow(memory.data(), memory.size()));
    kept = bb;  // another reference to the same slices
  }
  std::atomic<bool> cleared{false};
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(20));
    cleared = true;
    kept.Clear();
  });
  borrowed.WaitUntilReleased();
  EXPECT_TRUE(cleared.load());  // it waited for the last reference
  release.join();
}

}  // namespace
}  // namespace tensord::testing
