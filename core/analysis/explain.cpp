#include "core/analysis/explain.h"

#include <cctype>
#include <fstream>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ember {

namespace {

// Sources registered by register_source (never erased: source_line hands out references).
std::mutex registered_mutex;
std::unordered_map<std::string, std::vector<std::string>>& registered() {
  static auto* r = new std::unordered_map<std::string, std::vector<std::string>>();
  return *r;
}

// The text of line `line` of `file` (empty when unreadable and not registered: a doctest, an
// interactive session whose front end did not register it).
const std::string& source_line(const SourceLoc& loc) {
  static thread_local std::unordered_map<std::string, std::vector<std::string>> files;
  static const std::string none;
  if (!loc.known()) return none;
  {
    std::lock_guard<std::mutex> lock(registered_mutex);
    auto r = registered().find(loc.file());
    if (r != registered().end())
      return loc.line <= static_cast<int>(r->second.size()) ? r->second[static_cast<size_t>(loc.line - 1)] : none;
  }
  auto it = files.find(loc.file());
  if (it == files.end()) {
    std::vector<std::string> lines;
    std::ifstream in(loc.file());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    it = files.emplace(loc.file(), std::move(lines)).first;
  }
  const std::vector<std::string>& lines = it->second;
  return loc.line <= static_cast<int>(lines.size()) ? lines[static_cast<size_t>(loc.line - 1)] : none;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The name a line assigns to: `B = ...`, `B: T = ...`, `B += ...`; empty otherwise.
std::string assigned_name(const SourceLoc& loc) {
  const std::string& s = source_line(loc);
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  const size_t start = i;
  if (i >= s.size() || std::isdigit(static_cast<unsigned char>(s[i]))) return {};
  while (i < s.size() && (ident_char(s[i]) || (s[i] == '.' && i + 1 < s.size() && ident_char(s[i + 1])))) ++i;
  std::string name = s.substr(start, i - start);  // a dotted name too: `g.val = ...`
  if (name.empty() || name == "return" || name == "with" || name == "if" || name == "for") return {};
  while (i < s.size() && s[i] == ' ') ++i;
  if (i < s.size() && s[i] == ':') {  // an annotation up to its '='
    size_t eq = s.find('=', i);
    if (eq == std::string::npos) return {};
    i = eq;
  }
  if (i + 1 < s.size() && std::string("+-*/").find(s[i]) != std::string::npos && s[i + 1] == '=') return name;
  if (i < s.size() && s[i] == '=' && (i + 1 >= s.size() || s[i + 1] != '=')) return name;
  return {};
}

// The counter name of `with em.loop(...) as t:` on the loop's line, else "t".
std::string loop_name(const Node* l) {
  std::vector<std::string> names = as_names(l);
  return names.empty() ? "t" : names[0];
}

std::string line_suffix(const Node* n) { return n && n->loc.known() ? " (line " + std::to_string(n->loc.line) + ")" : ""; }

bool reads(const MemAccess& x) {
  return x.kind == AccessKind::read || (x.kind == AccessKind::write && x.node->op == Op::atomic);
}
bool writes(const MemAccess& x) { return x.kind != AccessKind::read; }

// How an access touches its memory: B[i + 1], s (a var), X (the whole memory).
std::string access_text(const MemAccess& x) {
  std::string name = memory_name(x.memory);
  const Node* n = x.node;
  if (x.own) {
    if (x.memory->rank() == 0) return name;
    std::string s = name + "[";
    for (int a = 0; a < x.memory->rank(); ++a) s += (a ? ", " : "") + std::string(1, "ijklmn"[a % 6]);
    return s + "]";
  }
  if ((n->op != Op::load && n->op != Op::store && n->op != Op::atomic) || n->flat) return name;
  if (n->num_operands() == n->first_index_operand()) return name;  // a scalar
  std::string s = name + "[";
  for (int a = n->first_index_operand(); a < n->num_operands(); ++a)
    s += (a > n->first_index_operand() ? ", " : "") + index_text(n->operand(a));
  return s + "]";
}

// What a host node between two kernels does, for "the host runs ... between them".
std::string host_step(const Node* n) {
  switch (n->op) {
    case Op::loop: return "host loop " + loop_name(n);
    case Op::if_: return "a host if";
    case Op::load: return "a read of " + access_text({n, n->operand(0), AccessKind::read});
    case Op::store: return "a write of " + access_text({n, n->operand(0), AccessKind::write});
    case Op::set: return "an assignment of " + memory_name(n->operand(0));
    default: return std::string("a host ") + op_name(n->op);
  }
}

// The user's line for an access. One the compiler made for a var or value (stamped with the
// line that made the memory) gives the line of the value it stores or of its first user.
std::string access_line(const MemAccess& x) {
  const Node* n = x.node;
  if (n && x.memory && n->loc.known() && n->loc.line == x.memory->loc.line) {
    if (n->op == Op::store && n->operand(1)->loc.known()) return line_suffix(n->operand(1));
    for (const Node* u : n->users)
      if (u->loc.known() && u->loc.line != x.memory->loc.line) return line_suffix(u);
  }
  return line_suffix(n);
}

std::string who(const Node* access) {
  const Node* k = access->enclosing_kernel();
  if (k) return kernel_ref(k);
  return access->op == Op::move_memory ? "a buffer move on the host" : "the host";
}

}  // namespace

ExplainLog*& explain_log() {
  static thread_local ExplainLog* log = nullptr;
  return log;
}

void register_source(const std::string& file, const std::vector<std::string>& lines) {
  std::lock_guard<std::mutex> lock(registered_mutex);
  registered().emplace(file, lines);  // the first registration stays (references into it may be held)
}

std::vector<std::string> as_names(const Node* scope) {
  const std::string& s = source_line(scope->loc);
  std::vector<std::string> names;
  size_t as = s.find(" as ");
  if (as == std::string::npos) return names;
  for (size_t i = as + 4; i < s.size() && s[i] != ':';) {
    if (!ident_char(s[i])) { ++i; continue; }  // '(' ',' ' '
    size_t e = i;
    while (e < s.size() && ident_char(s[e])) ++e;
    names.push_back(s.substr(i, e - i));
    i = e;
  }
  return names;
}

std::string kernel_ref(const Node* k) { return "{K" + std::to_string(k->id) + "}"; }

std::string memory_name(const Node* mem) {
  if (mem->op == Op::input || mem->op == Op::scalar_arg || mem->op == Op::shape_arg) {
    if (!mem->name.empty()) return mem->name;
    return "argument " + std::to_string(mem->index);
  }
  std::string name = assigned_name(mem->loc);
  if (!name.empty()) return name;
  if (mem->loc.known()) return "the tensor of line " + std::to_string(mem->loc.line);
  return "a temporary";
}

std::string index_text(const Node* x) {
  std::function<std::string(const Node*, int, int)> text = [&](const Node* n, int prec, int depth) -> std::string {
    if (depth > 8) return "...";
    auto bin = [&](const char* op, int p) {
      std::string s = text(n->operand(0), p, depth + 1) + " " + op + " " + text(n->operand(1), p + 1, depth + 1);
      return p < prec ? "(" + s + ")" : s;
    };
    switch (n->op) {
      case Op::constant: return n->dtype == DType::i32 ? std::to_string(n->i()) : std::to_string(n->f());
      case Op::index: return std::string(1, "ijklmn"[n->axis % 6]);
      case Op::loop: return loop_name(n);
      case Op::shape_arg:
      case Op::scalar_arg:
      case Op::input: return memory_name(n);
      case Op::add:  // i + 1 as the user writes it (simplify puts constants first)
        if (n->operand(0)->op == Op::constant && n->operand(1)->op != Op::constant) {
          std::string t = text(n->operand(1), 1, depth + 1) + " + " + text(n->operand(0), 2, depth + 1);
          return prec > 1 ? "(" + t + ")" : t;
        }
        return bin("+", 1);
      case Op::sub: return bin("-", 1);
      case Op::mul: return bin("*", 2);
      case Op::div: return bin("//", 2);
      case Op::mod: return bin("%", 2);
      case Op::neg: return "-" + text(n->operand(0), 3, depth + 1);
      case Op::min:
      case Op::max:
        return std::string(op_name(n->op)) + "(" + text(n->operand(0), 0, depth + 1) + ", " +
               text(n->operand(1), 0, depth + 1) + ")";
      case Op::cast: return text(n->operand(0), prec, depth + 1);
      case Op::load: return access_text({n, n->operand(0), AccessKind::read});
      default: return "?";
    }
  };
  return text(x, 0, 0);
}

std::string dependence_text(const DepWhy& why, const std::string& first_who, const std::string& second_who,
                            const std::string& where) {
  const MemAccess& e = why.first;
  const MemAccess& l = why.second;
  const std::string mem = memory_name(e.memory);
  if (why.cause == DepWhy::Cause::too_many)
    return second_who + " and " + first_who + " access " + mem +
           " in more pairs of places than the analysis checks: assumed dependent";
  if (why.cause == DepWhy::Cause::unknown)
    return second_who + " accesses " + access_text(l) + ", which " + first_who +
           " also accesses: the analysis could not model the pair, assumed dependent" + access_line(l);
  const char* verb = writes(e) && reads(l) ? " reads " : " writes ";
  const char* by = writes(e) && reads(l) ? " written by " : reads(e) && writes(l) ? " read by " : " also written by ";
  return second_who + verb + access_text(l) + by + first_who + " " + where + access_line(l);
}

void explain_pair(const Node* a, const Node* b, const std::string& text) {
  if (ExplainLog* log = explain_log()) log->pairs[{a->id, b->id}] = text;
}

void explain_replaced(const Node* was, const Node* now) {
  if (ExplainLog* log = explain_log()) log->replaced[now->id] = was->id;
}

void explain_separated(const Node* a, const Node* host, const Node* b) {
  explain_pair(a, b, kernel_ref(b) + " stays apart from " + kernel_ref(a) + ": the host runs " + host_step(host) +
                         " between them" + line_suffix(host));
}

void explain_host_loops(Program& p, ExplainLog& log) {
  DependenceAnalysis dep;
  std::function<void(Node*)> scope = [&](Node* s) {
    for (Node* c = s->first_child; c; c = c->next) {
      if (c->op == Op::kernel || !c->is_scope()) continue;
      if (c->op == Op::loop) {
        // The kernels of its body (one group each) and its host statements (one group).
        std::vector<std::unique_ptr<AccessGroup>> groups;
        AccessGroup host({}, 0);
        std::function<void(Node*)> body = [&](Node* b) {
          for (Node* x = b->first_child; x; x = x->next) {
            if (x->op == Op::kernel) {
              groups.push_back(std::make_unique<AccessGroup>(x->shape, x->rank()));
              groups.back()->add(x);
            } else if (x->is_scope()) {
              for (Node* o : x->operands)
                if (o->op == Op::var) host.add_access({x, o, AccessKind::read, true});
              body(x);
            } else {
              host.add(x);
            }
          }
        };
        body(c);
        if (!groups.empty()) {
          std::vector<const AccessGroup*> all;
          for (auto& g : groups) all.push_back(g.get());
          all.push_back(&host);
          DepWhy why;
          std::string head = "host loop " + loop_name(c) + line_suffix(c) + " stays sequential";
          log.loops[c->id] = dep.loop_carries(c, all, &why)
                                 ? head + ": " + dependence_text(why, who(why.first.node), who(why.second.node),
                                                                 "in an earlier iteration")
                                 : head + ", though no dependence crosses its iterations (Ember does not make host "
                                          "loops kernel axes)";
        }
      }
      scope(c);
    }
  };
  scope(p.root());
}

std::string explain_text(const Program& p, const ExplainLog& log) {
  std::unordered_map<int, int> number;  // kernel node id -> final kernel number
  int kernels = 0;
  p.for_each([&](Node* n) {
    if (n->op != Op::kernel) return;
    ++kernels;
    // It, and the kernels it replaced (the first in program order keeps a split kernel's name).
    for (int id = n->id;;) {
      number.emplace(id, n->index);
      auto r = log.replaced.find(id);
      if (r == log.replaced.end()) break;
      id = r->second;
    }
  });
  auto resolve = [&](const std::string& t) {
    std::string out;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 2, "{K") == 0) {
        size_t e = t.find('}', i);
        auto it = number.find(std::stoi(t.substr(i + 2, e - i - 2)));
        out += it != number.end() ? "kernel " + std::to_string(it->second) : "a kernel removed later";
        i = e + 1;
      } else {
        out += t[i++];
      }
    }
    return out;
  };
  auto chain = [&](const Node* k) {
    std::vector<int> ids{k->id};
    for (auto r = log.replaced.find(k->id); r != log.replaced.end(); r = log.replaced.find(r->second))
      ids.push_back(r->second);
    return ids;
  };
  std::vector<std::string> lines;
  std::function<bool(const Node*)> has_kernel = [&](const Node* s) {
    for (const Node* c = s->first_child; c; c = c->next)
      if (c->op == Op::kernel || (c->is_scope() && has_kernel(c))) return true;
    return false;
  };
  std::function<void(const Node*)> scope = [&](const Node* s) {
    const Node* prev = nullptr;
    for (const Node* c = s->first_child; c; c = c->next) {
      if (c->op == Op::kernel) {
        if (prev) {
          // The record names these kernels or ones they replaced.
          auto it = log.pairs.end();
          for (int a : chain(prev))
            for (int b : chain(c))
              if (it == log.pairs.end()) it = log.pairs.find({a, b});
          lines.push_back(it != log.pairs.end()
                              ? resolve(it->second)
                              : "kernel " + std::to_string(c->index) + " stays apart from kernel " + std::to_string(prev->index) + ": they" +
                                    " were not adjacent when kernels merged (a kernel between them was removed later)");
        }
        prev = c;
        continue;
      }
      if (!c->is_scope()) continue;
      auto it = log.loops.find(c->id);
      if (c->op == Op::loop && it != log.loops.end() && has_kernel(c)) lines.push_back(resolve(it->second));
      scope(c);
    }
  };
  scope(p.root());
  if (lines.empty())
    return "all fused: " + std::to_string(kernels) + (kernels == 1 ? " kernel" : " kernels") +
           ", no adjacent kernels left apart and no host loop left sequential";
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace ember
