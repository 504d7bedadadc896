// A traced program lowered and printed as the cuda backend does (cuda.h), without a device.
#include "backends/cuda/cuda.h"
#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"
#include <cstdlib>

namespace ember::cuda {

TargetInfo cuda_target() {
  TargetInfo t = gpu_target("cuda", TargetLanguage::cuda, TargetApi::cuda);
  t.float_atomic_add = true;  // atomicAdd(float*) on every CUDA device
  return t;
}

PipelineOptions pipeline_options() {
  PipelineOptions opt = ember::pipeline_options(cuda_target());
  const char* v = std::getenv("EMBER_VERIFY");
  opt.verify = v && *v && *v != '0';
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
