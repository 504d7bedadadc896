// The CPU backend's thread count under contention (cpu_threads.h).
#include "backends/cpu/cpu_threads.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/support/env.h"

namespace ember {

namespace {

using SetThreads = void (*)(int);
using MaxThreads = int (*)();

std::atomic<SetThreads> g_set{nullptr};
std::atomic<int> g_base{0};       // OpenMP's own thread count, read once
std::atomic<int> g_want{0};       // the count chosen by the last sample (0: none yet)
std::atomic<int64_t> g_next_ns{0};  // when to sample next
std::mutex g_sample;              // one sampler at a time
int64_t g_last_ns = 0, g_last_stall_us = -1;  // the previous sample (under g_sample)
bool g_busy = false;

constexpr int64_t kSampleNs = 50'000'000;
constexpr double kBusyShare = 0.25, kIdleShare = 0.10;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The "some" line's total: microseconds in which at least one task waited for a CPU; -1 when
// the file is missing or unreadable.
int64_t cpu_stall_us() {
  FILE* f = std::fopen("/proc/pressure/cpu", "r");
  if (!f) return -1;
  char buf[256];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* t = std::strstr(buf, "total=");
  if (std::strncmp(buf, "some", 4) != 0 || !t) return -1;
  return std::strtoll(t + 6, nullptr, 10);
}

}  // namespace

void cpu_threads_bind(void* library_handle) {
  if (g_set.load(std::memory_order_acquire)) return;
  auto set = reinterpret_cast<SetThreads>(dlsym(library_handle, "omp_set_num_threads"));
  auto max = reinterpret_cast<MaxThreads>(dlsym(library_handle, "omp_get_max_threads"));
  if (!set || !max) return;
  g_base.store(max(), std::memory_order_relaxed);
  g_set.store(set, std::memory_order_release);
}

void cpu_threads_for_next_kernel() {
  static const bool adapt = env_str("EMBER_CPU_ADAPT") != "0";
  SetThreads set = g_set.load(std::memory_order_acquire);
  const int base = g_base.load(std::memory_order_relaxed);
  if (!adapt || !set || base <= 1) return;
  const int64_t now = now_ns();
  if (now >= g_next_ns.load(std::memory_order_relaxed) && g_sample.try_lock()) {
    g_next_ns.store(now + kSampleNs, std::memory_order_relaxed);
    const int64_t stall = cpu_stall_us();
    if (stall >= 0 && g_last_stall_us >= 0 && now > g_last_ns) {
      const double share = static_cast<double>(stall - g_last_stall_us) * 1e3 / static_cast<double>(now - g_last_ns);
      g_busy = g_busy ? share > kIdleShare : share > kBusyShare;
    }
    g_last_ns = now;
    g_last_stall_us = stall;
    g_want.store(g_busy ? 1 : base, std::memory_order_relaxed);
    g_sample.unlock();
  }
  const int want = g_want.load(std::memory_order_relaxed);
  // The count is per calling thread (an OpenMP ICV): set it on every call, a thread-local store.
  set(want > 0 ? want : base);
}

}  // namespace ember
