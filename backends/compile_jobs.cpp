// Concurrency for kernel compiles (compile_jobs.h).
#include "backends/compile_jobs.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace ember {

int compile_jobs() {
  if (const char* e = std::getenv("EMBER_COMPILE_JOBS"); e && *e) {
    const long v = std::strtol(e, nullptr, 10);
    if (v >= 1) return static_cast<int>(v < 1024 ? v : 1024);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n >= 1) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& f) {
  if (n == 0) return;
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min(n, static_cast<size_t>(jobs < 1 ? 1 : jobs));
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

CompileTimeline::CompileTimeline() : t0_(std::chrono::steady_clock::now()) {
  const char* d = std::getenv("EMBER_DEBUG");
  enabled_ = d && std::strstr(d, "time");
}

double CompileTimeline::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

void CompileTimeline::unit(const std::string& text, double start_ms, double end_ms, size_t kernels) const {
  if (!enabled_) return;
  std::fprintf(stderr, "ember: %s [+%.1f -> +%.1f ms], %zu kernel%s\n", text.c_str(), start_ms, end_ms, kernels,
               kernels == 1 ? "" : "s");
}

}  // namespace ember
