// A traced program lowered and printed as the cuda backend does (cuda.h), without a device.
#include "backends/cuda/cuda.h"
#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"
#include "core/passes/split_reductions.h"
#include <cstdlib>

namespace ember::cuda {

PipelineOptions pipeline_options() {
  PipelineOptions opt;
  const char* v = std::getenv("EMBER_VERIFY");
  opt.verify = v && *v && *v != '0';
  opt.lower_groups = false;
  opt.tile_threads = false;
  opt.split_reductions = kSplitMinTrips;
  return opt;
}

std::unique_ptr<Program> lower(const Program& traced) {
  std::unique_ptr<Program> p = clone_program(traced);
  run_pipeline(*p, pipeline_options());
  return p;
}

std::vector<std::pair<std::string, std::string>> distinct_kernels(const Program& lowered, const Dialect& d) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const DistinctKernel& k : generate_distinct_kernels(group_kernels(lowered), d))
    out.emplace_back(k.code.symbol, k.code.source);
  return out;
}

std::string translation_unit(const std::vector<std::string>& kernel_texts, const Dialect& d) {
  std::vector<const std::string*> sources;
  for (const std::string& k : kernel_texts) sources.push_back(&k);
  std::string out = generated_header(d, ", " + std::to_string(kernel_texts.size()) + " kernel(s)") + unit_prelude(d, sources);
  for (const std::string& k : kernel_texts) out += "\n" + k;
  return out;
}

}  // namespace ember::cuda
