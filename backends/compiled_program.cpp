// CompiledProgram: a traced program taken through the pipeline and compiled for one backend;
// calls run the host plan in the interpreter, dispatching kernels through the backend.
#include <chrono>
#include <cstdlib>

#include "ember/ember.h"

namespace ember {

CompiledProgram::CompiledProgram(std::unique_ptr<Program> traced, const std::string& backend)
    : prog_(std::move(traced)) {
  backend_name_ = backend == "auto" ? "cpu" : backend;
  backend_ = make_backend(backend_name_);
  PipelineOptions opt;
  opt.stages = &stages_;
  const char* v = std::getenv("EMBER_VERIFY");
  opt.verify = v && *v && *v != '0';
  auto t0 = std::chrono::steady_clock::now();
  stats_.passes = run_pipeline(*prog_, opt);
  stats_.passes_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  prog_->for_each([&](Node* n) {
    stats_.kernels += n->op == Op::kernel;
    stats_.buffers += n->op == Op::buffer;
  });
  CompileInfo info;
  runner_ = backend_->compile(*prog_, info);
  stats_.codegen_ms = info.codegen_ms;
  stats_.compile_ms = info.compile_ms;
  stats_.cache_hit = info.cache_hit;
  stats_.cache_key = info.cache_key;
}

std::vector<HostTensor> CompiledProgram::run(const std::vector<ArgValue>& args) {
  return interpret(*prog_, args, runner_.get());
}

std::string CompiledProgram::ir(const std::string& stage) const {
  auto it = stages_.find(stage);
  if (it == stages_.end()) {
    std::string known;
    for (auto& kv : stages_) known += (known.empty() ? "" : ", ") + kv.first;
    throw Error("unknown IR stage '" + stage + "' (known: " + known + ")");
  }
  return it->second;
}

std::string CompiledProgram::source(const std::string& lang) const {
  if (lang != "cpp" || backend_name_ != "cpu")
    throw BackendError("source('" + lang + "') is not available: this program was compiled for the '" + backend_name_ +
                       "' backend, whose kernel language is cpp");
  return backend_->source(*prog_);
}

}  // namespace ember
