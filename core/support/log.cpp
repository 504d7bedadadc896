// log.h: the sink (atomic: set once by the Python module, read by any thread) and the stderr default.
#include "core/support/log.h"

#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/support/env.h"

namespace ember {

namespace {

std::atomic<bool (*)(LogLevel)> g_enabled{nullptr};
std::atomic<void (*)(LogLevel, const std::string&)> g_write{nullptr};

// EMBER_LOG's threshold for the stderr default (read each time: tests set it at run time).
int stderr_threshold() {
  const std::string e = env_str("EMBER_LOG");
  if (e == "debug") return 10;
  if (e == "info") return 20;
  if (e == "error") return 40;
  return 30;
}

}  // namespace

bool log_enabled(LogLevel level) {
  if (auto f = g_enabled.load()) return f(level);
  return static_cast<int>(level) >= stderr_threshold();
}

void log_message(LogLevel level, const std::string& text) {
  if (!log_enabled(level)) return;
  if (auto w = g_write.load()) return w(level, text);
  const char* tag = level >= LogLevel::error ? "error: " : level >= LogLevel::warning ? "warning: " : "";
  std::fprintf(stderr, "ember: %s%s\n", tag, text.c_str());
}

void set_log_sink(LogSink sink) {
  g_write.store(sink.write);
  g_enabled.store(sink.enabled);
}

}  // namespace ember
