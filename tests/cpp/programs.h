// Small traced programs shared by the C++ tests, built with the C++ tracing API, plus helpers
// to make random arguments and compare interpreter results.
#pragma once
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/interp/interp.h"
#include "core/trace/tracer.h"

namespace ember::testing {

struct TestProgram {
  std::string name;
  std::function<std::unique_ptr<Program>()> build;
  int kernels = -1;  // expected kernel count after the pipeline (-1: not checked)
};

inline void PrintTo(const TestProgram& p, std::ostream* os) { *os << p.name; }

// Every program the pass tests run.
std::vector<TestProgram> test_programs();

// Bitonic sort of 16 keys written as one kernel whose stage loops exchange data between
// threads. Such loops run grid-synchronously (core/IR.md), which the interpreter realizes only
// after fuse_kernels has hoisted them to the host, so it is tested on its own.
std::unique_ptr<Program> bitonic_sort();

// What test_programs() leaves out, for tests that must see every attribute away from its default
// (the printer, the serializer): a workgroup kernel with a group buffer and barriers, a scan, an
// argmax with keepdims, a wrapping gather, an atomic max, two source locations.
std::unique_ptr<Program> group_zoo();

// Random arguments for p (tensors of the given concrete dims for symbolic dims, default 7).
std::vector<ArgValue> random_args(const Program& p, std::mt19937& rng, int64_t sym = 7);
// Deep copy of arguments (programs may write into their inputs).
std::vector<ArgValue> copy_args(const std::vector<ArgValue>& a);
// Empty string when equal within rtol/atol (floats) or exactly (integers); else a description.
std::string compare(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got, double rtol = 1e-4);

}  // namespace ember::testing
