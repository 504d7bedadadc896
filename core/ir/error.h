// The two error channels (DESIGN §6). User errors say what is wrong, which value, expected vs
// actual and the user's source line; internal errors carry Ember's file:line and the condition.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

// Where in the user's program a node was traced from. The file name is interned in a
// process-wide table that only grows, so a location is 8 bytes and every node's copy of it is
// two words, not a heap string.
class SourceLoc {
 public:
  SourceLoc() = default;
  SourceLoc(const std::string& file, int line);  // interns `file`
  const std::string& file() const;
  bool known() const { return line > 0; }
  std::string str() const { return known() ? file() + ":" + std::to_string(line) : std::string(); }
  friend bool operator==(const SourceLoc& a, const SourceLoc& b) { return a.file_ == b.file_ && a.line == b.line; }
  friend bool operator!=(const SourceLoc& a, const SourceLoc& b) { return !(a == b); }

  int line = 0;

 private:
  uint32_t file_ = 0;  // index in the intern table; 0 is ""
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error { public: using Error::Error; };
class TypeError : public Error { public: using Error::Error; };
class CompileError : public Error { public: using Error::Error; };
class BackendError : public Error { public: using Error::Error; };
class InternalError : public Error { public: using Error::Error; };

// Appends " (at file:line)" when the location is known.
std::string with_loc(const std::string& msg, const SourceLoc& loc);

[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace ember

// internal_assert(cond) << "message": the message is only built when the check fails.
#define EMBER_INTERNAL_ASSERT(cond, msg)                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::ostringstream ember_os_;                                                        \
      ember_os_ << msg;                                                                    \
      ::ember::throw_internal(__FILE__, __LINE__, #cond, ember_os_.str());                 \
    }                                                                                      \
  } while (0)

// user_error<ShapeError>(loc, "...") throws the given user error with the location appended.
#define EMBER_USER_ERROR(Kind, loc, msg)                                                   \
  do {                                                                                     \
    std::ostringstream ember_os_;                                                          \
    ember_os_ << msg;                                                                      \
    throw ::ember::Kind(::ember::with_loc(ember_os_.str(), (loc)));                        \
  } while (0)
