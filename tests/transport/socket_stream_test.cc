// The stream framing of tensord/transport/socket_stream.h between two plain
// sockets, no daemon: the HOST:PORT parser and what a TCP stream may
// target; byte streams (TCP) give each message whole however its bytes are
// split, put a large message's tail where a hook says, and refuse broken
// records without allocating what they announce; records (same-host) fall
// back to shorter datagrams on a small socket buffer, poll only while waits
// stay short, and give a large message's buffer back. The daemon's side of
// these streams is tests/server/socket_stream_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "tensord/transport/cpus.h"
#include "tensord/transport/socket_stream.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

using wire::StreamFraming;

// The one HOST:PORT parser (the daemon's --listen, the client's TCP stream).
TEST(HostPort, ParsesWhatItFormats) {
  for (const auto& [text, host, port] : std::vector<std::tuple<std::string, std::string, int>>{
           {"127.0.0.1:7070", "127.0.0.1", 7070},
           {"localhost:0", "localhost", 0},
           {"[::1]:65535", "::1", 65535},
           {"[fe80::1%lo]:1", "fe80::1%lo", 1}}) {
    absl::StatusOr<wire::HostPort> hp = wire::ParseHostPort(text);
    ASSERT_TRUE(hp.ok()) << text << ": " << hp.status();
    EXPECT_EQ(hp->host, host);
    EXPECT_EQ(hp->port, port);
    EXPECT_EQ(wire::FormatHostPort(hp->host, hp->port), text);
  }
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"nonsense", "expected HOST:PORT"},
           {"::1:7070", "an IPv6 host needs brackets"},
           {"[::1]7070", "expected [IPV6]:PORT"},
           {"[::1:7070", "expected [IPV6]:PORT"},
           {":7070", "port in 0..65535"},
           {"host:65536", "port in 0..65535"},
           {"host:-1", "port in 0..65535"},
           {"host: 5", "port in 0..65535"},
           {"host:+5", "port in 0..65535"},
           {"host:5 ", "port in 0..65535"},
           {" 127.0.0.1:5", "without spaces"},
           {"ipv4:127.0.0.1:0", "expected HOST:PORT"},
           {"tcp://host:0", "expected HOST:PORT"},
           {"host:", "port in 0..65535"}}) {
    absl::StatusOr<wire::HostPort> hp = wire::ParseHostPort(text);
    ASSERT_FALSE(hp.ok()) << text;
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(hp.status().message()), HasSubstr(says)) << text;
    EXPECT_THAT(std::string(hp.status().message()), HasSubstr(text));
  }
}

// A stream's target may also be a gRPC URI of one address; lists, Unix
// sockets and port 0 are not one TCP address to connect to.
TEST(HostPort, TcpStreamTargetsThatAreNotOneAddressAreRefused) {
  for (const std::string target : {"unix:/tmp/x.sock", "ipv4:127.0.0.1:1,127.0.0.1:2", "127.0.0.1:0",
                                   "dns://8.8.8.8", "::1:7070", "ipv6:%5B::1%5", "ipv6:%zz::1]:1",
                                   "ipv4:127.0.0.1%3A0", "%5B::1%5D:7070"}) {
    absl::StatusOr<int> fd = wire::ConnectTcpStream(target, 1, "t", 1000);
    ASSERT_FALSE(fd.ok()) << target;
    EXPECT_EQ(fd.status().code(), absl::StatusCode::kInvalidArgument) << target << ": " << fd.status();
  }
}

// Byte streams: a message and an end record arrive whole however the bytes
// are split (here one byte per send, on a real TCP connection), and a
// receiver takes messages of any size up to its limit.
TEST(SocketStreamBytes, MessagesArriveWholeHoweverTheBytesAreSplit) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(out, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  const int in = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(in, 0);
  ::close(lfd);
  std::string large(5'000'003, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 13 + i / 257);
  absl::Status sent;
  std::thread sender([&] {
    // "hello" one byte at a time (header included): the receiver waits for the rest.
    std::string trickle;
    {
      int sp[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
      grpc::Slice hello("hello", 5);
      ASSERT_TRUE(wire::SendStreamMessage(sp[0], grpc::ByteBuffer(&hello, 1), StreamFraming::kByteStream).ok());
      trickle.resize(sizeof(wire::ByteStreamHeader) + 5);
      ASSERT_EQ(::recv(sp[1], trickle.data(), trickle.size(), MSG_WAITALL), static_cast<ssize_t>(trickle.size()));
      ::close(sp[0]);
      ::close(sp[1]);
    }
    for (char c : trickle) {
      ASSERT_EQ(::send(out, &c, 1, MSG_NOSIGNAL), 1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // A message of several slices, an empty one, then the end record.
    grpc::Slice parts[3] = {grpc::Slice(large.data(), 1000), grpc::Slice(large.data() + 1000, large.size() - 1001),
                            grpc::Slice(large.data() + large.size() - 1, 1)};
    sent = wire::SendStreamMessage(out, grpc::ByteBuffer(parts, 3), StreamFraming::kByteStream);
    if (sent.ok()) sent = wire::SendStreamMessage(out, grpc::ByteBuffer(), StreamFraming::kByteStream);
    if (sent.ok()) sent = wire::SendStreamEnd(out, absl::DataLossError("why it ended"), StreamFraming::kByteStream);
  });
  wire::StreamReceiver receiver(size_t{8} << 20, wire::kDefaultStreamSpinNanos, StreamFraming::kByteStream);
  const auto next = [&](std::string* text) -> absl::StatusOr<bool> {
    grpc::ByteBuffer bb;
    absl::StatusOr<bool> got = receiver.Next(in, &bb);
    if (got.ok() && *got) {
      grpc::Slice whole;
      EXPECT_TRUE(bb.DumpToSingleSlice(&whole).ok() || bb.Length() == 0);
      *text = std::string(reinterpret_cast<const char*>(whole.begin()), whole.size());
    }
    return got;
  };
  std::string text;
  absl::StatusOr<bool> got = next(&text);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_EQ(text, "hello");
  got = next(&text);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_EQ(text.size(), large.size());
  EXPECT_TRUE(text == large);
  got = next(&text);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_EQ(text, "");
  got = next(&text);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(*got);
  EXPECT_TRUE(receiver.ended_with_record());
  EXPECT_TRUE(absl::IsDataLoss(receiver.end_status())) << receiver.end_status();
  EXPECT_EQ(receiver.end_status().message(), "why it ended");
  sender.join();
  EXPECT_TRUE(sent.ok()) << sent;
  ::close(out);
  ::close(in);
}

// A PlaceHook (byte streams): a large message's tail goes where the hook
// says, its head stays in the buffer; small messages and those the hook
// declines arrive whole; the end of the socket inside a placed tail is an
// error.
TEST(SocketStreamBytes, ALargeMessagesTailGoesWhereTheHookSays) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::string large(1'000'003, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 13 + i / 257);
  const std::string other = large.substr(0, wire::kMinPlacedMessageBytes);
  absl::Status sent;
  std::thread sender([&] {  // the socket holds less than a message
    for (const std::string* m : std::vector<const std::string*>{&large, &large, &other}) {
      grpc::Slice slice(m->data(), m->size());
      if (sent.ok()) sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&slice, 1), StreamFraming::kByteStream);
    }
    grpc::Slice hello("hello", 5);
    if (sent.ok()) sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&hello, 1), StreamFraming::kByteStream);
    // A placed message cut short: the header says 200,000 bytes.
    wire::ByteStreamHeader h;
    h.length = 200'000;
    const std::string cut = std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + large.substr(0, 100'000);
    if (sent.ok() && ::send(sv[0], cut.data(), cut.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cut.size())) {
      sent = absl::InternalError("send");
    }
    ::shutdown(sv[0], SHUT_WR);
  });
  wire::StreamReceiver receiver(size_t{8} << 20, 0, StreamFraming::kByteStream);
  std::string dest(large.size(), '\0');
  size_t offset = 0;     // where the hook puts the tail (0: declines)
  size_t asked_len = 0;  // what it saw
  size_t asked_total = 0;
  std::string asked_prefix;
  const auto hook = [&](const char* prefix, size_t prefix_len, size_t total) -> std::optional<wire::DataDestination> {
    asked_prefix.assign(prefix, prefix_len);
    asked_len = prefix_len;
    asked_total = total;
    if (offset == 0) return std::nullopt;
    return wire::DataDestination{offset, dest.data()};
  };
  const auto flat = [](const grpc::ByteBuffer& bb) {
    grpc::Slice whole;
    EXPECT_TRUE(bb.DumpToSingleSlice(&whole).ok() || bb.Length() == 0);
    return std::string(reinterpret_cast<const char*>(whole.begin()), whole.size());
  };
  // Placed from byte 1000: the first 1000 bytes in the buffer, the rest in dest.
  offset = 1000;
  grpc::ByteBuffer bb;
  absl::StatusOr<bool> got = receiver.Next(sv[1], &bb, hook);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_TRUE(receiver.placed());
  EXPECT_EQ(asked_len, wire::kPlaceProbeBytes);
  EXPECT_EQ(asked_total, large.size());
  EXPECT_TRUE(asked_prefix == large.substr(0, wire::kPlaceProbeBytes));
  EXPECT_TRUE(flat(bb) == large.substr(0, 1000));
  EXPECT_TRUE(dest.substr(0, large.size() - 1000) == large.substr(1000));
  // Declined: the whole message in the buffer, as without a hook.
  offset = 0;
  got = receiver.Next(sv[1], &bb, hook);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_FALSE(receiver.placed());
  EXPECT_TRUE(flat(bb) == large);
  // Placed from the end of the probe (nothing of the tail in the buffer yet).
  offset = wire::kPlaceProbeBytes;
  got = receiver.Next(sv[1], &bb, hook);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_TRUE(receiver.placed());
  EXPECT_TRUE(flat(bb) == other.substr(0, offset));
  EXPECT_TRUE(dest.substr(0, other.size() - offset) == other.substr(offset));
  // Small: the hook is not asked.
  asked_len = 0;
  got = receiver.Next(sv[1], &bb, hook);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_FALSE(receiver.placed());
  EXPECT_EQ(asked_len, 0u);
  EXPECT_EQ(flat(bb), "hello");
  // Cut short inside the placed tail.
  offset = 10;
  got = receiver.Next(sv[1], &bb, hook);
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("inside a message"));
  sender.join();
  EXPECT_TRUE(sent.ok()) << sent;
  ::close(sv[0]);
  ::close(sv[1]);
}

// Byte streams: a header with a length over the receiver's limit is an
// error at once (nothing allocated), as are a wrong magic, unknown flags,
// and a stream that ends inside a header or a message.
TEST(SocketStreamBytes, BrokenRecordsAreErrorsNotAllocations) {
  const auto receive = [](const std::string& bytes) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(::send(sv[0], bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    ::shutdown(sv[0], SHUT_WR);
    wire::StreamReceiver receiver(size_t{1} << 20, 0, StreamFraming::kByteStream);
    grpc::ByteBuffer bb;
    absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
    ::close(sv[0]);
    ::close(sv[1]);
    return got.ok() ? absl::OkStatus() : got.status();
  };
  const auto header = [](uint32_t magic, uint32_t flags, uint64_t length) {
    wire::ByteStreamHeader h;
    h.magic = magic;
    h.flags = flags;
    h.length = length;
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
  };
  absl::Status st = receive(header(wire::kStreamMagic, 0, uint64_t{1} << 40));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("longer than"));
  st = receive(header(0x12345678, 0, 4));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("malformed record"));
  st = receive(header(wire::kStreamMagic, wire::kRecordMore, 4));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  st = receive(header(wire::kStreamMagic, wire::kRecordEnd, 2));  // shorter than a status code
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  st = receive(header(wire::kStreamMagic, 0, 100) + std::string(10, 'x'));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("inside a message"));
  st = receive(header(wire::kStreamMagic, 0, 100).substr(0, 7));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
}

// The length a byte stream's header announces is the peer's claim: the
// buffer grows with the bytes that came, not to the claim (a peer could
// otherwise make the daemon hold its largest message size per connection
// for the price of a header). A message that does come whole arrives whole.
TEST(SocketStreamBytes, AnAnnouncedLengthIsNotReservedBeforeItsBytesArrive) {
  wire::ByteStreamHeader h;
  h.magic = wire::kStreamMagic;
  h.flags = 0;
  h.length = 60 << 20;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const std::string bytes = std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + std::string(1000, 'x');
  ASSERT_EQ(::send(sv[0], bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  ::shutdown(sv[0], SHUT_WR);
  wire::StreamReceiver receiver(size_t{64} << 20, 0, StreamFraming::kByteStream);
  grpc::ByteBuffer bb;
  absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
  ::close(sv[0]);
  ::close(sv[1]);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("inside a message"));
  EXPECT_LE(receiver.buffer_bytes(), size_t{2} << 20);

  // 5 MiB whole, through the steps.
  std::string message(5 << 20, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 13 + i / 4099);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  absl::Status sent;
  std::thread sender([&] {
    grpc::Slice slice(message.data(), message.size());
    sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&slice, 1), StreamFraming::kByteStream);
    ::shutdown(sv[0], SHUT_WR);
  });
  wire::StreamReceiver whole(size_t{64} << 20, 0, StreamFraming::kByteStream);
  got = whole.Next(sv[1], &bb);
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(got.ok() && *got) << got.status();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bb.Dump(&slices).ok());
  std::string received;
  for (const grpc::Slice& s : slices) received.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_TRUE(received == message);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(SocketStreamRecords, AMessageGoesThroughASocketWhoseBufferIsSmallerThanARecord) {
  // A host with a small net.core.wmem_default refuses 64 KiB datagrams
  // (EMSGSIZE): the sender falls back to shorter records, and the receiver
  // gets the message whole.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  const int small = 16 << 10;  // the kernel doubles it: 32 KiB
  ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  std::string message(300001, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 7 + i / 251);
  absl::Status sent;
  std::thread sender([&] {
    grpc::Slice slice(message.data(), message.size());
    sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&slice, 1));
    ::shutdown(sv[0], SHUT_WR);  // a failed send ends the receiver's wait
  });
  wire::StreamReceiver receiver(size_t{1} << 20);
  grpc::ByteBuffer bb;
  absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(*got);
  grpc::Slice whole;
  ASSERT_TRUE(bb.DumpToSingleSlice(&whole).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(whole.begin()), whole.size()), message);
  ::close(sv[0]);
  ::close(sv[1]);
}

// A receiver polls for the next message only while the waits stay short:
// a message that comes soon after Next starts is taken while polling; after
// a wait longer than the polling time, the next wait blocks at once; a short
// wait turns polling back on. With a polling time of 0 it never polls.
TEST(SocketStreamRecords, ReceiversPollOnlyWhileWaitsStayShort) {
  if (wire::UsableCores() < 2) GTEST_SKIP() << "receivers never poll with one usable core";
  for (const int64_t spin_ns : {int64_t{200'000'000}, int64_t{0}}) {
    SCOPED_TRACE(spin_ns);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    // The sender waits this long (ms) before each message.
    const std::vector<int> delays_ms = {5, 600, 5, 5};
    absl::Status sent;
    std::thread sender([&] {
      for (size_t i = 0; i < delays_ms.size() && sent.ok(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delays_ms[i]));
        const std::string m(10, static_cast<char>('a' + i));
        grpc::Slice slice(m.data(), m.size());
        sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&slice, 1));
      }
    });
    wire::StreamReceiver receiver(size_t{1} << 20, spin_ns);
    std::vector<int64_t> polled;  // polled_messages() after each message
    for (size_t i = 0; i < delays_ms.size(); ++i) {
      grpc::ByteBuffer bb;
      absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
      ASSERT_TRUE(got.ok() && *got) << i << " " << got.status();
      EXPECT_EQ(bb.Length(), 10u);
      polled.push_back(receiver.polled_messages());
    }
    sender.join();
    EXPECT_TRUE(sent.ok()) << sent;
    if (spin_ns > 0) {
      // 1: polled; 2: polled 200 ms, then blocked; 3: blocked at once (the
      // last wait was long); 4: polled again.
      EXPECT_EQ(polled, (std::vector<int64_t>{1, 1, 1, 2}));
    } else {
      EXPECT_EQ(polled, (std::vector<int64_t>{0, 0, 0, 0}));
    }
    ::close(sv[0]);
    ::close(sv[1]);
  }
}

// Pinned to one core (taskset, a cpuset) on a machine with more, a receiver
// never polls: the thread it waits for needs that core. In a fresh process
// (a death test re-runs the binary), since the limit is read once.
TEST(SocketStreamRecords, ReceiversDoNotPollWhenPinnedToOneCore) {
  // Not wire::UsableCores(): read once, it would be read here, before the pinning.
  if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "receivers never poll on one core";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(::sched_getcpu(), &one);
        if (::sched_setaffinity(0, sizeof(one), &one) != 0) std::_Exit(3);
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) std::_Exit(3);
        std::thread sender([&] {  // on the same core (threads inherit the mask)
          for (int i = 0; i < 4; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            const std::string m(10, 'p');
            grpc::Slice slice(m.data(), m.size());
            wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&slice, 1)).IgnoreError();
          }
        });
        wire::StreamReceiver receiver(size_t{1} << 20, int64_t{200'000'000});
        for (int i = 0; i < 4; ++i) {
          grpc::ByteBuffer bb;
          absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
          if (!got.ok() || !*got) std::_Exit(3);
        }
        sender.join();
        std::_Exit(receiver.polled_messages() == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(SocketStreamRecords, TheReceiveBufferShrinksAfterALargeMessage) {
  // A 4 MiB message grows the buffer to hold it; a run of small messages
  // afterwards frees it, and each message still arrives whole.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  const std::string large(size_t{4} << 20, 'L');
  const int n_small = wire::StreamReceiver::kShrinkAfterSmallMessages + 1;
  absl::Status sent;
  std::thread sender([&] {
    grpc::Slice big(large.data(), large.size());
    sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&big, 1));
    for (int i = 0; i < n_small && sent.ok(); ++i) {
      const std::string m(100 + i, static_cast<char>('a' + i % 26));
      grpc::Slice small(m.data(), m.size());
      sent = wire::SendStreamMessage(sv[0], grpc::ByteBuffer(&small, 1));
    }
    ::shutdown(sv[0], SHUT_WR);
  });
  wire::StreamReceiver receiver(size_t{64} << 20);
  grpc::ByteBuffer bb;
  absl::StatusOr<bool> got = receiver.Next(sv[1], &bb);
  ASSERT_TRUE(got.ok() && *got) << got.status();
  EXPECT_EQ(bb.Length(), large.size());
  const size_t grown = receiver.buffer_bytes();
  EXPECT_GE(grown, large.size());
  for (int i = 0; i < n_small; ++i) {
    got = receiver.Next(sv[1], &bb);
    ASSERT_TRUE(got.ok() && *got) << i << " " << got.status();
    grpc::Slice whole;
    ASSERT_TRUE(bb.DumpToSingleSlice(&whole).ok());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(whole.begin()), whole.size()),
              std::string(100 + i, static_cast<char>('a' + i % 26)));
    if (i < wire::StreamReceiver::kShrinkAfterSmallMessages) {
      EXPECT_EQ(receiver.buffer_bytes(), grown) << i;
    }
  }
  EXPECT_LE(receiver.buffer_bytes(), 2 * wire::StreamReceiver::kSmallMessageBytes);
  got = receiver.Next(sv[1], &bb);
  EXPECT_TRUE(got.ok() && !*got);
  sender.join();
  EXPECT_TRUE(sent.ok()) << sent;
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace
}  // namespace tensord::testing
