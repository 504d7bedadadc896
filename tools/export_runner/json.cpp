// Recursive-descent JSON parser (RFC 8259), for json.h.
#include "json.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace runner {

const Json* Json::find(const std::string& key) const {
  if (kind != Kind::object) return nullptr;
  for (const auto& kv : obj)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

namespace {

class Parser {
 public:
  Parser(const std::string& t, const std::string& what) : t_(t), what_(what) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  const std::string& t_;
  std::string what_;
  size_t p_ = 0;

  [[noreturn]] void fail(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    std::ostringstream os;
    os << what_ << ": line " << line << ", column " << col << ": " << msg;
    throw std::runtime_error(os.str());
  }

  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  bool eat(char c) {
    skip_ws();
    if (p_ < t_.size() && t_[p_] == c) return ++p_, true;
    return false;
  }

  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }

  Json value(int depth) {
    if (depth > 200) fail("nesting deeper than 200");
    skip_ws();
    if (p_ >= t_.size()) fail("unexpected end of text");
    const char c = t_[p_];
    Json v;
    if (c == '{') {
      ++p_;
      v.kind = Json::Kind::object;
      if (eat('}')) return v;
      do {
        skip_ws();
        if (p_ >= t_.size() || t_[p_] != '"') fail("expected a string key");
        std::string key = string();
        for (const auto& kv : v.obj)
          if (kv.first == key) fail("duplicate key \"" + key + "\"");
        expect(':');
        v.obj.emplace_back(std::move(key), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++p_;
      v.kind = Json::Kind::array;
      if (eat(']')) return v;
      do v.arr.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.str = string();
    } else if (t_.compare(p_, 4, "true") == 0) {
      p_ += 4, v.kind = Json::Kind::boolean, v.b = true;
    } else if (t_.compare(p_, 5, "false") == 0) {
      p_ += 5, v.kind = Json::Kind::boolean;
    } else if (t_.compare(p_, 4, "null") == 0) {
      p_ += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  void number(Json& v) {
    const size_t start = p_;
    auto digits = [&] {
      const size_t s = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      if (p_ == s) fail("malformed number");
    };
    if (t_[p_] == '-') ++p_;
    digits();
    bool integer = true;
    if (p_ < t_.size() && t_[p_] == '.') ++p_, digits(), integer = false;
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      digits();
      integer = false;
    }
    v.kind = Json::Kind::number;
    v.is_integer = integer;
    v.num = std::strtod(t_.substr(start, p_ - start).c_str(), nullptr);
    if (!std::isfinite(v.num)) fail("number out of range");
  }

  unsigned hex4() {
    if (p_ + 4 > t_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[p_++];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= h - '0';
      else if (h >= 'a' && h <= 'f') u |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') u |= h - 'A' + 10;
      else fail("bad \\u escape");
    }
    return u;
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) out += char(cp);
    else if (cp < 0x800) out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 63));
    else if (cp < 0x10000)
      out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 63)), out += char(0x80 | (cp & 63));
    else
      out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 63)), out += char(0x80 | ((cp >> 6) & 63)),
          out += char(0x80 | (cp & 63));
  }

  std::string string() {
    ++p_;  // the opening quote
    std::string out;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      const char c = t_[p_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated string");
      const char e = t_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (t_.compare(p_, 2, "\\u") != 0) fail("lone surrogate in \\u escape");
            p_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }
};

}  // namespace

Json parse_json(const std::string& text, const std::string& what) { return Parser(text, what).document(); }

}  // namespace runner
