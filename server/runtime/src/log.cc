// The daemon's one-line log on stderr.
#include "tensord/runtime/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensord::runtime {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return 'E';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kDebug: return 'D';
  }
  return '?';
}
}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "error") return LogLevel::kError;
  if (t == "warning" || t == "warn") return LogLevel::kWarning;
  if (t == "info") return LogLevel::kInfo;
  if (t == "debug") return LogLevel::kDebug;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level '", text, "' (expected error, warning, info or debug)"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void LogLine(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line = absl::StrCat(absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                                   " tensord[", ::getpid(), "] ", std::string(1, LevelLetter(level)), " ", message,
                                   "\n");
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;  // nowhere to log to; never block or crash for it
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace tensord::runtime
