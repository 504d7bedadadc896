// ThinString: a string one pointer wide, null while empty. For a node attribute most nodes leave
// empty (an argument's or a kernel's name): a std::string costs 32 bytes of every Node, and
// Node's size is memory every pass walks (issue 17). Reads like a const std::string (and
// converts to one); assigning copies into one heap std::string.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace ember {

class ThinString {
 public:
  ThinString() = default;
  ThinString(const std::string& s) { assign(s); }  // NOLINT: reads like a string
  ThinString(std::string_view s) { assign(std::string(s)); }  // NOLINT
  ThinString(const char* s) { assign(std::string(s)); }  // NOLINT
  ThinString(const ThinString& o) { assign(o.str()); }
  ThinString(ThinString&& o) noexcept = default;
  ThinString& operator=(const ThinString& o) {
    if (this != &o) assign(o.str());
    return *this;
  }
  ThinString& operator=(ThinString&& o) noexcept = default;
  ThinString& operator=(const std::string& s) {
    assign(s);
    return *this;
  }
  ThinString& operator=(const char* s) {
    assign(std::string(s));
    return *this;
  }

  // The string (a shared empty one while null).
  const std::string& str() const { return s_ ? *s_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads like a string
  bool empty() const { return !s_ || s_->empty(); }
  size_t size() const { return s_ ? s_->size() : 0; }
  const char* c_str() const { return str().c_str(); }
  void clear() { s_.reset(); }

  friend bool operator==(const ThinString& a, const ThinString& b) { return a.str() == b.str(); }
  friend bool operator==(const ThinString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const ThinString& a, const char* b) { return a.str() == b; }
  friend std::string operator+(const ThinString& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const std::string& a, const ThinString& b) { return a + b.str(); }
  friend std::string operator+(const ThinString& a, const char* b) { return a.str() + b; }
  friend std::string operator+(const char* a, const ThinString& b) { return a + b.str(); }
  friend std::ostream& operator<<(std::ostream& os, const ThinString& s) { return os << s.str(); }

 private:
  static const std::string& empty_string() {
    static const std::string empty;
    return empty;
  }
  void assign(const std::string& s) {
    if (s.empty()) s_.reset();
    else if (s_) *s_ = s;
    else s_ = std::make_unique<std::string>(s);
  }
  std::unique_ptr<std::string> s_;
};

}  // namespace ember
