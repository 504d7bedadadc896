// Compiling generated C++ kernels into shared libraries, through the compile cache (memory, then
// disk, then the system compiler), one kernel at a time: a program that changes one kernel
// recompiles that kernel only, and a program reuses every kernel another program compiled.
//
// Keys. A kernel's key is the hash of its printed text (content-addressed: no program identity,
// c_printer.h), the cpp prelude, the compiler, its flags, Ember's version and the CPU
// (machine_id), as `cpuk-<hash>`. A translation unit's key is the hash of its whole text and the
// same build facts, as `cpu-<hash>`.
//
// Memory. The process-wide memory cache (compile_cache.h) maps a kernel key to a CpuKernel (its
// function and a reference to its library) and a unit key to its loaded library: every library
// is dlopen'ed once per process, however many kernels or programs use it.
//
// Disk ($EMBER_CACHE_DIR, compile_cache.h's checksummed entries). A compiled unit is
// `<unit key>.so` (its source next to it as `<unit key>.cpp`); each kernel compiled in it gets a
// small entry `<kernel key>.ref` naming the unit key and the kernel's symbol, so a later process
// finds each kernel on its own, whatever unit it was compiled in. A reference is never trusted:
// its checksum is checked, the library it names is checked against its own checksum and loaded,
// and the symbol must be in it; a reference whose library is missing, corrupt or lacks the symbol
// is removed with a warning and its kernel compiled again (as a corrupt entry is, compile_cache.h).
//
// Compiling. The kernels found nowhere are split into translation units, as many as
// compile_jobs() (EMBER_COMPILE_JOBS, default one per CPU) and no more than the kernels, balanced
// by source size (largest first onto the lightest unit); each unit is compiled by the system
// compiler on its own thread (posix_spawn), then loaded, and its kernels' references written. A
// unit whose library is already on disk (a reference lost, the same kernels missing again) is
// loaded, not compiled. EMBER_DEBUG=time prints each unit's start and end.
//
// Threads. Several threads may compile programs at once: a kernel being compiled by one call is
// waited for by the others (an in-flight table), never compiled twice in one process; two
// processes compiling the same unit write identical bytes, each entry renamed into place whole.
#include <dlfcn.h>
#include <link.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <unordered_map>

#include "backends/compile_cache.h"
#include "backends/compile_jobs.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_threads.h"

extern char** environ;

namespace ember {

namespace {

#ifndef EMBER_CXX_COMPILER
#define EMBER_CXX_COMPILER "c++"
#endif
#ifndef EMBER_VERSION
#define EMBER_VERSION "unknown"
#endif

// -march=native makes the library specific to this CPU: its model and features join the key,
// so a cache directory shared between machines never hands out code for another CPU.
const std::string& machine_id() {
  static const std::string id = [] {
    std::string info, out;
    if (read_file("/proc/cpuinfo", info)) {
      std::istringstream is(info);
      std::string line;
      bool model = false, flags = false;
      while (std::getline(is, line) && !(model && flags)) {
        if (!model && line.rfind("model name", 0) == 0) { out += line + "\n"; model = true; }
        if (!flags && line.rfind("flags", 0) == 0) { out += line + "\n"; flags = true; }
      }
    }
    return content_hash(out);
  }();
  return id;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// Runs the compiler with stdout and stderr sent to `log`; returns the exit status.
int run_compiler(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_lines(const std::string& text, int n) {
  std::istringstream is(text);
  std::string out, line;
  for (int i = 0; i < n && std::getline(is, line); ++i) out += line + "\n";
  if (std::getline(is, line)) out += "...\n";
  return out;
}

// The OpenMP runtime arrives as a dependency of the first kernel library. Its worker threads
// outlive every parallel region, so it must never be unloaded with the last library: pin it.
void pin_openmp_runtime(void* handle) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return;
  while (map->l_prev) map = map->l_prev;
  for (; map; map = map->l_next) {
    std::string name = map->l_name ? map->l_name : "";
    std::string base = name.substr(name.find_last_of('/') + 1);
    if (base.rfind("libgomp", 0) == 0 || base.rfind("libomp", 0) == 0 || base.rfind("libiomp", 0) == 0)
      dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // never closed: pinned for good
  }
}

// dlopen; null (and `error`) when the loader rejects the file.
std::shared_ptr<CpuLibrary> load(const std::string& path, std::string* error) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *error = e ? e : "dlopen failed";
    return nullptr;
  }
  pin_openmp_runtime(h);
  cpu_threads_bind(h);
  auto lib = std::make_shared<CpuLibrary>();
  lib->handle = h;
  lib->path = path;
  return lib;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return cmd;
}

// Runs the compiler on `src` with output `out` (its messages in `log`, removed after); the
// compiler's exit status (-1: it could not run) and its first lines of output.
int compile_file(const std::string& src, const std::string& out, const std::string& log, std::string* messages,
                 std::vector<std::string>* argv_out) {
  std::vector<std::string> argv = split_words(cpu_compiler());
  for (const std::string& f : cpu_flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", out, src});
  int rc = run_compiler(argv, log);
  read_file(log, *messages);
  std::error_code ec;
  std::filesystem::remove(log, ec);
  *argv_out = std::move(argv);
  return rc;
}

CompileError compiler_failed(int rc, const std::vector<std::string>& argv, const std::string& src,
                             const std::string& messages) {
  return CompileError("ember: compiling generated kernels failed (" +
                      (rc < 0 ? std::string("could not run the compiler") : "exit status " + std::to_string(rc)) +
                      ")\n  command: " + command_line(argv) + "\n  source: " + src + "\n" + first_lines(messages, 40));
}

// Compiles `source` to `<key>.so` in the cache directory (source kept as `<key>.cpp`). Returns
// false, with the reason, when the directory cannot be written or the compiler fails there (a
// full disk fails it too: the caller then compiles outside the cache, which tells them apart).
bool build_cached(const std::string& key, const std::string& source, std::string* reason) {
  std::string src = disk_entry_path(key, "cpp");
  try {
    write_file_atomic(src, source);
  } catch (const BackendError& e) {
    *reason = e.what();
    return false;
  }
  std::string tmp = cache_temp_path(key, ".so");
  std::string log = cache_temp_path(key, ".log");
  std::string messages;
  std::vector<std::string> argv;
  int rc = compile_file(src, tmp, log, &messages, &argv);
  if (rc != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    *reason = "the compiler failed in '" + cache_dir() + "': " + first_lines(messages, 3);
    while (!reason->empty() && reason->back() == '\n') reason->pop_back();
    return false;
  }
  try {
    disk_entry_commit(key, "so", tmp);
  } catch (const BackendError& e) {
    *reason = e.what();
    return false;
  }
  return true;
}

// Compiles `source` in a fresh private directory (the disk cache is not usable), loads it and
// removes the files (the loaded library stays mapped). Throws CompileError when the compiler
// fails (the directory is then kept, for reading the source), BackendError when no temporary
// directory can be written.
std::shared_ptr<CpuLibrary> build_private(const std::string& key, const std::string& source) {
  std::error_code ec;
  std::string base = std::filesystem::temp_directory_path(ec).string();
  if (ec || base.empty()) base = "/tmp";
  std::string tmpl = base + "/ember-build-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw BackendError("ember: cannot compile kernels: neither the compile cache '" + cache_dir() +
                       "' nor the temporary directory '" + base + "' can be written (" + std::strerror(errno) + ")");
  const std::string dir = buf.data();
  const std::string src = dir + "/" + key + ".cpp", so = dir + "/" + key + ".so";
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    f.flush();
    if (!f) {
      std::filesystem::remove_all(dir, ec);
      throw BackendError("ember: cannot compile kernels: neither the compile cache '" + cache_dir() +
                         "' nor the temporary directory '" + base + "' can be written");
    }
  }
  std::string messages;
  std::vector<std::string> argv;
  int rc = compile_file(src, so, dir + "/compile.log", &messages, &argv);
  if (rc != 0) throw compiler_failed(rc, argv, src, messages);
  std::string error;
  std::shared_ptr<CpuLibrary> lib = load(so, &error);
  std::filesystem::remove_all(dir, ec);
  if (!lib) throw BackendError("ember: cannot load compiled kernels: " + error);
  return lib;
}

// What every key holds besides the source: the backend, the compiler and its flags, Ember's
// version and the CPU.
std::string build_facts() {
  std::string f = "cpu";
  f += '\0' + cpu_compiler();
  for (const std::string& flag : cpu_flags()) f += ' ' + flag;
  f += '\0' + std::string(EMBER_VERSION) + '\0' + machine_id();
  return f;
}

std::string kernel_key(const GeneratedKernel& k, const std::string& facts) {
  const Dialect& d = cpp_dialect();
  return "cpuk-" + content_hash(d.prelude + '\0' + d.contraction_prelude + '\0' + k.source + '\0' + facts);
}

std::string unit_key(const std::string& text, const std::string& facts) {
  return "cpu-" + content_hash(text + '\0' + facts);
}

bool is_unit_key(const std::string& s) {
  if (s.size() != 4 + 32 || s.rfind("cpu-", 0) != 0) return false;
  for (size_t i = 4; i < s.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

constexpr const char* kRefHeader = "ember-kernel-ref 1";

// The library of unit `unit`: from the memory cache, the disk cache or, when `text` is given,
// compiled from it (`*compiled`; `*on_disk` false when the cache directory could not take it
// and it was built privately). Null when `text` is null and the library is nowhere usable (a
// corrupt one is warned about and removed).
std::shared_ptr<CpuLibrary> unit_library(const std::string& unit, const std::string* text, bool* compiled,
                                         bool* on_disk) {
  *compiled = false;
  *on_disk = true;
  if (auto a = memory_cache_get(unit)) return std::static_pointer_cast<CpuLibrary>(a);
  std::lock_guard<std::mutex> lock(cache_key_mutex(unit));
  if (auto a = memory_cache_get(unit)) return std::static_pointer_cast<CpuLibrary>(a);
  std::shared_ptr<CpuLibrary> lib;
  std::string error;
  if (disk_entry_check(unit, "so")) {
    lib = load(disk_entry_path(unit, "so"), &error);
    if (!lib) disk_entry_corrupt(unit, "so", "the loader rejected it: " + error);  // loadable entries only
  }
  if (!lib && text) {
    *compiled = true;
    std::string reason;
    if (build_cached(unit, *text, &reason)) {
      lib = load(disk_entry_path(unit, "so"), &error);
      if (!lib) throw BackendError("ember: cannot load compiled kernels: " + error);
    } else {
      // The cache directory cannot be written (or the compiler failed there): compile privately.
      // A compiler error raises here; if it succeeds, the cache was the problem.
      lib = build_private(unit, *text);
      cache_unwritable(reason);
      *on_disk = false;
    }
  }
  if (lib) memory_cache_put(unit, lib);
  return lib;
}

// The kernel `symbol` through its disk reference `<key>.ref`; null when there is none or it is not
// usable (then warned about and removed, so the kernel is compiled again).
std::shared_ptr<CpuKernel> from_reference(const std::string& key, const std::string& symbol) {
  if (!disk_entry_check(key, "ref")) return nullptr;
  std::string text;
  if (!read_file(disk_entry_path(key, "ref"), text)) {
    disk_entry_corrupt(key, "ref", "unreadable");
    return nullptr;
  }
  std::istringstream is(text);
  std::string header, unit, sym;
  std::getline(is, header);
  std::getline(is, unit);
  std::getline(is, sym);
  if (header != kRefHeader || !is_unit_key(unit) || sym != symbol) {
    disk_entry_corrupt(key, "ref", "not a reference to this kernel");
    return nullptr;
  }
  bool compiled = false, on_disk = true;
  std::shared_ptr<CpuLibrary> lib = unit_library(unit, nullptr, &compiled, &on_disk);
  if (!lib) {
    disk_entry_corrupt(key, "ref", "the library it names, '" + disk_entry_path(unit, "so") + "', is missing or not usable");
    return nullptr;
  }
  CpuKernelFn fn = lib->find(symbol);
  if (!fn) {
    disk_entry_corrupt(key, "ref", "the library it names, '" + lib->path + "', has no " + symbol);
    return nullptr;
  }
  return std::make_shared<CpuKernel>(CpuKernel{lib, fn});
}

// Writes `<key>.ref` naming the unit that holds the kernel; a cache that cannot be written only
// costs compile time later (one warning per process).
void write_reference(const std::string& key, const std::string& unit, const std::string& symbol) {
  try {
    const std::string tmp = cache_temp_path(key, ".ref");
    write_file_atomic(tmp, std::string(kRefHeader) + "\n" + unit + "\n" + symbol + "\n");
    disk_entry_commit(key, "ref", tmp);
  } catch (const BackendError& e) {
    cache_unwritable(e.what());
  }
}

// Splits kernels `missing` into at most `jobs` units of about equal source size (largest first,
// each onto the lightest unit); each unit's kernels in key order, so equal sets give equal units.
std::vector<std::vector<size_t>> split_units(const std::vector<const GeneratedKernel*>& kernels,
                                             const std::vector<std::string>& keys, std::vector<size_t> missing,
                                             int jobs) {
  const size_t n = std::min(missing.size(), static_cast<size_t>(std::max(jobs, 1)));
  std::vector<std::vector<size_t>> units(n);
  std::vector<size_t> load(n, 0);
  std::stable_sort(missing.begin(), missing.end(),
                   [&](size_t a, size_t b) { return kernels[a]->source.size() > kernels[b]->source.size(); });
  for (size_t i : missing) {
    const size_t u = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    units[u].push_back(i);
    load[u] += kernels[i]->source.size();
  }
  for (auto& u : units) std::sort(u.begin(), u.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  return units;
}

// Kernels being compiled by some call in this process: other calls wait for them.
struct InFlight {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<CpuKernel>>> pending;
};
InFlight& in_flight() {
  static InFlight* f = new InFlight;  // never destroyed
  return *f;
}

// The kernels kept while deferring (cpu_set_deferred), distinct by text.
struct Deferred {
  std::mutex mu;
  bool on = false;
  std::vector<GeneratedKernel> kernels;
  std::unordered_map<std::string, size_t> by_source;
};
Deferred& deferred() {
  static Deferred* d = new Deferred;  // never destroyed
  return *d;
}

}  // namespace

void cpu_set_deferred(bool on) {
  Deferred& d = deferred();
  std::lock_guard<std::mutex> lock(d.mu);
  d.on = on;
}

bool cpu_deferred() {
  Deferred& d = deferred();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.on;
}

void cpu_defer_kernels(const std::vector<const GeneratedKernel*>& kernels) {
  Deferred& d = deferred();
  std::lock_guard<std::mutex> lock(d.mu);
  for (const GeneratedKernel* k : kernels)
    if (d.by_source.emplace(k->source, d.kernels.size()).second)
      d.kernels.push_back(GeneratedKernel{nullptr, k->symbol, k->source});  // no node: it outlives its program
}

int cpu_compile_deferred(bool compile) {
  std::vector<GeneratedKernel> kept;
  {
    Deferred& d = deferred();
    std::lock_guard<std::mutex> lock(d.mu);
    kept.swap(d.kernels);
    d.by_source.clear();
  }
  if (!compile) return static_cast<int>(kept.size());
  std::vector<const GeneratedKernel*> list;
  for (const GeneratedKernel& k : kept) list.push_back(&k);
  CompileInfo info;
  cpu_load_kernels(list, info, CompileTimeline());
  return static_cast<int>(kept.size());
}

CpuLibrary::~CpuLibrary() {
  if (handle) dlclose(handle);
}

std::string cpu_compiler() {
  if (const char* e = std::getenv("EMBER_CXX"); e && *e) return e;
  return EMBER_CXX_COMPILER;
}

namespace {

// Whether `ld.gold` is an executable on PATH (binutils ships it beside ld.bfd on Debian).
bool gold_on_path() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t b = 0; b <= dirs.size();) {
    size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    const std::string dir = e > b ? dirs.substr(b, e - b) : ".";
    if (::access((dir + "/ld.gold").c_str(), X_OK) == 0) return true;
    b = e + 1;
  }
  return false;
}

}  // namespace

namespace {
const std::vector<std::string>& base_flags() {
  // No -ffast-math: NaN/inf and rounding must match the interpreter. -ffp-contract=off keeps
  // a*b+c unfused (fused multiply-adds are the IR's fma nodes: contract_fma decides, the
  // interpreter agrees) and -fwrapv makes i32 arithmetic wrap, as core/ir/eval.cpp does.
  // -fno-tree-loop-distribution: GCC 12.2's loop distribution moved a store of 0 to A[i] ahead
  // of the load of A[i] before it in the same iteration (g = A[i]; B[i] = b; A[i] = 0;
  // out[i] = g * cos(x[i]) gave out = 0; tests/python/test_regressions.py).
  static const std::vector<std::string> flags = {
      "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-fno-math-errno",
      "-fno-trapping-math", "-ffp-contract=off", "-fwrapv", "-fno-strict-aliasing",
      "-fno-tree-loop-distribution", "-w"};
  // gold links a kernel library against libstdc++ (operator new[] of scratch arrays) in a fifth
  // of the time GNU ld takes (~30 of ~150 ms CPU, a third of a small unit's whole compile);
  // without it, the default linker.
  static const std::vector<std::string> linked = [] {
    std::vector<std::string> f = flags;
    if (gold_on_path()) f.push_back("-fuse-ld=gold");
    return f;
  }();
  return linked;
}

std::vector<std::string> extra_flags() {
  const char* e = std::getenv("EMBER_CPU_FLAGS");
  return e ? split_words(e) : std::vector<std::string>{};
}
}  // namespace

std::vector<std::string> cpu_flags() {
  std::vector<std::string> f = base_flags();
  for (std::string& x : extra_flags()) f.push_back(std::move(x));
  return f;
}

bool cpu_has_fma() {
#if defined(__x86_64__) || defined(__i386__)
  if (!__builtin_cpu_supports("fma")) return false;
#elif !defined(__aarch64__)
  return false;
#endif
  for (const std::string& f : extra_flags())
    if (f == "-mno-fma" || f == "-mno-avx" || f.rfind("-march=", 0) == 0) return false;
  return true;
}

CpuKernelFn CpuLibrary::find(const std::string& symbol) const {
  return handle ? reinterpret_cast<CpuKernelFn>(dlsym(handle, symbol.c_str())) : nullptr;
}

std::string cpu_build_facts_hash() { return content_hash(build_facts()); }

namespace {
std::string program_kernels_key(const std::vector<std::string>& keys) {
  std::string all;
  for (const std::string& k : keys) all += k + ";";
  return keys.empty() ? "" : "cpu-" + content_hash(all);
}
}  // namespace

bool cpu_find_kernels(const std::vector<std::string>& keys, const std::vector<std::string>& symbols,
                      std::vector<CpuKernel>& out, CompileInfo& info) {
  std::vector<CpuKernel> got(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (auto a = memory_cache_get(keys[i])) {
      got[i] = *std::static_pointer_cast<CpuKernel>(a);
      continue;
    }
    std::shared_ptr<CpuKernel> k = from_reference(keys[i], symbols[i]);
    if (!k) return false;
    memory_cache_put(keys[i], k);
    got[i] = *k;
  }
  out = std::move(got);
  info.cache_key = program_kernels_key(keys);
  info.distinct_kernels = static_cast<int>(keys.size());
  info.compiled_kernels = info.translation_units = 0;
  info.cache_hit = true;
  return true;
}

std::vector<CpuKernel> cpu_load_kernels(const std::vector<const GeneratedKernel*>& kernels, CompileInfo& info,
                                        const CompileTimeline& timeline, std::vector<std::string>* keys_out) {
  const double t0 = timeline.now_ms();
  const size_t n = kernels.size();
  const std::string facts = build_facts();
  std::vector<std::string> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = kernel_key(*kernels[i], facts);
  if (keys_out) *keys_out = keys;
  info.cache_key = program_kernels_key(keys);
  info.distinct_kernels = static_cast<int>(n);
  info.compiled_kernels = info.translation_units = 0;
  info.cache_hit = true;  // until something is compiled
  info.compile_ms = 0;
  if (n == 0) return {};

  // Claim the kernels no other call is compiling; the others are waited for at the end.
  std::vector<std::shared_ptr<CpuKernel>> got(n);
  std::vector<std::promise<std::shared_ptr<CpuKernel>>> promises(n);
  std::vector<char> owned(n, 0), done(n, 0);
  std::vector<std::pair<size_t, std::shared_future<std::shared_ptr<CpuKernel>>>> waiting;
  size_t in_memory = 0;
  InFlight& fl = in_flight();
  {
    std::lock_guard<std::mutex> lock(fl.mu);
    for (size_t i = 0; i < n; ++i) {
      if (auto a = memory_cache_get(keys[i])) {
        got[i] = std::static_pointer_cast<CpuKernel>(a);
        ++in_memory;
      } else if (auto it = fl.pending.find(keys[i]); it != fl.pending.end()) {
        waiting.emplace_back(i, it->second);
      } else {
        fl.pending.emplace(keys[i], promises[i].get_future().share());
        owned[i] = 1;
      }
    }
  }
  auto publish = [&](size_t i) {
    memory_cache_put(keys[i], got[i]);
    {
      std::lock_guard<std::mutex> lock(fl.mu);
      fl.pending.erase(keys[i]);
    }
    done[i] = 1;
    promises[i].set_value(got[i]);
  };

  size_t from_disk = 0;
  std::vector<size_t> missing;
  try {
    for (size_t i = 0; i < n; ++i) {
      if (!owned[i]) continue;
      if ((got[i] = from_reference(keys[i], kernels[i]->symbol))) {
        ++from_disk;
        publish(i);
      } else {
        missing.push_back(i);
      }
    }
    const double t1 = timeline.now_ms();
    timeline.unit("cpu cache lookup (" + std::to_string(in_memory) + " in memory, " + std::to_string(from_disk) +
                      " on disk, " + std::to_string(missing.size()) + " missing" +
                      (waiting.empty() ? "" : ", " + std::to_string(waiting.size()) + " compiled by another call") + ")",
                  t0, t1, n);

    const std::vector<std::vector<size_t>> units = split_units(kernels, keys, missing, compile_jobs());
    std::vector<char> compiled(units.size(), 0);
    parallel_for(units.size(), static_cast<int>(units.size()), [&](size_t u) {
      const double start = timeline.now_ms();
      std::vector<const GeneratedKernel*> list;
      for (size_t i : units[u]) list.push_back(kernels[i]);
      const std::string text = join_kernels(list, cpp_dialect());
      const std::string unit = unit_key(text, facts);
      bool built = false, on_disk = true;
      std::shared_ptr<CpuLibrary> lib = unit_library(unit, &text, &built, &on_disk);
      for (size_t i : units[u]) {
        CpuKernelFn fn = lib->find(kernels[i]->symbol);
        if (!fn) throw BackendError("ember: compiled kernels '" + lib->path + "' lack " + kernels[i]->symbol);
        got[i] = std::make_shared<CpuKernel>(CpuKernel{lib, fn});
        if (on_disk) write_reference(keys[i], unit, kernels[i]->symbol);
        publish(i);
      }
      compiled[u] = built;
      timeline.unit("cpu unit " + std::to_string(u + 1) + "/" + std::to_string(units.size()) + " " + unit +
                        " cpp->so " + std::to_string((text.size() + 1023) / 1024) + " KiB (" +
                        (built ? "compiled" : "library on disk") + ")",
                    start, timeline.now_ms(), units[u].size());
    });
    for (size_t u = 0; u < units.size(); ++u)
      if (compiled[u]) {
        ++info.translation_units;
        info.compiled_kernels += static_cast<int>(units[u].size());
      }
  } catch (...) {
    // Calls waiting for the kernels this one claimed get the same error.
    for (size_t i = 0; i < n; ++i)
      if (owned[i] && !done[i]) {
        {
          std::lock_guard<std::mutex> lock(fl.mu);
          fl.pending.erase(keys[i]);
        }
        promises[i].set_exception(std::current_exception());
      }
    throw;
  }
  for (auto& [i, f] : waiting) got[i] = f.get();

  std::vector<CpuKernel> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = *got[i];
  info.cache_hit = info.compiled_kernels == 0;
  info.compile_ms = timeline.now_ms() - t0;
  return out;
}

}  // namespace ember
