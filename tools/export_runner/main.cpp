// export_runner: runs an Ember export (manifest.json + shaders) without Ember, to prove it.
//   export_runner DIR --in NAME=FILE.npy ... [--scalar NAME=VALUE] [--dim NAME=N] --out OUTDIR
//                 [--gl] [--poison] [--repeat K] [--trace FILE] [--verbose]
// Vulkan mode (default) runs a `spirv` export; --gl runs a `glsl` export on OpenGL 4.3+ through
// EGL surfaceless. Writes every output, inout and state buffer to OUTDIR/NAME.npy (a program's
// host-value outputs, e.g. a count read back, to OUTDIR/out<INDEX>.npy, 0-d) and prints
// one summary line. Exit status 0 on success, 1 on any error (message on stderr), 2 on bad usage.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "device.h"
#include "manifest.h"
#include "plan.h"

namespace {

const char* kUsage =
    "usage: export_runner DIR --in NAME=FILE.npy ... [--scalar NAME=VALUE ...] [--dim NAME=N ...] --out OUTDIR\n"
    "                     [--gl] [--poison] [--repeat K] [--trace FILE] [--verbose]\n"
    "  DIR        an Ember export folder (manifest.json and its shaders): target spirv, or glsl with --gl\n"
    "  --in       an input buffer from a .npy file (little-endian float32, int32, uint32 or bool)\n"
    "  --scalar   a scalar argument (f32, i32, u32 or bool)\n"
    "  --dim      a dim no input shape binds\n"
    "  --out      where NAME.npy is written for every output, inout and state buffer\n"
    "  --gl       run on OpenGL 4.3+ compute (EGL surfaceless) instead of Vulkan\n"
    "  --poison   fill buffers the manifest does not zero-initialize with NaN words (checks zero_init)\n"
    "  --repeat   run the plan K more times (inputs uploaded again) and report the fastest run\n"
    "  --trace    write every dispatch (kernel, groups, parameter words), copy, fill and readback of the run\n"
    "  --verbose  log the device and every readback\n";

[[noreturn]] void usage(const std::string& msg) {
  std::cerr << "export_runner: " << msg << "\n" << kUsage;
  std::exit(2);
}

std::pair<std::string, std::string> split_kv(const std::string& opt, const char* arg) {
  const char* eq = std::strchr(arg, '=');
  if (!eq || eq == arg) usage(opt + " expects NAME=VALUE, got '" + arg + "'");
  return {std::string(arg, eq), std::string(eq + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, out;
  bool gl = false;
  runner::RunOptions opt;
  std::vector<std::pair<std::string, std::string>> in_files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--in") {
      in_files.push_back(split_kv(a, next()));
    } else if (a == "--scalar") {
      auto kv = split_kv(a, next());
      opt.scalars[kv.first] = kv.second;
    } else if (a == "--dim") {
      auto kv = split_kv(a, next());
      try {
        opt.dims[kv.first] = std::stoll(kv.second);
      } catch (const std::exception&) {
        usage("--dim " + kv.first + ": '" + kv.second + "' is not an integer");
      }
    } else if (a == "--out") {
      out = next();
    } else if (a == "--gl") {
      gl = true;
    } else if (a == "--poison") {
      opt.poison = true;
    } else if (a == "--repeat") {
      const std::string v = next();
      try {
        opt.repeat = std::stoi(v);
      } catch (const std::exception&) {
        usage("--repeat: '" + v + "' is not an integer");
      }
      if (opt.repeat < 0) usage("--repeat must be >= 0");
    } else if (a == "--trace") {
      opt.trace_path = next();
    } else if (a == "--verbose") {
      opt.verbose = true;
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown option " + a);
    } else if (dir.empty()) {
      dir = a;
    } else {
      usage("more than one export folder ('" + dir + "', '" + a + "')");
    }
  }
  if (dir.empty()) usage("no export folder");
  if (out.empty()) usage("no --out folder");

  try {
    const runner::Manifest m = runner::load_manifest(dir);
    const std::string want = gl ? "glsl" : "spirv";
    if (m.target != want)
      throw std::runtime_error(dir + ": a `" + m.target + "` export; " + (gl ? "--gl" : "Vulkan mode") + " runs a `" + want +
                               "` export" + (m.target == "glsl" ? " (add --gl)" : m.target == "spirv" ? " (drop --gl)" : ""));
    for (const auto& [name, path] : in_files) {
      if (opt.inputs.count(name)) throw std::runtime_error("--in " + name + " given twice");
      opt.inputs[name] = runner::read_npy(path);
    }
    auto dev = gl ? runner::make_gl_device() : runner::make_vulkan_device();
    if (opt.verbose) std::cerr << "export_runner: " << dev->describe() << "\n";
    const runner::RunResult r = runner::run_export(m, *dev, opt);
    mkdir(out.c_str(), 0755);
    struct stat st;
    if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw std::runtime_error("cannot create the folder " + out);
    for (const auto& [name, a] : r.outputs) runner::write_npy(out + "/" + name + ".npy", a);
    std::printf("export_runner: %s (%s) on %s: %lld dispatches, setup %.1f ms, plan %.1f ms", m.program.c_str(),
                m.target.c_str(), dev->describe().c_str(), static_cast<long long>(r.dispatches), r.setup_ms, r.plan_ms);
    if (opt.repeat) std::printf(" (fastest of %d: %.1f ms)", opt.repeat + 1, r.best_plan_ms);
    std::printf(", %zu output(s) in %s\n", r.outputs.size(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "export_runner: error: " << e.what() << "\n";
    return 1;
  }
}
