// The two error channels (DESIGN §6). User errors say what is wrong, which value, expected vs
// actual and the user's source line; internal errors carry Ember's file:line and the condition.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

// Where in the user's program a node was traced from.
struct SourceLoc {
  std::string file;
  int line = 0;
  bool known() const { return line > 0; }
  std::string str() const { return known() ? file + ":" + std::to_string(line) : std::string(); }
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
