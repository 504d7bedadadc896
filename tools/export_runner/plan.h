// Runs an export's host plan on a Device: binds dims from the inputs' shapes, allocates and
// fills buffers, walks the steps (dispatch, loop, if, copy, fill, readback, set) and reads the
// outputs back.
#pragma once
#include <map>
#include <string>

#include "device.h"
#include "npy.h"

namespace runner {

struct RunOptions {
  std::map<std::string, NpyArray> inputs;       // --in name=file.npy
  std::map<std::string, std::string> scalars;   // --scalar name=value
  std::map<std::string, int64_t> dims;          // --dim N=4096 (only dims no input binds)
  bool poison = false;  // fill buffers without zero_init with a NaN pattern instead of zeros
  bool verbose = false;
  int repeat = 0;       // extra runs of the plan (inputs uploaded again each time), for timing
  std::string trace_path;  // write the first run's steps, one per line (dispatch KERNEL GX GY GZ FIELD=0xWORD...)
};

struct RunResult {
  std::map<std::string, NpyArray> outputs;  // output, inout and state buffers
  double setup_ms = 0;
  double plan_ms = 0;       // the first run (includes the driver's first-dispatch work)
  double best_plan_ms = 0;  // the fastest run (with --repeat)
  int64_t dispatches = 0;
};

// Throws std::runtime_error with a message meant for the user.
RunResult run_export(const Manifest& m, Device& dev, const RunOptions& opt);

}  // namespace runner
