"""GPU benchmark: Ember's cuda backend against PyTorch (eager, torch.compile), JAX and CuPy.

Usage (one call on the GPU machine; ember from build-gpu/python):
  PYTHONPATH=build-gpu/python python3 bench/gpu.py --json $OUT/gpu.json --md $OUT/gpu.md
  PYTHONPATH=build/python /usr/bin/python3 bench/gpu.py --quick --backend cpu   # smoke test, no GPU
Inputs are uploaded once; a step runs on the device-resident inputs and returns when the device is
done (GPU_IMPLS in the workload modules, helpers in gpu_common.py). Each sample times --inner steps;
the table gives the median and min per step, derived rates, and the check against NumPy.
"""
import os

# Before anything imports jax: JAX would otherwise take 75% of the GPU's memory at start, and its
# pool never shrinks, so cap it and leave the rest to the peers that run after it (overridable).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from common import BENCH_DIR, PeerBroken, Skip  # noqa: E402

DEFAULT_RUNS = "nbody:4096,nbody:65536,fluid:1024,matmul:2048,train_mlp:128"
QUICK_RUNS = "nbody:256,fluid:64,matmul:128,train_mlp:32"
NBODY_FLOPS_PER_PAIR = 20
# fluid's minimum traffic per step: the three input fields (U, V, D) read once and the four outputs
# (U', V', D', pressure) written once, float32: 7 * n * n * 4 bytes. The Jacobi iterations'
# intermediate traffic is not counted, so this is a lower bound a fused step could approach.
FLUID_FIELDS_MOVED = 7
# Above this N, nbody's NumPy reference ([N, N, 3] temporaries: 51 GB at 65536) is computed for
# CHECK_ROWS evenly spaced bodies only (workload.reference_rows) and only those rows are checked.
FULL_REFERENCE_MAX_N = 8192
CHECK_ROWS = 1024


def say(*args):
    """Prints a progress line at once (stdout may be a pipe read remotely)."""
    print(*args, flush=True)


def locate_ember(build_dir):
    """Points bench/common.import_ember (which reads $EMBER_BUILD_DIR, else build/) at the build to
    use: --build-dir, else the one an ember on PYTHONPATH comes from, so the two cannot disagree."""
    if build_dir:
        os.environ["EMBER_BUILD_DIR"] = str(Path(build_dir).resolve())
    elif "EMBER_BUILD_DIR" not in os.environ:
        spec = importlib.util.find_spec("ember")
        if spec and spec.origin and Path(spec.origin).parents[1].name == "python":
            os.environ["EMBER_BUILD_DIR"] = str(Path(spec.origin).parents[2])


def package_versions():
    """Versions of the GPU peers' packages installed here (read from metadata, nothing imported)."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in ("torch", "jax", "jaxlib", "triton", "numpy") or name.startswith(("cupy", "jax-cuda", "jax_cuda")):
            found[name] = dist.version
    return dict(sorted(found.items()))


def gpu_info():
    """GPU name, driver and memory from nvidia-smi (None where it is missing), plus torch's view."""
    info = {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout
        first = out.strip().splitlines()[0].split(", ")
        info.update(zip(["gpu", "driver", "memory", "max_sm_clock"], first))
    except (OSError, IndexError, subprocess.SubprocessError):
        info["gpu"] = None
    try:
        import torch
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["torch_fp32_matmul_precision"] = torch.get_float32_matmul_precision()
    except Exception as e:  # no torch, or one that cannot start CUDA
        info["torch_error"] = f"{type(e).__name__}: {e}"
    return info


def copy_bandwidth(gib, repeat=20):
    """Device-to-device copy bandwidth in GB/s ((read + written bytes) / median time of
    dst.copy_(src) on `gib` GiB of float32, timed with CUDA events), the reference for fluid's GB/s;
    None plus the reason when torch has no CUDA device."""
    try:
        import torch
    except ImportError as e:
        return None, f"no torch: {e}"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    n = int(gib * 2 ** 30) // 4
    src = torch.ones(n, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for k in range(repeat + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        if k >= 3:  # the first copies warm up
            times.append(start.elapsed_time(end) * 1e-3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / statistics.median(times) / 1e9, f"{gib:g} GiB dst.copy_(src), median of {repeat}"


def release_memory():
    """Returns the freed device memory of the peers' pools, so the next implementation has it."""
    gc.collect()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()
    if "cupy" in sys.modules:
        try:
            sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
        except Exception:
            pass


def ember_preflight(opts, fatal):
    """Runs a 4-element ember program on the chosen backend before anything else, so a broken
    ember (a build without the backend, a NumPy it was not built for) stops the run at once (when
    `fatal`: a GPU is here) rather than after the peers spent the GPU lease; returns
    em.device_info(), else the failure (printed) when not fatal."""
    from gpu_common import ember_on, ember_upload
    try:
        em = ember_on(opts)
        a = np.arange(4, dtype=np.float32)
        (t,) = ember_upload(em, a)
        if not np.array_equal(t.numpy(), a):
            raise RuntimeError(f"a copy program returned {t.numpy()} for {a}")
        return em.device_info()
    except (Skip, Exception) as e:
        hint = ""
        if "4-byte elements, got 0" in str(e):
            hint = (f"; NumPy {np.__version__} with an ember built on pybind11 < 2.12, which reads NumPy 2's "
                    "dtypes wrongly: rebuild ember with pybind11 >= 2.12")
        why = f"ember preflight failed ({type(e).__name__}: {e}){hint}"
        if fatal:
            raise SystemExit(f"{why}; --no-preflight runs the peers anyway") from None
        say(f"# {why}; no GPU here, so going on")
        return f"preflight failed: {type(e).__name__}"


def _timeout(signum, frame):
    """SIGALRM handler: ends the implementation that has run past --impl-timeout-s."""
    raise TimeoutError("implementation time limit reached (--impl-timeout-s)")


def bench_impl(setup, inputs, ref, opts, a, check):
    """Sets one implementation up, runs it (first call, warm-up, timed samples within the budget)
    and checks its first and last outputs; returns a result dict, never raises."""
    r = {}
    signal.alarm(a.impl_timeout_s)
    try:
        t0 = time.perf_counter()
        step, fetch = setup(inputs, opts)
        r["setup_ms"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        step()
        r["first_call_ms"] = (time.perf_counter() - t0) * 1e3
        ok_first, err_first = check(fetch(), ref)
        warm = []
        for _ in range(a.warmup - 1):
            t0 = time.perf_counter()
            step()
            warm.append((time.perf_counter() - t0) * 1e3)
        per_step = min(warm) if warm else r["first_call_ms"]
        inner = a.inner or max(1, min(50, math.ceil(5.0 / max(per_step, 1e-3))))
        times, start = [], time.perf_counter()
        for k in range(a.repeat):
            if k and time.perf_counter() - start > a.budget_s:
                r["note"] = f"time budget {a.budget_s:g} s reached after {k} of {a.repeat} samples"
                break
            t0 = time.perf_counter()
            for _ in range(inner):
                step()
            times.append((time.perf_counter() - t0) * 1e3 / inner)
        ok_last, err_last = check(fetch(), ref)
    except PeerBroken as e:  # installed but fails to import (common.require said so on stderr)
        return {"status": "broken", "reason": str(e)}
    except Skip as e:
        return {"status": "skipped", "reason": str(e)}
    except Exception as e:
        return {**r, "status": "error", "reason": f"{type(e).__name__}: {str(e)[:500]}",
                "traceback": traceback.format_exc(limit=-4)}
    finally:
        signal.alarm(0)
    ok = ok_first and ok_last
    return {**r, "status": "ok" if ok else "mismatch", "median_ms": statistics.median(times),
            "min_ms": min(times), "times_ms": times, "inner": inner, "max_rel_err": max(err_first, err_last),
            "reason": None if ok else "differs from NumPy (bench/run.py's tolerance)"}


def derived(name, n, ms, a, copy_bw):
    """(column header, value text, number) of the workload's rate for a step of `ms`."""
    s = ms * 1e-3
    if name == "nbody":
        g = n * n * NBODY_FLOPS_PER_PAIR / s / 1e9
        return "GFLOP/s (% FP32 peak)", f"{g:,.0f} ({g / 1e3 / a.fp32_peak_tflops:.1%})", g
    if name == "fluid":
        gbs = FLUID_FIELDS_MOVED * n * n * 4 / s / 1e9
        pct = f" ({gbs / copy_bw:.0%})" if copy_bw else ""
        return "eff. GB/s (% copy BW)", f"{gbs:,.0f}{pct}", gbs
    if name == "matmul":
        t = 2 * n ** 3 / s / 1e12
        return "TFLOP/s (% FP32 peak)", f"{t:.2f} ({t / a.fp32_peak_tflops:.1%})", t
    if name == "train_mlp":
        from workloads import train_mlp
        return "train steps/s", f"{train_mlp.STEPS / s:,.0f}", train_mlp.STEPS / s
    return "", "", None


def table(name, n, results, a, copy_bw, rows=None):
    """Markdown table of one workload's results, then notes: skips, errors, budgets."""
    ember = results.get("ember", {}).get("median_ms")
    header = derived(name, n, 1.0, a, copy_bw)[0]
    sampled = f" (checked on {len(rows)} of the {n} rows)" if rows is not None else ""
    lines = [f"### {name}, N={n}{sampled}", "",
             f"| impl | median ms | min ms | {header} | time / ember | setup + first ms | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    notes = []
    for impl, r in results.items():
        ms = r.get("median_ms")
        rate = derived(name, n, ms, a, copy_bw)[1] if ms else "n/a"
        ratio = f"{ms / ember:.2f}" if ms and ember else "n/a"
        warm = f"{r['setup_ms'] + r['first_call_ms']:,.0f}" if "first_call_ms" in r else "n/a"
        mark = {"ok": "ok", "mismatch": "**MISMATCH**", "broken": "**BROKEN**"}.get(r["status"], r["status"])
        if "max_rel_err" in r:
            mark += f" ({r['max_rel_err']:.1e})"
        mins = f"{r['min_ms']:.3f}" if ms else "n/a"
        lines.append(f"| {impl} | {f'{ms:.3f}' if ms else 'n/a'} | {mins} | {rate} | {ratio} | {warm} | {mark} |")
        for key in ("reason", "note"):
            if r.get(key):
                text = r[key] if len(r[key]) <= 300 else r[key][:300] + " ..."
                notes.append(f"- {impl}: {r['status'] if key == 'reason' else 'note'}: {text}")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def save(out, tables, a):
    """Writes the results so far to --json and the tables to --md ('-': not written)."""
    info, bw = out["machine"], out["machine"]["copy_bandwidth_gbs"]
    if a.json != "-":
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")
    if a.md != "-":
        head = (f"# Ember GPU benchmark, {info['date']}\n\n"
                f"{info.get('gpu') or 'no GPU'} (driver {info.get('driver')}), "
                f"commit {info['commit']}, ember backend {a.backend}; packages {info['packages']}; "
                f"device copy bandwidth {f'{bw:,.0f} GB/s' if bw else 'n/a'}; FP32 peak {a.fp32_peak_tflops:g} "
                f"TFLOP/s; ms per step, median of up to {a.repeat} samples.\n\n")
        Path(a.md).parent.mkdir(parents=True, exist_ok=True)
        Path(a.md).write_text(head + "\n".join(tables))


def parse_runs(text, mods, p):
    """[(workload, n)] from 'name:n,name:n,name' (a bare name takes the workload's DEFAULT_N)."""
    runs = []
    for item in filter(None, text.split(",")):
        name, _, n = item.partition(":")
        if name not in mods:
            p.error(f"unknown workload {name!r}; known: {', '.join(mods)}")
        runs.append((name, int(n) if n else mods[name].DEFAULT_N))
    return runs


def main():
    """Parses arguments, measures the copy bandwidth, runs every workload x implementation, prints
    the tables and writes the JSON and Markdown files."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", help=f"comma list of name:n (default {DEFAULT_RUNS})")
    p.add_argument("--impl", help="comma list of ember, torch, torch_compile, jax, cupy (default: all)")
    p.add_argument("--backend", default="cuda", help="ember backend (em.init)")
    p.add_argument("--build-dir", help="ember build whose python/ to import (default: $EMBER_BUILD_DIR, "
                                       "the one on PYTHONPATH, else build/)")
    p.add_argument("--peer-device", default="cuda", choices=["cuda", "cpu"],
                   help="where torch/jax run (cpu, with NumPy standing in for CuPy: to test the peers' code)")
    p.add_argument("--repeat", type=int, default=20, help="timed samples")
    p.add_argument("--inner", type=int, help="steps per sample (default: enough for 5 ms, at most 50)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first, the first included (>= 1)")
    p.add_argument("--budget-s", type=float, default=20.0, help="stop taking samples of one impl after this")
    p.add_argument("--impl-timeout-s", type=int, default=240, help="abandon one impl (setup included) after this")
    p.add_argument("--fp32-peak-tflops", type=float, default=67.0, help="FP32 peak for %% of peak (H100 SXM: 67)")
    p.add_argument("--copy-gib", type=float, default=1.0, help="size of the copy-bandwidth test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-preflight", action="store_true", help="run even when ember fails its first program")
    p.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_RUNS}, 3 samples, small copy test")
    p.add_argument("--json", default=str(BENCH_DIR / "results" / "gpu-latest.json"), help="'-' for none")
    p.add_argument("--md", default=str(BENCH_DIR / "results" / "gpu-latest.md"), help="'-' for none")
    a = p.parse_args()
    if a.quick:
        a.repeat, a.budget_s, a.copy_gib = min(a.repeat, 3), min(a.budget_s, 5.0), min(a.copy_gib, 1 / 16)
    if a.repeat < 1 or a.warmup < 1:
        p.error("--repeat and --warmup must be >= 1")
    locate_ember(a.build_dir)
    import workloads  # after locate_ember: the workload modules import ember through common
    from run import check, machine_info
    mods = {k: m for k, m in workloads.load_all().items() if hasattr(m, "GPU_IMPLS")}
    runs = parse_runs(a.workload or (QUICK_RUNS if a.quick else DEFAULT_RUNS), mods, p)
    wanted = a.impl.split(",") if a.impl else None
    known = {i for m in mods.values() for i in m.GPU_IMPLS}
    for i in wanted or []:
        if i not in known:
            p.error(f"unknown implementation {i!r}; known: {', '.join(sorted(known))}")

    opts = {"backend": a.backend, "device": a.peer_device}
    if a.peer_device == "cpu":
        opts["xp"] = "numpy"
    info = {**machine_info(), **gpu_info(), "packages": package_versions(),
            "ember_build": os.environ.get("EMBER_BUILD_DIR"), "ember_backend": a.backend}
    # EMBER_COMMIT names the tree when git cannot (the device tool's copy carried a stale .git).
    info["commit"] = os.environ.get("EMBER_COMMIT") or info.get("commit")
    say(f"# {info.get('gpu') or 'no GPU found'} (driver {info.get('driver')}), {info['cpu_model']}, "
        f"{info['date']}, commit {info['commit']}")
    say(f"# packages: {info['packages']}")
    if (not wanted or "ember" in wanted) and not a.no_preflight:
        info["ember_device"] = ember_preflight(opts, fatal=bool(info.get("gpu")))
        say(f"# ember {a.backend}: {info['ember_device']} (ember from {info['ember_build']})")
    try:
        bw, how = copy_bandwidth(a.copy_gib) if a.peer_device == "cuda" else (None, "peers on the cpu")
    except Exception as e:
        bw, how = None, f"failed: {type(e).__name__}: {e}"
    info["copy_bandwidth_gbs"], info["copy_bandwidth_how"] = bw, how
    say(f"# device copy bandwidth: {f'{bw:,.0f} GB/s' if bw else 'n/a'} ({how})")
    say(f"# nbody: {NBODY_FLOPS_PER_PAIR} flops per pair; % of peak against --fp32-peak-tflops "
        f"{a.fp32_peak_tflops:g} (H100 SXM FP32, non-tensor; H100 PCIe is 51)\n")

    signal.signal(signal.SIGALRM, _timeout)
    out = {"machine": info, "args": vars(a), "runs": []}
    tables = []
    for name, n in runs:
        mod = mods[name]
        inputs = mod.make_inputs(n, a.seed)
        t0 = time.perf_counter()
        if hasattr(mod, "reference_rows") and n > FULL_REFERENCE_MAX_N:
            rows = np.linspace(0, n - 1, CHECK_ROWS).astype(np.int64)
            ref = mod.reference_rows(inputs, rows)
            checker = lambda outs, ref: check(tuple(np.asarray(o)[rows] for o in outs), ref)  # noqa: E731
        else:
            rows, ref, checker = None, mod.reference(inputs), check
        say(f"[{name} N={n}] NumPy reference{'' if rows is None else f' for {len(rows)} rows'}: "
            f"{time.perf_counter() - t0:.1f} s")
        results = {}
        for impl, setup in mod.GPU_IMPLS.items():
            if wanted and impl not in wanted:
                continue
            say(f"[{name} N={n}] {impl} ...")
            r = results[impl] = bench_impl(setup, inputs, ref, opts, a, checker)
            release_memory()
            if "median_ms" in r:
                r["derived"] = derived(name, n, r["median_ms"], a, bw)[2]
                done = (f"{r['median_ms']:.3f} ms/step ({len(r['times_ms'])} samples x {r['inner']} steps), "
                        f"{r['status']}")
            else:
                done = r["status"]
            say(f"    {done}" + (f": {r['reason']}" if r.get("reason") else ""))
        tables.append(table(name, n, results, a, bw, rows))
        say("\n" + tables[-1])
        out["runs"].append({"workload": name, "n": n, "checked_rows": None if rows is None else len(rows),
                            "results": results})
        save(out, tables, a)  # after every workload: a run cut short still leaves its results
    written = [f for f in (a.json, a.md) if f != "-"]
    say(f"wrote {' and '.join(written)}" if written else "wrote no files (--json - --md -)")


if __name__ == "__main__":
    main()
