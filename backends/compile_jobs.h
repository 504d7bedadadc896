// Compiling a program's distinct kernels concurrently: how many jobs run at once, running tasks
// on threads, and the EMBER_DEBUG=time line of each compiled unit (a cpu translation unit, a
// shader), whose start and end times relative to the compile's start show the overlap.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace ember {

// $EMBER_COMPILE_JOBS when it is a positive number, else the CPUs this process may run on.
int compile_jobs();

// Runs f(0) .. f(n - 1) on up to `jobs` threads (the calling thread is one of them) and waits
// for all. When some throw, the exception of the lowest index is rethrown after all finished.
void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& f);

// The clock of one Backend::compile; prints a unit's line when EMBER_DEBUG contains "time".
class CompileTimeline {
 public:
  CompileTimeline();
  bool enabled() const { return enabled_; }
  // Milliseconds since the compile started.
  double now_ms() const;
  // "ember: <text> [+start -> +end ms], <n> kernel(s)" on stderr in one write; `text` names the
  // unit, its work and its cache status.
  void unit(const std::string& text, double start_ms, double end_ms, size_t kernels) const;

 private:
  std::chrono::steady_clock::time_point t0_;
  bool enabled_ = false;
};

}  // namespace ember
