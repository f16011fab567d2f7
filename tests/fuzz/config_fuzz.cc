// Fuzz target: the daemon's config file parser (ApplyConfigFile,
// server/src/daemon.cc) and the value parsers it calls (byte sizes, thread
// counts, listen addresses). The input is the file's text; any text must give
// options or an error naming the line, never a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensord/server/daemon.h"
#include "tensord/transport/socket_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The parser reads a path: give it a memfd's, no file system involved.
  static const int fd = [] {
    int fd = ::memfd_create("tensord-config-fuzz", MFD_CLOEXEC);
    if (fd < 0) abort();
    return fd;
  }();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) abort();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  tensord::server::DaemonOptions options;
  if (tensord::server::ApplyConfigFile(path, &options).ok()) {
    for (const std::string& a : options.listen) {
      if (a.rfind("unix:", 0) != 0) (void)tensord::wire::ParseHostPort(a);
    }
  }
  // The value parsers on their own, over the whole text.
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)tensord::server::ParseByteSize(text);
  (void)tensord::server::ParseGrpcThreads(text);
  (void)tensord::wire::ParseStreamSpinMicros(text);
  (void)tensord::wire::ParseHostPort(text);
  return 0;
}
