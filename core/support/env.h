// Ember's environment switches (EMBER_DEBUG, EMBER_LOG, EMBER_CACHE_DIR, ...), read through one set
// of helpers so that every switch means the same thing: unset and "" are absent, "0" is off.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

namespace ember {

// The variable's value, "" when unset.
inline std::string env_str(const char* name) {
  const char* e = std::getenv(name);
  return e ? e : "";
}

// Whether a switch is on: set, not empty and not "0".
inline bool env_on(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::strcmp(e, "0") != 0;
}

// Whether a list-valued switch (EMBER_DEBUG=ir,time) contains `word`.
inline bool env_has(const char* name, const char* word) {
  const char* e = std::getenv(name);
  return e && std::strstr(e, word);
}

// The variable as an integer, `fallback` when unset, empty or not a number.
inline long long env_int(const char* name, long long fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  return end && *end == '\0' ? v : fallback;
}

}  // namespace ember
