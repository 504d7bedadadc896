#include "core/target/target.h"

#include <thread>

#include "core/passes/split_reductions.h"

namespace ember {

const char* language_name(TargetLanguage l) {
  switch (l) {
    case TargetLanguage::cpp: return "cpp";
    case TargetLanguage::glsl: return "glsl";
    case TargetLanguage::hlsl: return "hlsl";
    case TargetLanguage::cuda: return "cuda";
  }
  return "?";
}

namespace {
const char* api_name(TargetApi a) {
  switch (a) {
    case TargetApi::host: return "host";
    case TargetApi::vulkan: return "vulkan";
    case TargetApi::opengl: return "opengl";
    case TargetApi::cuda: return "cuda";
    case TargetApi::d3d11: return "d3d11";
  }
  return "?";
}
}  // namespace

std::string describe(const TargetInfo& t) {
  std::string s = t.name + ": " + language_name(t.language) + " via " + api_name(t.api) + (t.gpu ? ", gpu" : ", cpu");
  auto num = [&](const char* what, int64_t v) {
    if (v > 0) s += ", " + std::to_string(v) + " " + what;
  };
  num("resident threads", t.resident_threads);
  num("threads/workgroup", t.max_workgroup_threads);
  num("subgroup", t.subgroup_size);
  num("shared bytes", t.shared_memory_bytes);
  num("loop limit", t.loop_limit);
  if (t.float_atomic_add) s += ", f32 atomic add";
  if (t.fma) s += ", fma";
  s += "; lowering:";
  if (t.lower_groups) s += " lower_groups";
  if (t.tile_threads) s += " tile_threads";
  if (t.contract_fma) s += " contract_fma";
  if (t.split_reductions) s += " split_reductions>=" + std::to_string(t.split_reductions);
  if (!t.lower_groups && !t.tile_threads && !t.contract_fma && !t.split_reductions) s += " none";
  return s;
}

TargetInfo cpu_target(bool has_fma) {
  TargetInfo t;
  t.name = "cpu";
  t.language = TargetLanguage::cpp;
  t.api = TargetApi::host;
  t.resident_threads = std::max(1u, std::thread::hardware_concurrency());
  t.fma = has_fma;
  t.lower_groups = t.tile_threads = true;
  t.contract_fma = has_fma;
  return t;
}

TargetInfo gpu_target(std::string name, TargetLanguage language, TargetApi api) {
  TargetInfo t;
  t.name = std::move(name);
  t.language = language;
  t.api = api;
  t.gpu = true;
  t.fma = true;
  t.split_reductions = kSplitMinTrips;
  return t;
}

}  // namespace ember
