// Ember's log: one-line messages (compile timings, device choices, cache warnings) at a level.
// Without a sink they go to stderr as "ember: <text>" (warnings "ember: warning: <text>") when
// the level is enabled by EMBER_LOG (debug, info, warning, error; default warning). The Python
// module installs a sink that hands them to Python's `logging` under the `ember` logger.
#pragma once

#include <string>

namespace ember {

// The levels are Python logging's numbers.
enum class LogLevel { debug = 10, info = 20, warning = 30, error = 40 };

// Whether a message at `level` would be written anywhere (build costly messages only then).
bool log_enabled(LogLevel level);

// Writes one message (no trailing newline) when its level is enabled.
void log_message(LogLevel level, const std::string& text);

// Where messages go instead of stderr: `enabled` answers log_enabled, `write` takes a message;
// both may be called from any thread. A null sink (the default) restores stderr and EMBER_LOG.
struct LogSink {
  bool (*enabled)(LogLevel) = nullptr;
  void (*write)(LogLevel, const std::string&) = nullptr;
};
void set_log_sink(LogSink sink);

}  // namespace ember
