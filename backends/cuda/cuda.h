// The CUDA backend's internals (DESIGN §4), one concern per file:
//   cuda_nvrtc.cpp    NVRTC: CUDA C++ to PTX/CUBIN (linked only when built with EMBER_WITH_CUDA)
//   cuda_source.cpp   a traced program lowered as this backend lowers it, printed in the cuda
//                     dialect (prog.source("cuda"), the NVRTC tests without a GPU)
//   cuda_driver.cpp   the driver API loaded with dlopen("libcuda.so.1") into a function table,
//                     the process-wide context and stream, and why CUDA is unavailable
//   cuda_memory.cpp   managed-memory buffers, pooled; tensors over them
//   cuda_backend.cpp  the Backend and its KernelRunner: one NVRTC program per compile (CUBIN for
//                     the device's compute capability, PTX when the device is newer than NVRTC
//                     knows), images in the compile cache, async launches on the stream
// Nothing here has run on a GPU yet (no device was lent while it was written).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "codegen/dialect.h"
#include "core/ir/node.h"
#include "core/passes/pipeline.h"

namespace ember::cuda {

// The cuda target without a device (prog.source("cuda"), NVRTC without a GPU): native
// workgroups (one block per group), split reductions; the backend adds the device's parallelism.
TargetInfo cuda_target();
// The pipeline options of this target (pipeline_options(cuda_target()), $EMBER_VERIFY).
PipelineOptions pipeline_options();
// `traced` cloned and lowered with pipeline_options().
std::unique_ptr<Program> lower(const Program& traced);
// The distinct kernels of a lowered program in the cuda dialect: (symbol, text without prelude).
std::vector<std::pair<std::string, std::string>> distinct_kernels(const Program& lowered,
                                                                  const Dialect& d = cuda_dialect());
// One translation unit: the dialect's header line, its prelude and the gated pieces the kernels call, then
// each kernel text.
std::string translation_unit(const std::vector<std::string>& kernel_texts, const Dialect& d = cuda_dialect());

// "" when a CUDA device can run kernels here, else why not (never throws).
std::string unavailable_reason();
// The device in words ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs, CUDA driver 13.0").
std::string device_description();
// The cuda backend (throws BackendError when unavailable_reason() is not empty).
std::unique_ptr<Backend> make_backend();

}  // namespace ember::cuda
