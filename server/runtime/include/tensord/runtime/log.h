// tensord/runtime/log.h — the daemon's log: one line per event on stderr
// ("2024-05-01 12:00:00.123 tensord[4242] I session 7f.. opened for 'knn.py'").
// abseil 20220623 has no absl/log, so this is a tiny, thread-safe stand-in;
// each line is written with a single write(2) so lines never interleave.
#ifndef TENSORD_RUNTIME_LOG_H_
#define TENSORD_RUNTIME_LOG_H_


#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"

namespace tensord::runtime {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// "error", "warning" (or "warn"), "info", "debug". InvalidArgument otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);

// Messages above the level are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);

// Writes one line (a trailing newline is added).
void LogLine(LogLevel level, absl::string_view message);

// Log(LogLevel::kInfo, "session ", id, " opened"); arguments are formatted
// with absl::StrCat only when the level is enabled.
template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_LOG_H_
