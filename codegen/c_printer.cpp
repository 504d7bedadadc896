#include "codegen/c_printer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codegen/c_staging.h"
#include "codegen/source_lines.h"
#include "core/analysis/contraction.h"
#include "core/analysis/reductions.h"
#include "core/analysis/uniformity.h"
#include "core/ir/eval.h"

#include "core/ir/shape.h"
#include "core/support/hash.h"

namespace ember {

namespace {

// Chunked full reductions (Dialect::chunk_loop_open): at most this many chunks (their partials
// live on the stack), loops of fewer iterations stay whole, and the chunks run in parallel from
// this many iterations on.
constexpr int kReductionChunks = 64;
constexpr int64_t kMinChunkedTrips = 256;

// OpenMP regions (Dialect::threads_open, rows_open, chunk_loop_open) run on one thread below this
// much estimated work: threads x per-thread cost in op_info units, loops counted at their trip
// count (a kernel parameter's value at run time; kUnknownTrips where the bounds vary per thread).
// A fork/join costs microseconds on an idle machine but a scheduler slice (milliseconds) when a
// core is busy, so small kernels stay on the calling thread. Packed products (cpu_gemm.h) go
// parallel from kParallelMacs multiply-adds: at 2^17 (~6 us on one core) two threads already
// win on a 2-core machine with the other core busy (the digits MLP's 128 x 128 x 64 product:
// 47 -> 25 us; 128 x 128 x 10: 11 -> 7 us), and cpu_threads.h drops to one thread when the
// machine is contended enough that the fork/join would wait.
constexpr double kParallelWork = 1 << 19;
constexpr double kUnknownTrips = 64;
constexpr int64_t kParallelMacs = int64_t{1} << 17;

using Holes = std::initializer_list<std::pair<const char*, std::string>>;

// Fills the `{key}` holes of a template; braces around anything else are kept as text, and
// substituted text is never scanned again.
std::string fill(const std::string& t, Holes holes) {
  std::string out;
  out.reserve(t.size() + 64);
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '{') {
      size_t close = t.find('}', i + 1);
      if (close != std::string::npos && close - i <= 12) {
        std::string_view key(t.data() + i + 1, close - i - 1);
        const std::string* value = nullptr;
        for (const auto& h : holes)
          if (key == h.first) { value = &h.second; break; }
        if (value) { out += *value; i = close + 1; continue; }
      }
    }
    out += t[i++];
  }
  return out;
}

class KernelPrinter {
 public:
  KernelPrinter(const Node* k, const Dialect& d, const PrintOptions& opt = {}) : k_(k), d_(d), opt_(opt), body_(k) {}

  GeneratedKernel run() {
    EMBER_INTERNAL_ASSERT(k_->op == Op::kernel, "generate_kernel on " << op_name(k_->op));
    for (size_t i = 0; i < k_->memories().size(); ++i) names_[k_->memories()[i]] = "m" + std::to_string(i);
    for (size_t i = 0; i < k_->params().size(); ++i) names_[k_->params()[i]] = "p" + std::to_string(i);
    depth_ = 2;
    if (d_.wide_addresses) find_wide_addresses();
    native_ = !k_->group.empty() && !d_.group_threads_open.empty();
    rows_ = k_->rank() >= 2 && !d_.rows_open.empty() && !native_;
    gemm_found_ = d_.packed_contractions && rows_ && find_contraction(k_, &gemm_) && gemm_addresses();
    if (!d_.stage_fill.empty() && !gemm_found_) staging_ = find_staging(k_);
    if (native_) {
      sync_ = barrier_holders(k_);
      find_buffer_barriers();
      depth_ = 1;
    }
    block(k_, 0);
    std::string body = std::move(out_);
    // Columns 1 .. len-2 of a periodic stencil never wrap: a second copy of the body with the
    // wrap selects resolved runs them, so their loads are contiguous and vectorize.
    std::string interior;
    if (rows_ && has_edge_selects()) {
      const int cost = cost_;
      const auto work = work_;
      interior_ = true;
      block(k_, 0);
      interior_ = false;
      interior = std::move(out_);
      out_.clear();
      cost_ = cost;
      work_ = work;
    }
    // A contraction's epilogue: the body once more, its accumulator read from the packed sums
    // and its loop left out (ember_gemm::run computed the sums).
    if (gemm_found_) {
      const int cost = cost_;
      const auto work = work_;
      epilogue_ = true;
      block(k_, 0);
      epilogue_ = false;
      epilogue_text_ = std::move(out_);
      out_.clear();
      cost_ = cost;
      work_ = work;
    }
    GeneratedKernel g;
    g.kernel = k_;
    std::string hash_text = assemble("ember_kernel", body, interior);
    // Content-addressed: the same kernel in another program, or at another position, prints the
    // same symbol and text (and so has the same compile-cache key).
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(hash_text)));
    g.symbol = std::string("ember_") + hex;
    g.source = assemble(g.symbol, body, interior);
    return g;
  }

 private:
  // Appends a (possibly multi-line) statement at the current depth.
  void line(const std::string& s) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find('\n', start);
      if (end == std::string::npos) end = s.size();
      std::string_view l(s.data() + start, end - start);
      if (!l.empty()) {
        if (l[0] != '#') out_.append(static_cast<size_t>(2 * depth_), ' ');
        out_.append(l);
        out_ += '\n';
      }
      start = end + 1;
    }
  }

  const std::string& type(DType t) const { return d_.type[dtype_slot(t)]; }

  const std::string& need(const std::string& t, const Node* n, const char* what) const {
    EMBER_INTERNAL_ASSERT(!t.empty(), "dialect " << d_.name << " has no " << what << " for " << op_name(n->op) << " "
                                                 << dtype_name(n->dtype) << " in kernel #" << k_->index);
    return t;
  }

  std::string literal(DType t, uint32_t bits) const {
    switch (t) {
      case DType::f32: {
        float f = w2f(bits);
        if (!std::isfinite(f))
          return fill(d_.bitcast[dtype_slot(DType::u32)][dtype_slot(DType::f32)], {{"0", literal(DType::u32, bits)}});
        char buf[48];
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
        std::string s = buf;
        if (s.find_first_of(".e") == std::string::npos) s += ".0";
        s += d_.float_suffix;
        return s[0] == '-' ? "(" + s + ")" : s;
      }
      case DType::i32: {
        int32_t v = w2i(bits);
        if (v == INT32_MIN) return "(-2147483647 - 1)";
        return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
      }
      case DType::u32: return std::to_string(bits) + d_.uint_suffix;
      case DType::boolean: return bits ? d_.true_literal : d_.false_literal;
      case DType::none: break;
    }
    EMBER_INTERNAL_ASSERT(false, "literal of dtype none");
  }

  std::string ref(const Node* o) const {
    if (o->op == Op::constant) return literal(o->dtype, o->bits);
    auto it = names_.find(o);
    EMBER_INTERNAL_ASSERT(it != names_.end(), "kernel #" << k_->index << " reads " << op_name(o->op) << " %" << o->id
                                                         << ", which is not defined in it, a param, a memory or a constant");
    return it->second;
  }

  std::string convert(const std::string& e, DType from, DType to, bool bits, const Node* n) const {
    if (from == to) return e;
    const auto& table = bits ? d_.bitcast : d_.cast;
    return fill(need(table[dtype_slot(from)][dtype_slot(to)], n, bits ? "bitcast" : "cast"), {{"0", e}});
  }

  void value(const Node* n, const std::string& e) {
    if (late_.count(n)) {
      line(fill(d_.assign, {{"name", ref(n)}, {"e", e}}));
      return;
    }
    std::string name = "v" + std::to_string(next_value_++);
    names_[n] = name;
    const std::string& t = wide_.count(n) ? d_.index_type : type(n->dtype);
    line(fill(d_.decl_const, {{"T", t}, {"name", name}, {"e", e}}));
  }

  // The address-only i32 arithmetic (see Dialect::wide_addresses). Users come after their
  // operands, so one backward sweep sees every user of a node before the node.
  void find_wide_addresses() {
    std::vector<const Node*> order;
    std::function<void(const Node*)> walk = [&](const Node* s) {
      for (const Node* c = s->first_child; c; c = c->next) { order.push_back(c); walk(c); }
    };
    walk(k_);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Node* n = *it;
      if (n->dtype != DType::i32 || (n->op != Op::add && n->op != Op::sub && n->op != Op::mul)) continue;
      bool address = !n->users.empty();
      for (const Node* u : n->users) {
        bool mem = u->op == Op::load || u->op == Op::store || u->op == Op::atomic;
        bool as_index = mem && u->operand(u->first_index_operand()) == n &&
                        (u->op == Op::load || u->operand(1) != n);
        address &= as_index || wide_.count(u) > 0;
      }
      if (address) wide_.insert(n);
    }
  }

  // An operand of wide address arithmetic, in index_type: loop counters by their wide count.
  std::string wide_ref(const Node* o) const {
    if (o->op == Op::constant || wide_.count(o)) return ref(o);
    if (o->op == Op::loop && o->inside(k_)) return ref(o) + "k";  // a host loop is a parameter
    if (rows_ && o->op == Op::index && o->axis == k_->rank() - 1) return "col";
    return fill(d_.index_from_i32, {{"0", ref(o)}});
  }

  bool last_coord(const Node* n) const { return n->op == Op::index && n->axis == k_->rank() - 1; }

  // For `select(c1 + 1 >= W, c1 + 1 - W, c1 + 1)` and `select(c1 - 1 < 0, c1 - 1 + W, c1 - 1)`
  // on the last coordinate (lower_indexing's periodic neighbours): its value inside the row
  // interior, as an index_type expression; "" for any other node.
  std::string edge_select(const Node* n) const {
    if (n->op != Op::select) return "";
    const Node* c = n->operand(0);
    const Node* t = n->operand(2);
    if ((c->op != Op::ge && c->op != Op::lt) || c->operand(0) != t || (t->op != Op::add && t->op != Op::sub))
      return "";  // (a select on a scalar or bool condition has no operands to look at)
    const Node* x = t->operand(0);
    const Node* step = t->operand(1);
    if (t->op == Op::add && x->op == Op::constant) std::swap(x, step);
    if (!last_coord(x) || step->op != Op::constant) return "";
    const int32_t d = t->op == Op::sub ? -step->i() : step->i();
    if (c->op == Op::ge && d == 1 && same_dim(c->operand(1), k_->shape.back())) return "(col + 1)";
    if (c->op == Op::lt && d == -1 && c->operand(1)->op == Op::constant && c->operand(1)->i() == 0)
      return "(col - 1)";
    return "";
  }

  bool has_edge_selects() const {
    bool found = false;
    std::function<void(const Node*)> walk = [&](const Node* s) {
      for (const Node* c = s->first_child; c && !found; c = c->next) {
        found |= !edge_select(c).empty();
        walk(c);
      }
    };
    walk(k_);
    return found;
  }

  std::string elementwise(const Node* n) const {
    // Commuting operands in the kernel's own order (kernel_signature.h), not the program's.
    const bool swap = body_.swapped(n);
    if (wide_.count(n)) {
      const std::string& t = need(d_.expr[static_cast<int>(n->op)][value_class(DType::i32)], n, "expression");
      return fill(t, {{"0", wide_ref(n->operand(swap ? 1 : 0))}, {"1", wide_ref(n->operand(swap ? 0 : 1))}});
    }
    if (n->op == Op::cast) return convert(ref(n->operand(0)), n->operand(0)->dtype, n->dtype, false, n);
    if (n->op == Op::bitcast) return convert(ref(n->operand(0)), n->operand(0)->dtype, n->dtype, true, n);
    const Node* typed = n->op == Op::select ? n->operand(1) : n->operand(0);
    const std::string& t = need(d_.expr[static_cast<int>(n->op)][value_class(typed->dtype)], n, "expression");
    std::string a[3];
    for (int i = 0; i < n->num_operands() && i < 3; ++i) a[i] = ref(n->operand(i));
    if (swap) std::swap(a[0], a[1]);
    return fill(t, {{"0", a[0]}, {"1", a[1]}, {"2", a[2]}});
  }

  // A memory access's pointer and flat index (lower_indexing made indices flat and in range).
  std::pair<std::string, std::string> address(const Node* n) const {
    EMBER_INTERNAL_ASSERT(n->flat && n->num_operands() == n->first_index_operand() + 1,
                          op_name(n->op) << " in kernel #" << k_->index << " is not flat (run lower_indexing)");
    return {ref(n->operand(0)), ref(n->operand(n->first_index_operand()))};
  }

  // A loop bound that is a var is read once, before the loop (the IR reads operands at entry).
  std::string bound(const Node* o) {
    std::string r = ref(o);
    if (o->op != Op::var) return r;
    std::string name = "v" + std::to_string(next_value_++);
    line(fill(d_.decl_const, {{"T", type(DType::i32)}, {"name", name}, {"e", r}}));
    return name;
  }

  // The text of a loop bound that every thread of the kernel sees with the same value before the
  // threads start (a constant or a kernel parameter); "" otherwise.
  std::string uniform_bound(const Node* o) const {
    if (o->op == Op::constant) return std::to_string(o->i());
    for (size_t i = 0; i < k_->params().size(); ++i)
      if (k_->params()[i] == o) return fill(d_.index_from_i32, {{"0", "p" + std::to_string(i)}});
    return "";
  }

  // Multiplies the per-thread work of the statements of loop n (trip_const_, trip_sym_) by its
  // trip count: known, a run-time text over kernel parameters, or kUnknownTrips.
  void trips(const Node* n) {
    const Node *b = n->operand(0), *e = n->operand(1), *st = n->operand(2);
    if (st->op != Op::constant || st->i() == 0) { trip_const_ *= kUnknownTrips; return; }
    const int64_t s = st->i();
    if (b->op == Op::constant && e->op == Op::constant) {
      const int64_t span = s > 0 ? e->i() - b->i() : b->i() - e->i(), step = s > 0 ? s : -s;
      trip_const_ *= span > 0 ? static_cast<double>((span + step - 1) / step) : 0.0;
      return;
    }
    std::string lo = uniform_bound(s > 0 ? b : e), hi = uniform_bound(s > 0 ? e : b);
    // An upward loop to min(constant, x) from a constant (a register tile's edge) runs at most
    // constant - begin times.
    if (s > 0 && b->op == Op::constant && e->op == Op::min) {
      for (const Node* o : e->operands)
        if (o->op == Op::constant) {
          const int64_t span = o->i() - b->i();
          trip_const_ *= span > 0 ? static_cast<double>((span + s - 1) / s) : 0.0;
          return;
        }
    }
    if (lo.empty() || hi.empty()) { trip_const_ *= kUnknownTrips; return; }
    // Multiplied by 1/step rather than divided: an estimate, and no division in the kernel text.
    const int64_t step = s > 0 ? s : -s;
    std::string t = "(" + hi + " > " + lo + " ? (double)(" + hi + " - " + lo + ")";
    if (step != 1) t += " * " + std::to_string(1.0 / static_cast<double>(step));
    t += " : 0.0)";
    trip_sym_ += (trip_sym_.empty() ? "" : " * ") + t;
  }

  // The condition under which a region of `count` iterations, each doing the work `per` (op_info
  // cost units by trip-count factors, as work_), runs in parallel: two iterations or more and
  // kParallelWork or more in all.
  static std::string parallel_condition(const std::string& count, const std::map<std::string, double>& per) {
    double known = 0;
    std::string sym;
    for (const auto& [factors, units] : per) {
      if (units <= 0) continue;
      if (factors.empty()) known += units;
      else sym += " + " + std::to_string(units) + " * " + factors;
    }
    if (sym.empty()) {
      const double t = std::ceil(kParallelWork / std::max(known, 1.0));
      return count + " >= " + std::to_string(static_cast<int64_t>(std::max(t, 2.0)));
    }
    return count + " >= 2 && (double)(" + count + ") * (" + std::to_string(known) + sym + ") >= " +
           std::to_string(static_cast<int64_t>(kParallelWork));
  }

  // The condition that `count` chunks sharing the work `total` run in parallel.
  static std::string chunks_condition(const std::string& count, const std::map<std::string, double>& total) {
    double known = 0;
    std::string sym;
    for (const auto& [factors, units] : total) {
      if (units <= 0) continue;
      if (factors.empty()) known += units;
      else sym += " + " + std::to_string(units) + " * " + factors;
    }
    if (sym.empty() && known < kParallelWork) return "false";
    if (sym.empty()) return count + " >= 2";
    return count + " >= 2 && " + std::to_string(known) + sym + " >= " + std::to_string(static_cast<int64_t>(kParallelWork));
  }

  void loop(const Node* n, int loops) {
    std::string begin = ref(n->operand(0)), end = bound(n->operand(1)), step = bound(n->operand(2));
    std::vector<ReductionVar> acc = chunkable_reduction(n);
    if (!acc.empty()) {
      chunked_loop(n, loops, begin, end, step, acc);
      return;
    }
    loop_with_bounds(n, loops, begin, end, step);
  }

  // The accumulators of a loop printed in chunks (Dialect::chunk_loop_open): a reduction loop
  // (+ or *) at the top of a one-thread kernel, with a positive constant step and more than a
  // few iterations; empty for any other loop.
  std::vector<ReductionVar> chunkable_reduction(const Node* n) const {
    if (d_.chunk_loop_open.empty() || native_ || epilogue_ || k_->rank() != 0 || n->parent != k_) return {};
    const Node* st = n->operand(2);
    if (st->op != Op::constant || st->i() <= 0) return {};
    const Node* b = n->operand(0);
    const Node* e = n->operand(1);
    if (b->op == Op::constant && e->op == Op::constant && e->i() - b->i() < kMinChunkedTrips) return {};
    std::vector<ReductionVar> acc = reduction_vars(n);
    for (const ReductionVar& r : acc)
      if (r.op != Op::add && r.op != Op::mul) return {};
    return acc;
  }

  // Loop n split into chunks of consecutive iterations: each chunk accumulates from the identity
  // into its own copy of the accumulators (declared in the chunk, they shadow the kernel's), the
  // chunks run in parallel, then the kernel's accumulators combine the partials in chunk order.
  void chunked_loop(const Node* n, int loops, const std::string& begin, const std::string& end, const std::string& step,
                    const std::vector<ReductionVar>& acc) {
    const std::string id = std::to_string(next_value_++);
    const std::string trips = "ember_t" + id, chunks = "ember_n" + id, per = "ember_q" + id, c = "ember_c" + id;
    auto decl = [&](const std::string& name, const std::string& e) {
      line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", name}, {"e", e}}));
    };
    const std::string lo = "(int64_t)" + begin, hi = "(int64_t)" + end;
    decl(trips, hi + " > " + lo + " ? (" + hi + " - " + lo + " + " + step + " - 1) / " + step + " : 0");
    decl(chunks, trips + " < " + std::to_string(kReductionChunks) + " ? " + trips + " : " + std::to_string(kReductionChunks));
    decl(per, chunks + " > 0 ? (" + trips + " + " + chunks + " - 1) / " + chunks + " : 0");
    auto part = [&](size_t i) { return "ember_p" + id + "_" + std::to_string(i); };
    for (size_t i = 0; i < acc.size(); ++i)
      line(type(acc[i].var->dtype) + " " + part(i) + "[" + std::to_string(kReductionChunks) + "];");
    // Parallel when the whole loop (its work, known once its body is printed) is large enough.
    const std::string mark = "@ember_parallel" + id + "@";
    const std::map<std::string, double> before = work_;
    line(fill(d_.chunk_loop_open, {{"c", c}, {"n", chunks}, {"parallel", mark}}));
    ++depth_;
    for (const ReductionVar& r : acc) {
      const DType t = r.var->dtype;
      const uint32_t one = t == DType::f32 ? 0x3f800000u : 1u;
      const uint32_t zero = reduce_start(ReduceKind::sum, t, true);  // -0.0 for f32 (core/ir/eval.h)
      line(fill(d_.decl_var, {{"T", type(t)}, {"name", ref(r.var)}, {"e", literal(t, r.op == Op::mul ? one : zero)}}));
    }
    const std::string from = "c" + id + "lo", to = "c" + id + "hi";
    decl(from, lo + " + " + c + " * " + per + " * " + step);
    decl(to, from + " + " + per + " * " + step + " < " + hi + " ? " + from + " + " + per + " * " + step + " : " + hi);
    loop_with_bounds(n, loops, from, to, step);
    std::map<std::string, double> body = work_;
    for (const auto& [factors, units] : before) body[factors] -= units;
    const size_t at = out_.find(mark);
    EMBER_INTERNAL_ASSERT(at != std::string::npos, "chunked loop mark missing in kernel #" << k_->index);
    out_.replace(at, mark.size(), chunks_condition(chunks, body));
    for (size_t i = 0; i < acc.size(); ++i) line(part(i) + "[" + c + "] = " + ref(acc[i].var) + ";");
    --depth_;
    line(d_.block_close);
    line("for (int64_t " + c + " = 0; " + c + " < " + chunks + "; ++" + c + ") {");
    ++depth_;
    for (size_t i = 0; i < acc.size(); ++i) {
      const std::string& t = d_.expr[static_cast<int>(acc[i].op)][value_class(acc[i].var->dtype)];
      line(fill(d_.assign, {{"name", ref(acc[i].var)}, {"e", fill(t, {{"0", ref(acc[i].var)}, {"1", part(i) + "[" + c + "]"}})}}));
    }
    --depth_;
    line(d_.block_close);
  }

  void loop_with_bounds(const Node* n, int loops, const std::string& begin, const std::string& end,
                        const std::string& step) {
    std::string name = "v" + std::to_string(next_value_++);
    names_[n] = name;
    const Node* s = n->operand(2);
    const std::string& cond = s->op != Op::constant || s->i() == 0 ? d_.loop_cond_dynamic
                              : s->i() > 0                         ? d_.loop_cond_up
                                                                   : d_.loop_cond_down;
    std::string k = name + "k";
    std::string c = fill(cond, {{"k", k}, {"end", end}, {"step", step}});
    bool simd = reduction_annotation(n);
    line(fill(d_.loop_open, {{"k", k}, {"begin", begin}, {"cond", c}, {"step", step}, {"end", end}}));
    ++depth_;
    line(fill(d_.loop_counter, {{"T", type(DType::i32)}, {"name", name}, {"k", k}}));
    block(n, loops + 1);
    --depth_;
    line(d_.block_close);
    if (simd) --in_reduction_loop_;
  }

  // Annotates the outermost reduction loop of a nest (the annotation cannot nest).
  bool reduction_annotation(const Node* n) {
    if (d_.reduction_loop.empty() || in_reduction_loop_ > 0) return false;
    const Node* step = n->operand(2);
    if (step->op != Op::constant || step->i() <= 0) return false;  // needs the canonical `k < end` form
    std::vector<ReductionVar> acc = reduction_vars(n);
    if (acc.empty()) return false;
    std::string clauses = acc.size() >= 16 ? d_.reduction_in_order : "";  // more than 16 vector registers
    for (const ReductionVar& r : acc) {
      std::string op = r.op == Op::add ? "+" : r.op == Op::mul ? "*" : r.op == Op::min ? "min" : "max";
      if (r.op == Op::add && r.var->dtype == DType::f32 && !d_.f32_add_reduction.empty()) op = d_.f32_add_reduction;
      clauses += fill(d_.reduction_clause, {{"op", op}, {"name", ref(r.var)}});
    }
    line(fill(d_.reduction_loop, {{"clauses", clauses}}));
    ++in_reduction_loop_;
    return true;
  }

  void block(const Node* scope, int loops) {
    if (native_ && (scope == k_ || sync_.count(scope))) {
      group_block(scope, loops);
      return;
    }
    for (const Node* c = scope->first_child; c; c = c->next) stmt(c, loops);
  }

  // Native workgroups (Dialect::group_threads_open): a scope holding barriers. Barriers and the
  // scopes holding them run on every thread of the group (their control flow is group-uniform);
  // each run of statements between them is guarded by ember_in, so threads outside the kernel's
  // shape skip the statements but reach every barrier. Uniform pure values of a run are computed
  // before its guard (the bounds of a later barrier loop may use them); values that a later run
  // or scope uses are declared before the guard and assigned inside it.
  void group_block(const Node* scope, int loops) {
    for (const Node* c = scope->first_child; c;) {
      if (c->op == Op::group_buffer) {
        stmt(c, loops);
        c = c->next;
        continue;
      }
      if (zero_barrier_) {  // the group buffers are zeroed before anything reads them
        line(d_.barrier);
        zero_barrier_ = false;
      }
      if (sync_.count(c)) {
        stmt(c, loops);
        c = c->next;
        continue;
      }
      std::vector<const Node*> run;
      for (; c && !sync_.count(c) && c->op != Op::group_buffer; c = c->next) run.push_back(c);
      std::unordered_set<const Node*> in_run(run.begin(), run.end()), hoisted;
      for (const Node* n : run)
        if (pure(n) && uniformity_.uniform(n)) {
          stmt(n, loops);
          hoisted.insert(n);
        }
      for (const Node* n : run) {
        if (hoisted.count(n) || !declares_value(n)) continue;
        bool escapes = false;
        for (const Node* u : n->users) {
          const Node* a = u;
          while (a && a->parent != scope) a = a->parent;
          escapes |= !a || !in_run.count(a);
        }
        if (!escapes) continue;
        std::string name = "v" + std::to_string(next_value_++);
        names_[n] = name;
        late_.insert(n);
        line(fill(d_.decl_late, {{"T", type(n->dtype)}, {"name", name}}));
      }
      if (hoisted.size() == run.size()) continue;
      line(fill(d_.if_open, {{"c", "ember_in"}}));
      ++depth_;
      for (const Node* n : run)
        if (!hoisted.count(n)) stmt(n, loops);
      --depth_;
      line(d_.block_close);
    }
  }

  static bool pure(const Node* n) {
    if (n->op == Op::load || n->op == Op::store || n->op == Op::atomic || n->op == Op::var || n->op == Op::set ||
        n->first_child || n->op == Op::break_ || n->op == Op::continue_ || n->op == Op::barrier ||
        n->op == Op::group_buffer || n->op == Op::else_ || n->op == Op::loop || n->op == Op::if_)
      return false;
    return n->dtype != DType::none;
  }

  // Whether printing `n` declares a name that later statements may read.
  static bool declares_value(const Node* n) {
    switch (n->op) {
      case Op::constant: case Op::index: case Op::store: case Op::loop: case Op::if_: case Op::else_:
      case Op::break_: case Op::continue_: case Op::set: case Op::barrier: case Op::group_buffer:
        return false;
      case Op::atomic: return !n->users.empty();
      default: return n->dtype != DType::none;
    }
  }

  // Barriers that a storage-buffer write may precede (in program order, or in an earlier
  // iteration of a loop around them): these also make the group's buffer writes visible.
  void find_buffer_barriers() {
    auto writes_buffer = [](const Node* n) {
      return (n->op == Op::store || n->op == Op::atomic) && n->operand(0)->op != Op::group_buffer;
    };
    std::function<bool(const Node*)> subtree_writes = [&](const Node* s) {
      for (const Node* c = s->first_child; c; c = c->next)
        if (writes_buffer(c) || subtree_writes(c)) return true;
      return false;
    };
    bool wrote = false;
    std::function<void(const Node*)> walk = [&](const Node* s) {
      for (const Node* c = s->first_child; c; c = c->next) {
        wrote |= writes_buffer(c);
        if (c->op == Op::barrier) {
          bool need = wrote;
          for (const Node* a = c->parent; a && a != k_ && !need; a = a->parent)
            need = a->op == Op::loop && subtree_writes(a);
          if (need) buffer_barriers_.insert(c);
        }
        walk(c);
      }
    };
    walk(k_);
  }

  void stmt(const Node* n, int loops) {
    cost_ += op_info(n->op).cost;
    work_[trip_sym_] += op_info(n->op).cost * trip_const_;
    if (opt_.source_comments && n->op != Op::constant && n->op != Op::index && n->loc.known() &&
        n->loc != last_loc_) {
      last_loc_ = n->loc;
      line(d_.comment + source_comment(n->loc));
    }
    switch (n->op) {
      case Op::constant: break;  // printed inline where used
      case Op::index:
        names_[n] = "c" + std::to_string(n->axis);
        axes_.insert(n->axis);
        break;
      case Op::neg: case Op::lnot: case Op::bnot: case Op::abs: case Op::sign: case Op::floor:
      case Op::ceil: case Op::round: case Op::trunc: case Op::frac: case Op::exp: case Op::exp2:
      case Op::log: case Op::log2: case Op::sqrt: case Op::rsqrt: case Op::sin: case Op::cos:
      case Op::tan: case Op::asin: case Op::acos: case Op::atan: case Op::sinh: case Op::cosh:
      case Op::tanh: case Op::isnan: case Op::isinf: case Op::cast: case Op::bitcast:
      case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::mod: case Op::pow:
      case Op::atan2: case Op::min: case Op::max: case Op::eq: case Op::ne: case Op::lt: case Op::le:
      case Op::gt: case Op::ge: case Op::land: case Op::lor: case Op::band: case Op::bor:
      case Op::bxor: case Op::shl: case Op::shr: case Op::select: case Op::fma:
        if (interior_ && n->op == Op::select) {
          std::string e = edge_select(n);
          if (!e.empty()) { names_[n] = e; break; }
        }
        value(n, elementwise(n));
        break;
      case Op::load: {
        auto [mem, idx] = address(n);
        if (auto st = staging_.loads.find(n); st != staging_.loads.end()) {
          const StagingGroup& g = staging_.groups[static_cast<size_t>(st->second.group)];
          std::string row = "s" + std::to_string(st->second.group);
          mem = row;
          idx = std::to_string(st->second.lane) + " * " + row + "s + (" + ref(g.loop) + "k - " +
                wide_ref(g.loop->operand(0)) + ")";
        }
        DType md = n->operand(0)->dtype;
        std::string e = fill(d_.load_value[value_class(md)], {{"0", fill(d_.load, {{"mem", mem}, {"idx", idx}})}});
        value(n, convert(e, md, n->dtype, true, n));
        break;
      }
      case Op::store: {
        auto [mem, idx] = address(n);
        std::string v = fill(d_.store_value[value_class(n->operand(1)->dtype)], {{"0", ref(n->operand(1))}});
        line(fill(d_.store, {{"mem", mem}, {"idx", idx}, {"val", v}}));
        break;
      }
      case Op::atomic: {
        auto [mem, idx] = address(n);
        if (d_.group_mem_private && !native_ && n->operand(0)->op == Op::group_buffer) {
          private_atomic(n, mem, idx);
          break;
        }
        if (const std::string& s = d_.atomic_stmt[n->kind][value_class(n->dtype)]; !s.empty()) {
          std::string name = "v" + std::to_string(next_value_++);
          const bool late = late_.count(n) > 0;
          if (!late) names_[n] = name;
          line(fill(s, {{"T", type(n->dtype)}, {"name", name}, {"mem", mem}, {"idx", idx}, {"val", ref(n->operand(1))}}));
          if (late) line(fill(d_.assign, {{"name", ref(n)}, {"e", name}}));
          break;
        }
        const std::string& t = need(d_.atomic[n->kind][value_class(n->dtype)], n, "atomic");
        std::string e = fill(t, {{"mem", mem}, {"idx", idx}, {"val", ref(n->operand(1))}});
        if (n->users.empty()) line(fill(d_.expr_stmt, {{"e", e}})); else value(n, e);
        break;
      }
      case Op::loop:
      {
        if (epilogue_ && n == gemm_.loop) break;  // its sums come from ember_gemm::run
        const double c = trip_const_;
        const std::string sym = trip_sym_;
        trips(n);
        loop(n, loops);
        trip_const_ = c;
        trip_sym_ = sym;
        break;
      }
      case Op::if_:
        line(fill(d_.if_open, {{"c", ref(n->operand(0))}}));
        ++depth_;
        block(n, loops);
        if (n->next && n->next->op == Op::else_) {
          --depth_;
          line(d_.else_open);
          ++depth_;
          block(n->next, loops);
        }
        --depth_;
        line(d_.block_close);
        break;
      case Op::else_:
        EMBER_INTERNAL_ASSERT(n->prev && n->prev->op == Op::if_, "else without if in kernel #" << k_->index);
        break;  // printed with its if
      case Op::break_: line(loops ? d_.break_stmt : d_.thread_exit); break;
      case Op::continue_: line(loops ? d_.continue_stmt : d_.thread_exit); break;
      case Op::var: {
        if (late_.count(n)) {
          line(fill(d_.assign, {{"name", ref(n)}, {"e", ref(n->operand(0))}}));
          break;
        }
        std::string name = "v" + std::to_string(next_value_++);
        std::string init = epilogue_ && n == gemm_.var ? "ember_srow[col - ember_j0]" : ref(n->operand(0));
        names_[n] = name;
        line(fill(d_.decl_var, {{"T", type(n->dtype)}, {"name", name}, {"e", init}}));
        break;
      }
      case Op::set:
        EMBER_INTERNAL_ASSERT(n->operand(0)->inside(k_), "kernel #" << k_->index << " sets var %" << n->operand(0)->id
                                                                     << " of the host (make it a buffer before codegen)");
        line(fill(d_.assign, {{"name", ref(n->operand(0))}, {"e", ref(n->operand(1))}}));
        break;
      case Op::group_buffer: {
        workgroups_supported(n);
        std::string name = "g" + std::to_string(next_group_++);
        names_[n] = name;
        if (native_ && !d_.group_shared_decl.empty()) {
          const std::string t = d_.mem_type[dtype_slot(n->dtype)], size = std::to_string(const_size(n->shape));
          group_decls_ += fill(d_.group_shared_decl, {{"T", t}, {"name", name}, {"n", size}}) + "\n";
          if (n->zero_init) {
            line(fill(d_.group_shared_zero,
                      {{"T", t}, {"name", name}, {"n", size}, {"group", std::to_string(group_threads())}}));
            zero_barrier_ = true;
          }
          break;
        }
        line(fill(need(d_.group_mem_decl, n, "group buffer"),
                  {{"T", d_.mem_type[dtype_slot(n->dtype)]}, {"name", name}, {"n", std::to_string(const_size(n->shape))},
                   {"init", n->zero_init ? d_.group_mem_zero : std::string()}}));
        break;
      }
      case Op::barrier:
        workgroups_supported(n);
        line(need(buffer_barriers_.count(n) && !d_.barrier_buffers.empty() ? d_.barrier_buffers : d_.barrier, n,
                  "barrier (run lower_group_barriers for this backend)"));
        break;
      case Op::local_index: case Op::group_index: {
        workgroups_supported(n);
        const std::string& t = n->op == Op::local_index ? d_.local_index : d_.group_index;
        const int letter = k_->rank() - 1 - n->axis;
        value(n, fill(need(t, n, "workgroup coordinate"),
                      {{"axis", std::to_string(n->axis)}, {"xyz", std::string(1, letter >= 0 && letter < 3 ? "xyz"[letter] : '?')}}));
        break;
      }
      case Op::program: case Op::input: case Op::scalar_arg: case Op::shape_arg: case Op::buffer:
      case Op::reduce: case Op::scan: case Op::kernel: case Op::output: case Op::move_memory: case Op::count_:
        EMBER_INTERNAL_ASSERT(false, op_name(n->op) << " cannot appear inside kernel #" << k_->index
                                                    << " at code generation (run the whole pipeline)");
    }
  }

  // An atomic on memory only this thread uses (Dialect::group_mem_private): a plain
  // read-modify-write combining as eval.cpp's atomic_step does; bitwise kinds of f32 act on the
  // words.
  void private_atomic(const Node* n, const std::string& mem, const std::string& idx) {
    const DType t = n->dtype;
    const int c = value_class(t);
    value(n, fill(d_.load_value[c], {{"0", fill(d_.load, {{"mem", mem}, {"idx", idx}})}}));
    const std::string old = ref(n), val = ref(n->operand(1));
    auto apply = [&](Op op) {
      if (t != DType::f32 || op == Op::add || op == Op::min || op == Op::max)
        return fill(need(d_.expr[static_cast<int>(op)][c], n, "expression"), {{"0", old}, {"1", val}});
      std::string w = fill(need(d_.expr[static_cast<int>(op)][value_class(DType::u32)], n, "expression"),
                           {{"0", convert(old, t, DType::u32, true, n)}, {"1", convert(val, t, DType::u32, true, n)}});
      return convert(w, DType::u32, t, true, n);
    };
    std::string next;
    switch (static_cast<AtomicKind>(n->kind)) {
      case AtomicKind::add: next = apply(Op::add); break;
      case AtomicKind::min: next = apply(Op::min); break;
      case AtomicKind::max: next = apply(Op::max); break;
      case AtomicKind::band: next = apply(Op::band); break;
      case AtomicKind::bor: next = apply(Op::bor); break;
      case AtomicKind::bxor: next = apply(Op::bxor); break;
      case AtomicKind::exchange: next = val; break;
    }
    line(fill(d_.store, {{"mem", mem}, {"idx", idx}, {"val", fill(d_.store_value[c], {{"0", next}})}}));
  }

  // Packed contractions (Dialect::packed_contractions): the text of a k-independent index
  // expression of the kernel, with i32 semantics as in the body, read where the coordinates
  // c<axis> are declared; false for anything but pure math, flat loads, coordinates, params
  // and constants.
  bool index_text(const Node* n, std::string* out, int depth) const {
    if (depth > 32) return false;
    if (n->op == Op::constant) { *out = literal(n->dtype, n->bits); return true; }
    if (!n->inside(k_)) {
      auto it = names_.find(n);
      if (it == names_.end()) return false;
      *out = it->second;
      return true;
    }
    if (n->op == Op::index) { *out = "c" + std::to_string(n->axis); return true; }
    if (n->op == Op::load) {
      if (!n->flat || !n->operand(0)->is_memory()) return false;
      std::string idx;
      if (!index_text(n->operand(1), &idx, depth + 1)) return false;
      const DType md = n->operand(0)->dtype;
      std::string e = fill(d_.load_value[value_class(md)], {{"0", fill(d_.load, {{"mem", ref(n->operand(0))}, {"idx", idx}})}});
      *out = convert(e, md, n->dtype, true, n);
      return true;
    }
    if (!has_flag(n->op, F_ELEMENTWISE) || n->num_operands() > 3) return false;
    std::string a[3];
    for (int i = 0; i < n->num_operands(); ++i)
      if (!index_text(n->operand(i), &a[i], depth + 1)) return false;
    if (n->op == Op::cast || n->op == Op::bitcast) {
      *out = convert(a[0], n->operand(0)->dtype, n->dtype, n->op == Op::bitcast, n);
      return true;
    }
    const Node* typed = n->op == Op::select ? n->operand(1) : n->operand(0);
    const std::string& t = d_.expr[static_cast<int>(n->op)][value_class(typed->dtype)];
    if (t.empty()) return false;
    *out = fill(t, {{"0", a[0]}, {"1", a[1]}, {"2", a[2]}});
    return true;
  }

  bool reads_loop(const Node* e, int depth) const {
    if (e == gemm_.loop || depth > 32) return true;
    if (e->op == Op::var || e->is_memory()) return false;
    for (const Node* o : e->operands)
      if (reads_loop(o, depth + 1)) return true;
    return false;
  }

  // Splits flat index e into base + k * step (index_type texts; core/analysis/contraction.h).
  bool split_index(const Node* e, std::string* base, std::string* step, int depth) const {
    if (e == gemm_.loop) { *base = "0"; *step = "1"; return true; }
    if (depth > 32) return false;
    if (!reads_loop(e, 0)) {
      std::string t;
      if (!index_text(e, &t, 0)) return false;
      *base = fill(d_.index_from_i32, {{"0", "(" + t + ")"}});
      *step = "0";
      return true;
    }
    if (e->op == Op::add || e->op == Op::sub) {
      std::string b0, s0, b1, s1;
      if (!split_index(e->operand(0), &b0, &s0, depth + 1) || !split_index(e->operand(1), &b1, &s1, depth + 1)) return false;
      const char* op = e->op == Op::add ? " + " : " - ";
      *base = "(" + b0 + op + b1 + ")";
      *step = "(" + s0 + op + s1 + ")";
      return true;
    }
    if (e->op == Op::mul) {
      const int u = reads_loop(e->operand(0), 0) ? 0 : 1;
      if (reads_loop(e->operand(1 - u), 0)) return false;
      std::string b, st, f;
      if (!split_index(e->operand(u), &b, &st, depth + 1) || !index_text(e->operand(1 - u), &f, 0)) return false;
      f = fill(d_.index_from_i32, {{"0", "(" + f + ")"}});
      *base = "(" + b + " * " + f + ")";
      *step = "(" + st + " * " + f + ")";
      return true;
    }
    return false;
  }

  // The texts ember_gemm::run needs: where A's rows and B's columns start and their steps along
  // k, and the loop's end. False (print the kernel as any other) when one cannot be written.
  bool gemm_addresses() {
    auto flat = [](const Node* l) { return l->flat && l->num_operands() == 2; };
    if (!flat(gemm_.a) || !flat(gemm_.b)) return false;
    if (!split_index(gemm_.a->operand(1), &gemm_a_base_, &gemm_a_step_, 0) ||
        !split_index(gemm_.b->operand(1), &gemm_b_base_, &gemm_b_step_, 0))
      return false;
    std::string end;
    if (!index_text(gemm_.loop->operand(1), &end, 0)) return false;
    gemm_end_ = fill(d_.index_from_i32, {{"0", end}});
    return true;
  }

  // The packed form of a contraction kernel, before its rows form (which runs calls of part of
  // the threads): every thread's sum by ember_gemm::run, the epilogue on each block of sums.
  // `coords` declare the leading coordinates from `row`, `last` the last one from `col`.
  void gemm_frame(const std::vector<std::string>& coords, const std::string& last) {
    const int r = k_->rank();
    int64_t v;
    std::string batches;
    for (int a = 0; a + 2 < r; ++a) batches += (batches.empty() ? "" : " * ") + dim(a, &v);
    auto decl = [&](const std::string& name, const std::string& e) {
      line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", name}, {"e", e}}));
    };
    const std::string i32 = type(DType::i32), c_last = "c" + std::to_string(r - 1);
    line("{");
    depth_ = 2;
    decl("ember_M", dim(r - 2, &v));
    decl("ember_B", batches.empty() ? "1" : batches);
    decl("ember_K", gemm_end_);
    line("if (begin == 0 && end == ember_B * ember_M * len) {");
    depth_ = 3;
    auto line_fn = [&](const char* name, const char* row, const std::string& c, const std::string& base,
                       const std::string& step) {
      line(std::string("auto ") + name + " = [&](int64_t ember_bt, int64_t ember_x, int64_t* ember_step) -> int64_t {");
      ++depth_;
      line(std::string("const int64_t row = ") + row + ";");
      for (const std::string& s : coords) line(s);
      line("const " + i32 + " " + c_last + " = " + c + "; (void)" + c_last + ";");
      line("*ember_step = " + step + ";");
      line("return " + base + ";");
      --depth_;
      line("};");
    };
    line_fn("ember_a", "ember_bt * ember_M + ember_x", "0", gemm_a_base_, gemm_a_step_);
    line_fn("ember_b", "ember_bt * ember_M", "(" + i32 + ")ember_x", gemm_b_base_, gemm_b_step_);
    line("auto ember_epilogue = [&](const float* ember_sums, int64_t ember_ld, int64_t ember_bt, int64_t ember_i0, "
         "int64_t ember_i1, int64_t ember_j0, int64_t ember_j1) {");
    ++depth_;
    // The memories, params and sizes again as locals of the epilogue, shadowing the captured
    // ones: a store through a memory (-fno-strict-aliasing) would otherwise reload every
    // captured pointer and value after it, and the columns loop would not vectorize.
    std::vector<std::string> names{"ember_M"};
    for (size_t i = 0; i < k_->memories().size(); ++i) names.push_back("m" + std::to_string(i));
    for (size_t i = 0; i < k_->params().size(); ++i) names.push_back("p" + std::to_string(i));
    for (const std::string& n : names) line("const auto ember_l_" + n + " = " + n + ";");
    line("{");
    ++depth_;
    for (const std::string& n : names) line("const auto " + n + " = ember_l_" + n + "; (void)" + n + ";");
    line("for (int64_t ember_i = ember_i0; ember_i < ember_i1; ++ember_i) {");
    ++depth_;
    line("const int64_t row = ember_bt * ember_M + ember_i;");
    for (const std::string& s : coords) line(s);
    line("const float* const ember_srow = ember_sums + (ember_i - ember_i0) * ember_ld;");
    line("#pragma GCC ivdep");
    line("for (int64_t col = ember_j0; col < ember_j1; ++col) {");
    ++depth_;
    line("const int64_t tid = row * len + col; (void)tid;");
    if (!last.empty()) line(last);
    const int d = depth_;
    for (size_t i = 0; i < epilogue_text_.size();) {  // printed at depth 2
      size_t e = epilogue_text_.find('\n', i);
      if (e == std::string::npos) e = epilogue_text_.size();
      line(std::string(epilogue_text_, i, e - i));
      i = e + 1;
    }
    depth_ = d - 1;
    line("}");
    --depth_;
    line("}");
    --depth_;
    line("}");
    --depth_;
    line("};");
    line("ember_gemm::run(ember_B, ember_M, len, ember_K, " + ref(gemm_.a->operand(0)) + ", " + ref(gemm_.b->operand(0)) +
         ", ember_a, ember_b, ember_epilogue, ember_B * ember_M * len * ember_K >= " + std::to_string(kParallelMacs) + ");");
    line("return;");
    depth_ = 2;
    line("}");
    depth_ = 1;
    line("}");
  }

  // A dialect without group memory cannot print workgroup kernels at all: a user-facing error.
  void workgroups_supported(const Node* n) const {
    if (d_.group_mem_decl.empty())
      EMBER_USER_ERROR(BackendError, n->loc, "kernels with workgroups (em.kernel(..., group=)) are not supported by "
                                             "the " << d_.name << " kernel language yet");
  }

  // The text of one dimension of the kernel shape as an index_type expression, or its value.
  std::string dim(int a, int64_t* value) const {
    const Node* d = k_->shape[static_cast<size_t>(a)];
    *value = const_dim(d);
    if (*value >= 0) return std::to_string(*value);
    return fill(d_.index_from_i32, {{"0", ref(d)}});
  }

  // Appends a body printed at depth 2 at depth 3.
  void indented(const std::string& body) {
    for (size_t i = 0; i < body.size();) {
      size_t e = body.find('\n', i);
      if (e == std::string::npos) e = body.size();
      if (body[i] != '#') out_ += "  ";
      out_.append(body, i, e - i + 1);
      i = e + 1;
    }
  }

  // One column loop over [lo, hi) running `body`.
  void columns(const std::string& lo, const std::string& hi, const std::string& last, const std::string& body) {
    line(fill(d_.cols_open, {{"tid", "tid"}, {"len", "len"}, {"lo", lo}, {"hi", hi}}));
    depth_ = 3;
    if (!last.empty()) line(last);
    indented(body);
    depth_ = 2;
    line(d_.block_close);
  }

  int64_t group_threads() const {
    int64_t t = 1;
    for (int g : k_->group) t *= g;
    return t;
  }

  // Native workgroups: ember_g / ember_l / ember_in (Dialect::group_threads_open), then the
  // group's and the thread's coordinates per axis as the interpreter numbers them (row-major),
  // the kernel coordinates c<axis> = group * G + local, and ember_in limited to the shape.
  void group_framing() {
    line(fill(d_.group_threads_open, {{"group", std::to_string(group_threads())}}));
    const int rank = k_->rank();
    std::vector<std::string> shape(static_cast<size_t>(rank)), groups(static_cast<size_t>(rank));
    for (int a = 0; a < rank; ++a) {
      int64_t v;
      shape[static_cast<size_t>(a)] = dim(a, &v);
      const int64_t g = k_->group[static_cast<size_t>(a)];
      groups[static_cast<size_t>(a)] = v >= 0 ? std::to_string((v + g - 1) / g)
                                              : "((" + shape[static_cast<size_t>(a)] + " + " + std::to_string(g - 1) +
                                                    ") / " + std::to_string(g) + ")";
    }
    const std::string& i32 = type(DType::i32);
    for (int a = 0; a < rank; ++a) {
      const size_t ua = static_cast<size_t>(a);
      std::string gs, q = "ember_g";
      int64_t ls = 1;
      for (int j = a + 1; j < rank; ++j) {
        gs += (gs.empty() ? "" : " * ") + groups[static_cast<size_t>(j)];
        ls *= k_->group[static_cast<size_t>(j)];
      }
      if (!gs.empty()) q = "(" + q + " / (" + gs + "))";
      if (a > 0) q = "(" + q + " % " + groups[ua] + ")";
      std::string l = "ember_l";
      if (ls != 1) l = "(" + l + " / " + std::to_string(ls) + ")";
      if (a > 0) l = "(" + l + " % " + std::to_string(k_->group[ua]) + ")";
      const std::string s = std::to_string(a);
      line(fill(d_.decl_const, {{"T", i32}, {"name", "ember_g" + s}, {"e", q}}));
      line(fill(d_.decl_const, {{"T", i32}, {"name", "ember_l" + s}, {"e", l}}));
      line(fill(d_.decl_const, {{"T", i32}, {"name", "c" + s},
                                {"e", "ember_g" + s + " * " + std::to_string(k_->group[ua]) + " + ember_l" + s}}));
      line(fill(d_.assign, {{"name", "ember_in"}, {"e", "ember_in && c" + s + " < " + shape[ua]}}));
    }
  }

  // The kernel's shape as the kernel sees it: constants, and params by slot (never names or ids
  // of the program around it).
  std::string shape_text() const {
    std::string out = "[";
    for (int a = 0; a < k_->rank(); ++a) {
      int64_t v;
      const std::string d = dim(a, &v);
      out += (a ? ", " : "") + (v >= 0 ? d : ref(k_->shape[static_cast<size_t>(a)]));
    }
    return out + "]";
  }

  std::string assemble(const std::string& symbol, const std::string& body, const std::string& interior) {
    std::string saved = std::move(out_);
    out_.clear();
    int saved_depth = depth_;
    depth_ = 0;
    line(d_.comment + "kernel " + shape_text() + ", " + std::to_string(k_->memories().size()) + " memories, " +
         std::to_string(k_->params().size()) + " params");
    const std::string coherent = buffer_barriers_.empty() ? "" : d_.coherent;
    for (size_t i = 0; i < k_->memories().size(); ++i)
      if (!d_.global_mem_decl.empty())
        line(fill(d_.global_mem_decl, {{"i", std::to_string(i)}, {"T", d_.mem_type[dtype_slot(k_->memories()[i]->dtype)]},
                                       {"coherent", coherent}}));
    if (!d_.params_open.empty()) {
      std::string nmem = std::to_string(k_->memories().size());
      line(fill(d_.params_open, {{"nmem", nmem}}));
      for (size_t i = 0; i < k_->params().size(); ++i) line(fill(d_.param_decl, {{"i", std::to_string(i)}, {"nmem", nmem}}));
      line(fill(d_.params_close, {{"nmem", nmem}}));
    }
    if (!d_.group_shared_in_kernel) out_ += group_decls_;
    line(fill(d_.kernel_open,
              {{"name", symbol}, {"group", std::to_string(native_ ? group_threads() : int64_t{d_.group_size})},
               {"nmem", std::to_string(k_->memories().size())}, {"nparams", std::to_string(k_->params().size())}}));
    depth_ = 1;
    if (d_.group_shared_in_kernel) line(group_decls_);
    for (size_t i = 0; i < k_->memories().size(); ++i)
      line(fill(d_.local_mem_decl, {{"i", std::to_string(i)}, {"T", d_.mem_type[dtype_slot(k_->memories()[i]->dtype)]}}));
    for (size_t i = 0; i < k_->params().size(); ++i) {
      DType t = k_->params()[i]->dtype;
      std::string word = fill(d_.param_word, {{"i", std::to_string(i)}});
      line(fill(d_.decl_const, {{"T", type(t)}, {"name", "p" + std::to_string(i)},
                                {"e", convert(word, DType::u32, t, true, k_->params()[i])}}));
    }
    for (size_t g = 0; g < staging_.groups.size(); ++g) {
      const StagingGroup& sg = staging_.groups[g];
      std::string row = "s" + std::to_string(g);
      std::string begin = wide_ref(sg.loop->operand(0)), end = wide_ref(sg.loop->operand(1));
      line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", row + "n"},
                                {"e", end + " > " + begin + " ? " + end + " - " + begin + " : 0"}}));
      // Rows a few cache lines more than a power of two apart, so that the loop's s loads
      // do not all map to the same cache set.
      line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", row + "s"}, {"e", row + "n + 16"}}));
      line(fill(d_.stage_fill, {{"name", row}, {"T", d_.mem_type[dtype_slot(sg.memory->dtype)]},
                                {"lanes", std::to_string(sg.stride)}, {"n", row + "n"}, {"stride", row + "s"},
                                {"mem", ref(sg.memory)}, {"begin", begin}}));
    }
    // Closes the kernel and gives back the text printed since `saved`.
    auto finish = [&] {
      depth_ = 0;
      line(d_.kernel_close);
      std::string text = std::move(out_);
      out_ = std::move(saved);
      depth_ = saved_depth;
      return text;
    };
    if (native_) {
      group_framing();
      out_ += body;
      return finish();
    }
    // Kernels of rank >= 2 may run as rows x columns (Dialect::rows_open): coordinates of the
    // leading axes come from the row, the last one is the column (no division per thread).
    const bool rows = rows_;
    const int last = k_->rank() - 1;
    const char* flat = rows ? "row" : "tid";
    if (rows) {
      int64_t v;
      std::string len = dim(last, &v);
      line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", "len"}, {"e", len}}));
    }
    // Row-major strides of the used axes: stride(a) = product of the dims after a.
    std::vector<std::string> coords;
    std::string last_coord;
    for (int a : axes_) {
      EMBER_INTERNAL_ASSERT(a >= 0 && a < k_->rank(), "index axis " << a << " outside kernel #" << k_->index);
      if (rows && a == last) {
        last_coord = fill(d_.decl_const, {{"T", type(DType::i32)}, {"name", "c" + std::to_string(a)},
                                          {"e", fill(d_.i32_from_index, {{"0", "col"}})}});
        continue;
      }
      int64_t known = 1;
      std::string symbolic;
      for (int j = a + 1; j < (rows ? last : k_->rank()); ++j) {
        int64_t v;
        std::string e = dim(j, &v);
        if (v >= 0) known *= v; else symbolic += (symbolic.empty() ? "" : " * ") + e;
      }
      std::string q = flat;
      if (!symbolic.empty()) {
        std::string s = "s" + std::to_string(a);
        if (known != 1) symbolic += " * " + std::to_string(known);
        line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", s}, {"e", symbolic}}));
        q = "(" + q + " / " + s + ")";
      } else if (known != 1) {
        q = "(" + q + " / " + std::to_string(known) + ")";
      }
      if (a > 0) {
        int64_t v;
        q = "(" + q + " % " + dim(a, &v) + ")";
      }
      coords.push_back(fill(d_.decl_const, {{"T", type(DType::i32)}, {"name", "c" + std::to_string(a)},
                                            {"e", fill(d_.i32_from_index, {{"0", q}})}}));
    }
    const std::string parallel = parallel_condition("end - begin", work_);
    if (gemm_found_) gemm_frame(coords, last_coord);
    if (rows) {
      line(fill(d_.rows_open, {{"tid", "tid"}, {"len", "len"}, {"parallel", parallel}}));
      depth_ = 2;
      for (const std::string& c : coords) line(c);
      auto decl = [&](const char* name, const std::string& e) {
        line(fill(d_.decl_const, {{"T", d_.index_type}, {"name", name}, {"e", e}}));
      };
      decl("col_begin", "begin > row * len ? begin - row * len : 0");
      decl("col_end", "end - row * len < len ? end - row * len : len");
      if (interior.empty()) {
        columns("col_begin", "col_end", last_coord, body);
      } else {  // [begin, 1) and [len - 1, end) wrap; [1, len - 1) does not
        decl("in_lo", "col_begin > 1 ? col_begin : 1");
        decl("in_hi", "col_end < len - 1 ? col_end : len - 1");
        decl("edge_lo", "len - 1 > in_lo ? len - 1 : in_lo");
        columns("col_begin", "(col_end < in_lo ? col_end : in_lo)", last_coord, body);
        columns("in_lo", "in_hi", last_coord, interior);
        columns("edge_lo", "col_end", last_coord, body);
      }
      depth_ = 1;
      line(d_.block_close);
    } else {
      line(fill(d_.threads_open, {{"tid", "tid"}, {"parallel", parallel}}));
      depth_ = 2;
      for (const std::string& c : coords) line(c);
      out_ += body;
      depth_ = 1;
      line(fill(d_.threads_close, {{"tid", "tid"}}));
    }
    return finish();
  }

  const Node* k_;
  const Dialect& d_;
  PrintOptions opt_;
  SourceLoc last_loc_;  // of the last source comment printed
  KernelBody body_;  // the kernel's own order of commuting operands
  std::unordered_map<const Node*, std::string> names_;
  std::unordered_set<const Node*> wide_;  // address arithmetic printed in index_type
  bool rows_ = false;      // rows x columns thread loops (Dialect::rows_open)
  // Native workgroups (Dialect::group_threads_open): the scopes holding barriers, the barriers
  // that also order storage-buffer writes, values declared before a guard and assigned in it,
  // group buffer declarations (before kernel_open), a barrier owed after zeroing group buffers.
  bool native_ = false;
  std::unordered_set<const Node*> sync_, buffer_barriers_, late_;
  GroupUniformity uniformity_;
  std::string group_decls_;
  bool zero_barrier_ = false;
  bool interior_ = false;  // printing the row-interior copy of the body
  // A contraction printed packed (Dialect::packed_contractions): its parts, the address texts
  // (gemm_addresses), whether the epilogue copy of the body is being printed, and its text.
  Contraction gemm_;
  bool gemm_found_ = false, epilogue_ = false;
  std::string gemm_a_base_, gemm_a_step_, gemm_b_base_, gemm_b_step_, gemm_end_, epilogue_text_;
  Staging staging_;                       // loads read from a per-launch SoA copy
  std::set<int> axes_;
  int next_value_ = 0;
  int next_group_ = 0;
  int depth_ = 0;
  int cost_ = 0;
  // Estimated per-thread work (parallel_condition): op_info cost units by the product text of
  // the run-time trip counts that multiply them ("": none), and the current loop nest's factors.
  std::map<std::string, double> work_;
  double trip_const_ = 1;
  std::string trip_sym_;
  int in_reduction_loop_ = 0;
  std::string out_;
};

}  // namespace

std::vector<const Node*> program_kernels(const Program& p) {
  std::vector<const Node*> out;
  p.for_each([&](Node* n) {
    if (n->op == Op::kernel) out.push_back(n);
  });
  return out;
}

GeneratedKernel generate_kernel(const Node* kernel, const Dialect& d, const PrintOptions& opt) {
  return KernelPrinter(kernel, d, opt).run();
}

std::vector<GeneratedKernel> generate_kernel_list(const Program& p, const Dialect& d) {
  std::vector<GeneratedKernel> out;
  for (const Node* k : program_kernels(p)) out.push_back(generate_kernel(k, d));
  return out;
}

std::vector<DistinctKernel> generate_distinct_kernels(const KernelClasses& classes, const Dialect& d) {
  std::vector<DistinctKernel> out;
  out.reserve(classes.size());
  for (size_t c = 0; c < classes.size(); ++c)
    out.push_back({generate_kernel(classes.representative(c), d), classes.members[c]});
  return out;
}

std::string kernel_ids_comment(const std::vector<const Node*>& kernels, const Dialect& d, const char* unit) {
  std::string ids;
  for (const Node* k : kernels) ids += (ids.empty() ? "#" : ", #") + std::to_string(k->index);
  if (kernels.size() > 1) ids += " (" + std::to_string(kernels.size()) + " kernels, one " + unit + ")";
  return d.comment + "kernel " + ids + "\n";
}

std::string annotate_shader(const std::string& shader, const std::vector<const Node*>& kernels, const Dialect& d) {
  const size_t eol = shader.find('\n');
  const size_t at = eol == std::string::npos ? shader.size() : eol + 1;
  std::string out = shader.substr(0, at);
  if (eol == std::string::npos) out += '\n';
  return out + kernel_ids_comment(kernels, d, "shader") + shader.substr(at);
}

std::string generated_header(const Dialect& d, const std::string& what, const std::string& where) {
  return d.comment + "Generated by Ember (" + d.name + " dialect" + where + ")" + what + "\n";
}

std::string unit_prelude(const Dialect& d, const std::vector<const std::string*>& sources) {
  auto called = [&](const std::string& name) {
    for (const std::string* s : sources)
      if (s->find(name) != std::string::npos) return true;
    return false;
  };
  std::string out = d.prelude;
  if (!d.contraction_prelude.empty() && called("ember_gemm::")) out += d.contraction_prelude;
  // Gated pieces the kernels call, and those the pieces taken call (in their order).
  std::vector<bool> take(d.gated_prelude.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < take.size(); ++i)
      for (size_t j = 0; !take[i] && j < d.gated_prelude[i].callers.size(); ++j) {
        const std::string& c = d.gated_prelude[i].callers[j];
        bool hit = called(c);
        for (size_t k = 0; !hit && k < take.size(); ++k) hit = take[k] && d.gated_prelude[k].text.find(c) != std::string::npos;
        if (hit) take[i] = grew = true;
      }
  }
  for (size_t i = 0; i < take.size(); ++i)
    if (take[i]) out += d.gated_prelude[i].text;
  return out;
}

std::string join_kernels(const std::vector<const GeneratedKernel*>& kernels, const Dialect& d) {
  std::vector<const std::string*> sources;
  for (const GeneratedKernel* k : kernels) sources.push_back(&k->source);
  std::string out = generated_header(d, ", " + std::to_string(kernels.size()) + " kernel(s).") + unit_prelude(d, sources);
  for (const GeneratedKernel* k : kernels) out += "\n" + k->source;
  return out;
}

std::string generate_kernels(const Program& p, const Dialect& d) {
  const KernelClasses classes = group_kernels(p);
  const std::vector<DistinctKernel> distinct = generate_distinct_kernels(classes, d);
  std::vector<const std::string*> sources;
  for (const DistinctKernel& k : distinct) sources.push_back(&k.code.source);
  std::string out = generated_header(d, ", " + std::to_string(classes.kernels.size()) + " kernel(s), " +
                                            std::to_string(classes.size()) + " distinct.") +
                    unit_prelude(d, sources);
  for (const DistinctKernel& k : distinct) out += "\n" + kernel_ids_comment(k.kernels, d, "function") + k.code.source;
  return out;
}

}  // namespace ember
