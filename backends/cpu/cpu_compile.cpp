// Compiling generated C++ into a shared library, through the compile cache (memory, then disk,
// then the system compiler). See backends/compile_cache.h for the disk format.
#include <dlfcn.h>
#include <link.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/compile_cache.h"
#include "backends/cpu/cpu.h"

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

// dlopen + dlsym of every symbol; null (and `error`) when anything is missing.
std::shared_ptr<CpuLibrary> load(const std::string& path, const std::vector<std::string>& symbols, std::string* error) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *error = e ? e : "dlopen failed";
    return nullptr;
  }
  pin_openmp_runtime(h);
  auto lib = std::make_shared<CpuLibrary>();
  lib->handle = h;
  lib->path = path;
  for (const std::string& s : symbols) {
    void* f = dlsym(h, s.c_str());
    if (!f) {
      *error = "symbol " + s + " is missing from " + path;
      return nullptr;  // ~CpuLibrary closes the handle
    }
    lib->symbols[s] = reinterpret_cast<CpuKernelFn>(f);
  }
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
std::shared_ptr<CpuLibrary> build_private(const std::string& key, const std::string& source,
                                          const std::vector<std::string>& symbols) {
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
  std::shared_ptr<CpuLibrary> lib = load(so, symbols, &error);
  std::filesystem::remove_all(dir, ec);
  if (!lib) throw BackendError("ember: cannot load compiled kernels: " + error);
  return lib;
}

}  // namespace

CpuLibrary::~CpuLibrary() {
  if (handle) dlclose(handle);
}

std::string cpu_compiler() {
  if (const char* e = std::getenv("EMBER_CXX"); e && *e) return e;
  return EMBER_CXX_COMPILER;
}

const std::vector<std::string>& cpu_flags() {
  // No -ffast-math: NaN/inf and rounding must match the interpreter. -ffp-contract=off keeps
  // a*b+c unfused and -fwrapv makes i32 arithmetic wrap, as core/ir/eval.cpp does.
  // -fno-tree-loop-distribution: GCC 12.2's loop distribution moved a store of 0 to A[i] ahead
  // of the load of A[i] before it in the same iteration (g = A[i]; B[i] = b; A[i] = 0;
  // out[i] = g * cos(x[i]) gave out = 0; tests/python/test_regressions.py).
  static const std::vector<std::string> flags = {
      "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-fno-math-errno",
      "-fno-trapping-math", "-ffp-contract=off", "-fwrapv", "-fno-strict-aliasing",
      "-fno-tree-loop-distribution", "-w"};
  return flags;
}

std::shared_ptr<CpuLibrary> cpu_load_library(const std::string& source, const std::vector<std::string>& symbols,
                                             CompileInfo& info) {
  auto t0 = std::chrono::steady_clock::now();
  std::string keyed = source;
  keyed += '\0';
  keyed += "cpu";
  keyed += '\0' + cpu_compiler();
  for (const std::string& f : cpu_flags()) keyed += ' ' + f;
  keyed += '\0' + std::string(EMBER_VERSION) + '\0' + machine_id();
  std::string key = "cpu-" + content_hash(keyed);
  info.cache_key = key;

  auto finish = [&](std::shared_ptr<CpuLibrary> lib, bool hit) {
    info.cache_hit = hit;
    info.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return lib;
  };
  if (auto a = memory_cache_get(key)) return finish(std::static_pointer_cast<CpuLibrary>(a), true);

  std::lock_guard<std::mutex> lock(cache_key_mutex(key));
  if (auto a = memory_cache_get(key)) return finish(std::static_pointer_cast<CpuLibrary>(a), true);
  std::string path = disk_entry_path(key, "so"), error;
  std::shared_ptr<CpuLibrary> lib;
  bool hit = false;
  if (disk_entry_check(key, "so")) {
    lib = load(path, symbols, &error);
    if (lib) hit = true;
    else disk_entry_corrupt(key, "so", "the loader rejected it: " + error);  // loadable entries only
  }
  if (!lib) {
    std::string reason;
    if (build_cached(key, source, &reason)) {
      lib = load(path, symbols, &error);
      if (!lib) throw BackendError("ember: cannot load compiled kernels: " + error);
    } else {
      // The cache directory cannot be written (or the compiler failed there): compile privately.
      // A compiler error raises here; if it succeeds, the cache was the problem.
      lib = build_private(key, source, symbols);
      cache_unwritable(reason);
    }
  }
  memory_cache_put(key, lib);
  return finish(lib, hit);
}

}  // namespace ember
