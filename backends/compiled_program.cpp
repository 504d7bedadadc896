// CompiledProgram: a traced program taken through the pipeline and compiled for one backend;
// calls run its host plan (backends/plan_executor.h), or interpret the host level where the plan
// cannot express it, dispatching kernels through the backend. The
// lowered program is kept in the program cache (disk entries `<key>.prog`), so a later process
// compiling the same program skips the pipeline.
#include <dlfcn.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/compile_cache.h"
#include "backends/plan_executor.h"
#include "codegen/c_printer.h"
#include "core/analysis/explain.h"
#include "core/ir/printer.h"
#include "core/ir/shape.h"
#include "core/ir/serialize.h"
#include "core/ir/verifier.h"
#include "ember/ember.h"

namespace ember {

namespace {

constexpr const char* kProgramExt = "prog";
constexpr const char* kLinkExt = "link";

bool debug_has(const char* what) {
  const char* d = std::getenv("EMBER_DEBUG");
  return d && std::strstr(d, what);
}

// program_cache_enabled() with the pipeline's verify option already read.
bool program_cache_enabled(bool verify) {
  if (verify) return false;
  if (const char* e = std::getenv("EMBER_PROGRAM_CACHE");
      e && (std::strcmp(e, "0") == 0 || strcasecmp(e, "off") == 0 || strcasecmp(e, "false") == 0))
    return false;
  const char* d = std::getenv("EMBER_DEBUG");
  return !(d && (std::strstr(d, "ir") || std::strstr(d, "time")));
}

}  // namespace

bool program_cache_enabled() {
  const char* v = std::getenv("EMBER_VERIFY");
  return program_cache_enabled(v && *v && *v != '0');
}

const std::string& build_id() {
  static const std::string id = [] {
    std::string s = EMBER_VERSION;
    struct stat st {};
    Dl_info info{};
    const bool found = dladdr(reinterpret_cast<void*>(&run_pipeline), &info) && info.dli_fname &&
                       ::stat(info.dli_fname, &st) == 0;
    if (found || ::stat("/proc/self/exe", &st) == 0)
      s += " " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    return s;
  }();
  return id;
}

namespace {

// The part of the program cache key the traced program gives: its text and the attributes the
// text leaves out, such as source lines, and the user's schedule. The trace cache (python/ember/_trace_cache.py) keeps it
// per Python function, so a new process can find the lowered program without tracing.
std::string traced_digest(const Program& traced, const std::string& traced_text) {
  std::string keyed = traced_text;
  keyed += '\0';
  keyed += unprinted_attributes(traced);
  if (!traced.schedule.empty()) keyed += std::string(1, '\0') + "schedule\n" + traced.schedule;
  return content_hash(keyed);
}

// Everything the lowered program depends on: the traced program (its digest), the backend and the
// pipeline options it sets, this build, and the formats. No environment variable changes what the
// passes produce but through those options (EMBER_CPU_FLAGS can turn contract_fma off; EMBER_DEBUG
// only prints; EMBER_TAPE_BUDGET_MB acts at trace time, so the traced text shows it).
std::string program_cache_key(const std::string& digest, const std::string& backend, const PipelineOptions& opt) {
  std::string keyed = digest;
  keyed += '\0' + backend + '\0';
  keyed += opt.lower_groups ? "lower_groups " : "";
  keyed += opt.tile_threads ? "tile_threads " : "";
  keyed += opt.contract_fma ? "contract_fma " : "";
  keyed += opt.split_reductions ? "split_reductions " + std::to_string(opt.split_reductions) : "";
  keyed += '\0' + std::string(EMBER_VERSION) + '\0' + std::to_string(kProgramFormatVersion) + '\0' +
           program_schema_id() + '\0' + build_id();
  return "prog-" + content_hash(keyed);
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The cached lowered program, or null: none saved, or a bad entry (removed with a warning, so
// the caller lowers the program again and saves a good one). The entry's checksum and the
// loader's own checks (references, ranges) always run; the IR verifier only with
// EMBER_DEBUG=verify (the program was verified-clean when it was saved, and the verifier was
// most of the load time of a large program).
std::unique_ptr<Program> load_program(const std::string& key) {
  std::string bytes;
  if (!disk_entry_read(key, kProgramExt, bytes)) return nullptr;
  try {
    return deserialize_program(bytes, VerifyOptions{true}, true, debug_has("verify"));
  } catch (const Error& e) {
    disk_entry_corrupt(key, kProgramExt, first_line(e.what()));
    return nullptr;
  }
}

// The link record's entry (backend.h, CompileInfo::link) is its own key beside the program's.
std::string link_key(const std::string& program_key) { return "link-" + content_hash(program_key); }

// The backend's link record saved with the program, or empty.
std::string load_link(const std::string& program_key) {
  std::string bytes;
  if (program_key.empty() || !disk_entry_read(link_key(program_key), kLinkExt, bytes)) return {};
  return bytes;
}

void save_link(const std::string& program_key, const std::string& link) {
  if (program_key.empty() || link.empty()) return;
  const std::string key = link_key(program_key);
  try {
    const std::string tmp = cache_temp_path(key, ".link");
    write_file_atomic(tmp, link);
    disk_entry_commit(key, kLinkExt, tmp);
  } catch (const BackendError& e) {
    cache_unwritable(e.what());
  }
}

void save_program(const std::string& key, const Program& p) {
  std::string bytes;
  try {
    bytes = serialize_program(p);
  } catch (const Error& e) {
    std::fprintf(stderr, "ember: warning: the program cache cannot save %s: %s\n", p.name.c_str(), e.what());
    return;
  }
  try {
    const std::string tmp = cache_temp_path(key, ".prog");
    write_file_atomic(tmp, bytes);
    disk_entry_commit(key, kProgramExt, tmp);
  } catch (const BackendError& e) {
    cache_unwritable(e.what());
  }
}

}  // namespace

void CompiledProgram::init_backend(const std::string& backend, const CodegenOptions& codegen) {
  backend_name_ = resolve_backend(backend);
  backend_ = make_backend(backend_name_);
  codegen_ = codegen;
  const char* f = std::getenv("EMBER_FAST_MATH");
  if (f && *f && *f != '0') codegen_.fast_math = true;
  options_ = pipeline_options(backend_->target());
  const char* v = std::getenv("EMBER_VERIFY");
  options_.verify = v && *v && *v != '0';
  // EMBER_SPLIT_REDUCTIONS=<trips>: the loops it splits from (the fuzzer: 1, every loop it can);
  // 0: none (one thread per output, as before the pass; tests that count kernels).
  const char* s = std::getenv("EMBER_SPLIT_REDUCTIONS");
  if (s && *s && options_.split_reductions) options_.split_reductions = std::max<int64_t>(0, std::atoll(s));
}

CompiledProgram::CompiledProgram(std::unique_ptr<Program> traced, const std::string& backend,
                                 const std::string& traced_text, bool keep_trace, const CodegenOptions& codegen) {
  init_backend(backend, codegen);
  const PipelineOptions& opt = options_;
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_ms();
  std::string key;
  if (program_cache_enabled(opt.verify)) {
    stats_.traced_digest = traced_digest(*traced, traced_text.empty() ? print_program(*traced) : traced_text);
    key = program_cache_key(stats_.traced_digest, backend_name_, opt);
    prog_ = load_program(key);
  }
  stats_.program_cache_key = key;
  if (prog_) {
    stats_.program_cache_hit = true;
    traced_ = std::move(traced);  // never lowered: ir(stage) lowers a copy of it
  } else {
    if (keep_trace) traced_ = clone_program(*traced);
    prog_ = std::move(traced);
    stats_.passes = run_pipeline(*prog_, opt);
    if (opt.verify) {  // every lowered program the tests verify must survive the program cache's format
      std::unique_ptr<Program> back = deserialize_program(serialize_program(*prog_), VerifyOptions{true});
      EMBER_INTERNAL_ASSERT(print_program(*back) == print_program(*prog_),
                            "serialize_program changed the lowered program " << prog_->name);
    }
  }
  stats_.passes_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats_.passes_cpu_ms = thread_cpu_ms() - c0;
  compile_kernels(stats_.program_cache_hit ? load_link(key) : std::string());
  // Saved once the kernels compiled too: a program that fails anywhere is never cached.
  if (!key.empty() && !stats_.program_cache_hit) save_program(key, *prog_);
}

std::unique_ptr<CompiledProgram> CompiledProgram::from_program_cache(const std::string& digest,
                                                                     const std::string& backend,
                                                                     const CodegenOptions& codegen) {
  std::unique_ptr<CompiledProgram> cp(new CompiledProgram());
  cp->init_backend(backend, codegen);
  if (digest.empty() || !program_cache_enabled(cp->options_.verify)) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_ms();
  const std::string key = program_cache_key(digest, cp->backend_name_, cp->options_);
  cp->prog_ = load_program(key);
  if (!cp->prog_) return nullptr;
  cp->stats_.program_cache_hit = true;
  cp->stats_.program_cache_key = key;
  cp->stats_.traced_digest = digest;
  cp->stats_.passes_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cp->stats_.passes_cpu_ms = thread_cpu_ms() - c0;
  cp->compile_kernels(load_link(key));
  return cp;
}

void CompiledProgram::compile_kernels(const std::string& link) {
  prog_->for_each([&](Node* n) {
    stats_.kernels += n->op == Op::kernel;
    if (n->op != Op::buffer) return;
    ++stats_.buffers;
    stats_.buffer_shapes.push_back(shape_str(n->shape));
  });
  CompileInfo info;
  info.codegen = codegen_;
  info.link = link;
  runner_ = backend_->compile(*prog_, info);
  // A new or changed link record is saved with the program (a program cache hit whose record was
  // missing or stale gets a good one for the next process).
  if (!stats_.program_cache_key.empty() && !info.linked) save_link(stats_.program_cache_key, info.link);
  stats_.linked = info.linked;
  stats_.codegen_ms = info.codegen_ms;
  stats_.compile_ms = info.compile_ms;
  stats_.cache_hit = info.cache_hit;
  stats_.distinct_kernels = info.distinct_kernels;
  stats_.compiled_kernels = info.compiled_kernels;
  stats_.translation_units = info.translation_units;
  stats_.cache_key = info.cache_key;
  prepare_host();
}

namespace {


bool host_plan_enabled() {
  const char* e = std::getenv("EMBER_HOST_PLAN");
  return !(e && (std::strcmp(e, "0") == 0 || strcasecmp(e, "off") == 0 || strcasecmp(e, "false") == 0));
}

}  // namespace

CompiledProgram::~CompiledProgram() = default;

void CompiledProgram::prepare_host() {
  const auto t0 = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point t0;
    double& ms;
    ~Timer() { ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
  } timer{t0, stats_.host_plan_ms};
  plan_.reset();
  stats_.host = "interpreter";
  if (!host_plan_enabled()) {
    stats_.host_reason = "EMBER_HOST_PLAN=0";
    return;
  }
  bool tape = false;
  prog_->for_each([&](Node* n) { tape |= n->op == Op::buffer && n->name == "tape"; });
  if (tape) {
    stats_.host_reason = "an autodiff tape (the interpreter counts its bytes for stats.tape_bytes)";
    return;
  }
  if (!runner_) {
    stats_.host_reason = "the backend gave no kernel runner";
    return;
  }
  try {
    plan_ = std::make_unique<PlanExecutor>(*prog_, build_runtime_plan(*prog_, kernel_api(backend_->target())));
    stats_.host = "plan";
    stats_.host_reason.clear();
  } catch (const CompileError& e) {
    stats_.host_reason = first_line(e.what());
  }
}

std::vector<HostTensor> CompiledProgram::run(const std::vector<ArgValue>& args) {
  if (plan_) {
    stats_.tape_bytes = 0;  // programs with a tape are interpreted
    return plan_->run(args, *runner_);
  }
  RunStats rs;
  std::vector<HostTensor> out = interpret(*prog_, args, runner_.get(), &rs);
  stats_.tape_bytes = rs.tape_bytes;
  return out;
}

std::string CompiledProgram::ir(const std::string& stage) const {
  if (stage == "final") return print_program(*prog_);
  if (!traced_)
    throw Error("ir('" + stage + "'): " + prog_->name +
                " has no traced program (loaded from the program cache, or compiled without keep_trace); only the "
                "final stage is kept");
  if (stages_.empty()) {
    std::unique_ptr<Program> copy = clone_program(*traced_);
    PipelineOptions opt = options_;
    opt.stages = &stages_;
    run_pipeline(*copy, opt);
  }
  auto it = stages_.find(stage);
  if (it == stages_.end()) {
    std::string known;
    for (auto& kv : stages_)
      if (kv.first.find('#') == std::string::npos) known += (known.empty() ? "" : ", ") + kv.first;
    throw Error("unknown IR stage '" + stage + "' (known: " + known +
                "; a pass run several times also as <name>#<run>, e.g. simplify#1)");
  }
  return it->second;
}

std::string CompiledProgram::explain() const {
  if (!explanation_.empty()) return explanation_;
  if (!traced_)
    throw Error("explain(): " + prog_->name +
                " has no traced program (loaded from the program cache, or compiled without keep_trace); compile "
                "it again with keep_trace to explain it");
  std::unique_ptr<Program> copy = clone_program(*traced_);
  ExplainLog log;
  PipelineOptions opt = options_;
  opt.explain = &log;
  run_pipeline(*copy, opt);
  explanation_ = explain_text(*copy, log);
  return explanation_;
}

std::string CompiledProgram::source(const std::string& lang) const {
  // The backend's own language as it compiles it; the others as their default dialect prints
  // the same lowered program (kernels do not depend on the backend).
  const std::string own = language_name(backend_->target().language);
  if (lang == own) return backend_->source(*prog_, codegen_);
  if (lang == "cpp") return generate_kernels(*prog_, cpp_dialect());
  if (lang == "cuda") return generate_kernels(*prog_, cuda_dialect(codegen_.fast_math));
  if (lang == "glsl" || lang == "hlsl") {
    GlslOptions g;
    g.fast_math = codegen_.fast_math;
    const Dialect& d = lang == "glsl" ? glsl_dialect(g) : hlsl_dialect(false, false, codegen_.fast_math);
    std::string out;
    for (const DistinctKernel& k : generate_distinct_kernels(group_kernels(*prog_), d))
      out += (out.empty() ? "" : "\n") +
             annotate_shader(generated_header(d, ": " + k.code.symbol) + unit_prelude(d, {&k.code.source}) + "\n" + k.code.source,
                             k.kernels, d);
    return out;
  }
  throw BackendError("source('" + lang + "'): unknown kernel language (expected cpp, cuda, glsl or hlsl)");
}

}  // namespace ember
