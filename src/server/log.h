// Server logging: one line per event on stderr, with a UTC timestamp and level:
//   2026-11-22T03:04:05.123Z INFO  listening on 127.0.0.1:7420
// Nothing is logged per request at the default level (info).
#pragma once

#include <cstdarg>
#include <string_view>

namespace tumbler::server {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "error", "warn", "info", "debug"; false if unknown.
bool ParseLogLevel(std::string_view text, LogLevel* out);

void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tumbler::server

#define TLOG_ERROR(...) ::tumbler::server::Log(::tumbler::server::LogLevel::kError, __VA_ARGS__)
#define TLOG_WARN(...) ::tumbler::server::Log(::tumbler::server::LogLevel::kWarn, __VA_ARGS__)
#define TLOG_INFO(...) ::tumbler::server::Log(::tumbler::server::LogLevel::kInfo, __VA_ARGS__)
#define TLOG_DEBUG(...)                                                              \
  do {                                                                               \
    if (::tumbler::server::GetLogLevel() >= ::tumbler::server::LogLevel::kDebug)     \
      ::tumbler::server::Log(::tumbler::server::LogLevel::kDebug, __VA_ARGS__);      \
  } while (0)
