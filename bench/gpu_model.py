"""GPU model without a GPU: each bench/gpu.py workload's cuda kernels against an H100 SXM and an H200.

Usage (no GPU needed: NVRTC from an ember built with EMBER_WITH_CUDA, and ptxas from the CUDA toolkit):
  PYTHONPATH=build/python /usr/bin/python3 bench/gpu_model.py [--workload nbody:4096] [--json model.json]

For every workload of bench/gpu.py (its default runs, or --workload) the ember program is traced
and lowered as the cuda backend lowers it (native workgroups, split_reductions), without a device.
Per kernel the table gives:
- launches per call (host loops' trip counts), threads and blocks x block size per launch, and the
  threads as a share of an H100 SXM's (and an H200's: the same 132 SMs x 2048) resident threads;
- registers per thread, shared memory and spill stores/loads from `ptxas -v -arch=sm_<arch>` on
  NVRTC's PTX of the kernel (exact arithmetic, the backend's default), and the occupancy those and
  the block size allow (active warps per SM / 64) with what limits it;
- bytes and flops per launch counted over the lowered IR (COUNTING below);
- the roofline time max(bytes / bandwidth, flops / FP32 peak) on an H100 SXM (3.35 TB/s HBM3,
  67 TFLOP/s FP32 non-tensor) and an H200 (4.8 TB/s, the same FP32 peak), per launch and summed
  over the call's launches, next to the time measured on an H100 (bench/results/gpu-h100-*.json,
  --measured) where that workload was measured, and measured / roofline.

COUNTING. Over the IR text of the cuda-lowered program (_ember._cuda_ir), per thread, each op
weighted by the trip counts of the loops around it, times the launch's threads:
- bytes: every load, store (and atomic: a load and a store) of device memory (inputs and buffers;
  workgroup shared memory is counted apart) at 4 bytes an element. "req." is what the threads
  request: repeated loads of the same element each count (L1/L2 traffic with no cache at all).
  "DRAM" is the compulsory traffic: per memory and launch, the bytes loaded are capped at the
  memory's size and so are the bytes stored (a perfect cache); the roofline uses "DRAM".
- flops: f32 add, sub, mul, div, min, max (1 each), fma (2), and each math function (sqrt, exp,
  sin, ...: 1 each, though they take several instructions); neg, abs, floor, casts, compares and
  selects count 0. Integer index arithmetic is not counted.
- trip counts and thread-dependent values are evaluated at their mean over the threads (an index
  along an axis of size n is (n - 1) / 2; a loop counter is its mean over its trips), so a strided
  or triangular loop counts its average trips; both branches of an if count as taken (an upper
  bound); a bound that cannot be evaluated (it reads memory or a var) counts one trip and the row
  says so ("~").
"""
import argparse
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import BENCH_DIR, import_ember, import_example

GPUS = {  # name: (SMs, HBM bandwidth B/s, FP32 non-tensor peak flop/s)
    "H100": (132, 3.35e12, 67e12),
    "H200": (132, 4.8e12, 67e12),
}
# sm_90 per-SM limits (CUDA occupancy calculator): threads, warps, blocks, 32-bit registers, shared
# memory usable by blocks, and what the runtime reserves per block; registers go out per warp in
# units of 256.
SM_THREADS, SM_WARPS, SM_BLOCKS, SM_REGS, SM_SMEM, SMEM_RESERVED = 2048, 64, 32, 65536, 228 * 1024, 1024
REG_UNIT = 256
ELEMENT_BYTES = 4  # f32, i32, u32 and bool elements are all 32-bit words on the GPU backends
FLOP_WEIGHT = {"add": 1, "sub": 1, "mul": 1, "div": 1, "min": 1, "max": 1, "fma": 2}
MATH_OPS = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
            "cosh", "tanh", "pow", "atan2"}
DEFAULT_MEASURED = BENCH_DIR / "results" / "gpu-h100-2026-11-27.json"


# The workloads: (program, objects to trace it with or None, {symbol: size}, {scalar name: value},
# calls of the program per bench step), as bench/workloads/<name>.py's gpu_ember runs them.

def spec_nbody(em, n):
    return import_example("nbody").step, None, {"N": n}, {}, 1


def spec_fluid(em, n):
    from workloads import fluid
    return import_example("fluid").fluid_step, None, {"H": n, "W": n}, {"iters": fluid.JACOBI_ITERS}, 1


def spec_matmul(em, n):
    from workloads import matmul
    return matmul._ember_matmul(em), None, {"N": n, "K": n, "M": n}, {}, 1


def spec_train_mlp(em, n):
    """The train step of train_mlp._ember_trainer, traced with its model and a fresh Adam (the
    objects its closure builds); one bench step is STEPS calls of it."""
    from workloads import train_mlp as t
    import numpy as np
    inputs = t.make_inputs(n, 0)
    data = tuple(em.tensor(a) for a in inputs[:3])
    train = t._ember_trainer(em, data, inputs[3:])
    closure = inspect.getclosurevars(train).nonlocals
    model, prog = closure["model"], closure["train_step"]
    opt = em.optim.Adam(model, lr=t.LR, betas=t.BETAS, eps=t.EPS)
    args = [model, opt, *data, np.int32(0)]
    return prog, args, {"S": t.SAMPLES, "T": t.STEPS, "B": n}, {"t": 0}, t.STEPS


SPECS = {"nbody": spec_nbody, "fluid": spec_fluid, "matmul": spec_matmul, "train_mlp": spec_train_mlp}


# The IR text: a tree of (indent-scoped) lines.

class Line:
    __slots__ = ("name", "op", "dtype", "shape", "group", "operands", "attrs", "children")

    def __init__(self, text):
        m = re.match(r"(?:(%\d+) = )?(\w+)", text)
        self.name, self.op = m.group(1), m.group(2)
        rest = text[m.end():]
        km = re.match(r" #\d+", rest)  # kernel #k
        if km:
            rest = rest[km.end():]
        dm = re.match(r" (f32|i32|u32|bool|none)\b", rest)
        self.dtype = dm.group(1) if dm else None
        if dm:
            rest = rest[dm.end():]
        sm = re.match(r"\[([^\]]*)\]", rest)
        self.shape = [s.strip() for s in sm.group(1).split(",") if s.strip()] if sm else []
        if sm:
            rest = rest[sm.end():]
        gm = re.match(r" group\(([^)]*)\)", rest)
        self.group = [int(g) for g in gm.group(1).split(",")] if gm else []
        if gm:
            rest = rest[gm.end():]
        om = re.search(r" \(([^()]*)\)", rest)  # operands; mem(...) and params(...) have no space
        self.operands = [o.strip() for o in om.group(1).split(",")] if om else []
        self.attrs = rest
        self.children = []


def parse_ir(text):
    """The program's top-level lines (each with its children) from print_program's text."""
    root, stack = Line("program"), []
    stack.append(root)
    for raw in text.splitlines()[1:]:
        s = raw.strip()
        if not s or s.startswith("//"):
            continue
        if s == "}":
            stack.pop()
            continue
        opens = s.endswith(" {")
        node = Line(s[:-2] if opens else s)
        stack[-1].children.append(node)
        if opens:
            stack.append(node)
    return root


def constant(tok):
    """The value of an inline constant ('3', '1.0f', '-0.0f', '2u', 'true'), else None."""
    if tok in ("true", "false"):
        return 1.0 if tok == "true" else 0.0
    try:
        return float(tok.rstrip("fu"))
    except ValueError:
        return None


def mean_op(op, a):
    """The mean value of an integer or float op over its operands' means (None: unknown)."""
    if any(x is None for x in a):
        return None
    if op in ("add", "sub", "mul", "min", "max"):
        return {"add": a[0] + a[1], "sub": a[0] - a[1], "mul": a[0] * a[1], "min": min(a), "max": max(a)}[op]
    if op == "div":
        return a[0] / a[1] if a[1] else None
    if op == "mod":
        return a[0] if 0 <= a[0] < a[1] else (a[1] - 1) / 2
    if op == "select":
        return (a[1] + a[2]) / 2
    if op in ("cast", "neg", "abs", "floor", "trunc"):
        return {"neg": -a[0], "abs": abs(a[0])}.get(op, a[0])
    if op == "shl":
        return a[0] * 2 ** a[1]
    if op == "shr":
        return a[0] / 2 ** a[1]
    return None


class Counter:
    """Counts the kernels of a parsed program at the given sizes (see COUNTING)."""

    def __init__(self, root, sizes, scalars):
        self.vals = {k: float(v) for k, v in sizes.items()}
        self.sizes = sizes
        self.scalars = scalars
        self.mem = {}  # memory name -> (bytes, shared?)
        self.kernels = []  # per kernel in program order: dict
        self.host(root.children, 1)

    def value(self, tok):
        return self.vals.get(tok, constant(tok))

    def nbytes(self, shape):
        v = [self.value(d) for d in shape]
        return None if any(x is None for x in v) else ELEMENT_BYTES * math.prod(v)

    def trips(self, node):
        lo, hi, step = (self.value(o) for o in node.operands[:3])
        if None in (lo, hi, step) or step == 0:
            return 1.0, False
        t = max(0.0, math.ceil((hi - lo) / step - 1e-9)) if (hi - lo) % step == 0 else max(0.0, (hi - lo) / step)
        self.vals[node.name] = lo + max(t - 1, 0) * step / 2
        return t, True

    def define(self, n, dims=None, group=None):
        if n.op in ("input", "buffer", "group_buffer"):
            self.mem[n.name] = (self.nbytes(n.shape), n.op == "group_buffer")
        elif n.op == "scalar_arg":
            name = re.search(r"'([^']*)'", n.attrs).group(1)
            self.vals[n.name] = None if self.scalars.get(name) is None else float(self.scalars[name])
        elif n.op in ("index", "local_index", "group_index") and dims:
            axis = int(re.search(r"axis=(\d+)", n.attrs).group(1))
            d = dims[axis] if axis < len(dims) else 1
            g = group[axis] if group and axis < len(group) else d
            extent = {"index": d, "local_index": g, "group_index": math.ceil(d / g)}[n.op]
            self.vals[n.name] = (extent - 1) / 2
        elif n.name and n.op not in ("var", "load", "atomic", "loop"):
            self.vals[n.name] = mean_op(n.op, [self.value(o) for o in n.operands])

    def host(self, lines, launches):
        for n in lines:
            if n.op == "kernel":
                self.kernel(n, launches)
            elif n.op == "loop":
                t, _ = self.trips(n)
                self.host(n.children, launches * t)
            elif n.children:  # if / else at host level: both count
                self.host(n.children, launches)
            else:
                self.define(n)

    def kernel(self, k, launches):
        dims = [self.value(d) for d in k.shape]
        exact = all(d is not None for d in dims)
        dims = [d if d is not None else 1.0 for d in dims]
        if k.group and len(k.group) == len(dims):
            threads = math.prod(math.ceil(d / g) for d, g in zip(dims, k.group)) * math.prod(k.group)
        else:
            threads = math.prod(dims)
        c = {"launches": launches, "threads": int(threads), "group": k.group, "loads": {}, "stores": {},
             "shared_bytes": 0.0, "flops": 0.0, "exact": exact}
        self.body(k.children, 1.0, c, dims, k.group)
        req = sum(c["loads"].values()) + sum(c["stores"].values())
        dram = 0.0
        for kind in ("loads", "stores"):
            for m, b in c[kind].items():
                size = self.mem.get(m, (None, False))[0]
                dram += min(b * threads, size) if size else b * threads
        c["bytes_req"], c["bytes_dram"] = req * threads, dram
        c["flops"] *= threads
        c["shared_bytes"] *= threads
        del c["loads"], c["stores"]
        self.kernels.append(c)

    def access(self, c, kind, mem, weight):
        if self.mem.get(mem, (None, False))[1]:
            c["shared_bytes"] += ELEMENT_BYTES * weight
        else:
            c[kind][mem] = c[kind].get(mem, 0.0) + ELEMENT_BYTES * weight

    def body(self, lines, weight, c, dims, group):
        for n in lines:
            if n.op == "loop":
                t, ok = self.trips(n)
                c["exact"] &= ok
                self.body(n.children, weight * t, c, dims, group)
                continue
            if n.children:  # if / else: counted as taken
                self.body(n.children, weight, c, dims, group)
                continue
            if n.op == "load":
                self.access(c, "loads", n.operands[0], weight)
            elif n.op == "store":
                self.access(c, "stores", n.operands[0], weight)
            elif n.op == "atomic":
                self.access(c, "loads", n.operands[0], weight)
                self.access(c, "stores", n.operands[0], weight)
            elif n.dtype == "f32" and n.op in FLOP_WEIGHT:
                c["flops"] += FLOP_WEIGHT[n.op] * weight
            elif n.dtype == "f32" and n.op in MATH_OPS:
                c["flops"] += weight
            self.define(n, dims, group)


# ptxas on NVRTC's PTX.

def find_ptxas():
    for d in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if d and (Path(d) / "bin" / "ptxas").is_file():
            return str(Path(d) / "bin" / "ptxas")
    return shutil.which("ptxas")


def ptxas_info(C, texts, arch, ptxas):
    """{symbol: {regs, smem, spill_stores, spill_loads, stack}} of the kernels' translation unit."""
    unit = C._cuda_translation_unit(texts)
    ptx, log, _ = C._nvrtc_compile(unit, "model.cu", arch)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.ptx"
        path.write_bytes(ptx.rstrip(b"\0"))
        r = subprocess.run([ptxas, "-v", f"-arch=sm_{arch}", str(path), "-o", os.devnull],
                           capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"ptxas failed: {r.stderr[-2000:]}")
    info, cur = {}, None
    for line in (r.stdout + r.stderr).splitlines():
        m = re.search(r"Function properties for (\w+)", line) or re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = info.setdefault(m.group(1), {"regs": 0, "smem": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    return info


def occupancy(block, regs, smem):
    """(active warps per SM / 64, the limit: threads, blocks, registers or shared memory)."""
    warps = math.ceil(block / 32)
    limits = {"threads": SM_WARPS // warps, "blocks": SM_BLOCKS}
    if regs:
        per_warp = math.ceil(regs * 32 / REG_UNIT) * REG_UNIT
        limits["registers"] = SM_REGS // (per_warp * warps)
    if smem:
        limits["shared"] = SM_SMEM // (smem + SMEM_RESERVED)
    blocks = min(limits.values())
    which = min(limits, key=lambda k: (limits[k], k != "threads"))
    return blocks * warps / SM_WARPS, which, blocks


# The model of one workload.

def model_workload(em, name, n, arch, ptxas, measured):
    C = em._ember
    prog, objs, sizes, scalars, calls = SPECS[name](em, n)
    prog._traced_text = None  # trace here (a call may have consumed the tracer)
    prog._trace(objs)
    ir, symbols = C._cuda_ir(prog._tracer)
    texts = dict(C._cuda_kernels(prog._tracer))
    info = ptxas_info(C, list(texts.values()), arch, ptxas)
    counter = Counter(parse_ir(ir), sizes, scalars)
    if len(counter.kernels) != len(symbols):
        raise RuntimeError(f"{name}: {len(counter.kernels)} kernels in the IR, {len(symbols)} symbols")
    rows = []
    for k, (c, sym) in enumerate(zip(counter.kernels, symbols)):
        block = int(re.search(r"__launch_bounds__\((\d+)\)", texts[sym]).group(1))
        p = info.get(sym, {})
        occ, limit, blocks_per_sm = occupancy(block, p.get("regs", 0), p.get("smem", 0))
        blocks = math.ceil(c["threads"] / block)
        row = {"kernel": k, "symbol": sym, **c, "launches": c["launches"] * calls, "block": block, "blocks": blocks,
               **p, "occupancy": occ, "occupancy_limit": limit, "blocks_per_sm": blocks_per_sm}
        for gpu, (sms, bw, peak) in GPUS.items():
            row[f"resident_{gpu}"] = c["threads"] / (sms * SM_THREADS)
            row[f"waves_{gpu}"] = blocks / (sms * blocks_per_sm)
            row[f"roofline_us_{gpu}"] = max(c["bytes_dram"] / bw, c["flops"] / peak) * 1e6
            row[f"bound_{gpu}"] = "memory" if c["bytes_dram"] / bw >= c["flops"] / peak else "compute"
        rows.append(row)
    total = {f"roofline_us_{g}": sum(r[f"roofline_us_{g}"] * r["launches"] for r in rows) for g in GPUS}
    total.update(launches=sum(r["launches"] for r in rows),
                 bytes_dram=sum(r["bytes_dram"] * r["launches"] for r in rows),
                 bytes_req=sum(r["bytes_req"] * r["launches"] for r in rows),
                 flops=sum(r["flops"] * r["launches"] for r in rows))
    ms = measured.get((name, n))
    total["measured_us_H100"] = ms * 1e3 if ms else None
    total["measured_over_roofline"] = ms * 1e3 / total["roofline_us_H100"] if ms and total["roofline_us_H100"] else None
    return {"workload": name, "n": n, "calls_per_step": calls, "sizes": sizes, "scalars": scalars,
            "kernels": rows, "total": total}


def load_measured(path):
    """{(workload, n): ember's median ms per bench step} from a bench/gpu.py JSON file."""
    if not path or not Path(path).is_file():
        return {}
    out = {}
    for r in json.loads(Path(path).read_text()).get("runs", []):
        e = r.get("results", {}).get("ember", {})
        if e.get("status") == "ok" and e.get("median_ms"):
            out[(r["workload"], r["n"])] = e["median_ms"]
    return out


def si(x, unit=""):
    for scale, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {p}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def markdown(models, measured_path):
    head = ["workload", "kernel", "launches", "threads", "blocks x block", "% resident", "waves", "regs",
            "smem B", "spill st/ld B", "occupancy (limit)", "bytes req.", "bytes DRAM", "flops",
            "roofline us H100", "roofline us H200", "bound", "measured us H100", "measured / roofline"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for m in models:
        wl = f"{m['workload']} N={m['n']}"
        for r in m["kernels"]:
            approx = "" if r["exact"] else "~"
            lines.append("| " + " | ".join([
                wl, f"#{r['kernel']}", f"{r['launches']:g}", f"{r['threads']:,}",
                f"{r['blocks']:,} x {r['block']}", f"{r['resident_H100']:.1%}", f"{r['waves_H100']:.2f}",
                str(r.get("regs", "?")), str(r.get("smem", "?")),
                f"{r.get('spill_stores', '?')}/{r.get('spill_loads', '?')}",
                f"{r['occupancy']:.0%} ({r['occupancy_limit']})", approx + si(r["bytes_req"], "B"),
                approx + si(r["bytes_dram"], "B"), approx + si(r["flops"]),
                f"{r['roofline_us_H100']:.2f}", f"{r['roofline_us_H200']:.2f}", r["bound_H100"], "", ""]) + " |")
        t = m["total"]
        meas = f"{t['measured_us_H100']:,.1f}" if t["measured_us_H100"] else "not measured"
        ratio = f"{t['measured_over_roofline']:.1f}" if t["measured_over_roofline"] else ""
        lines.append("| " + " | ".join([
            f"**{wl}**", "**per step**", f"{t['launches']:g}", "", "", "", "", "", "", "", "",
            si(t["bytes_req"], "B"), si(t["bytes_dram"], "B"), si(t["flops"]),
            f"**{t['roofline_us_H100']:.2f}**", f"{t['roofline_us_H200']:.2f}", "",
            f"**{meas}**", f"**{ratio}**"]) + " |")
    gpus = ", ".join(f"{g}: {sms} SMs x {SM_THREADS} threads, {bw / 1e12:g} TB/s, {pk / 1e12:g} TFLOP/s FP32"
                     for g, (sms, bw, pk) in GPUS.items())
    calls = ", ".join(f"{m['workload']} {m['calls_per_step']} call(s)" for m in models)
    notes = [
        "", f"Per launch unless 'per step' (a bench step: {calls}). "
        f"{gpus}. % resident and waves: the same on both (132 SMs); waves = blocks / (SMs x blocks per SM at "
        "the occupancy). Roofline = max(bytes DRAM / bandwidth, flops / FP32 peak) per launch; per step it is "
        "summed over the launches. bytes req.: every load and store of the threads; bytes DRAM: per memory "
        "capped at its size (a perfect cache). ~: a loop bound the count could not evaluate (one trip). "
        f"Measured: ember's median ms per step in {measured_path or 'no file'}.",
    ]
    return "\n".join(lines + notes)


def main():
    from gpu import DEFAULT_RUNS, QUICK_RUNS, locate_ember, parse_runs
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", help=f"comma list of name:n (default {DEFAULT_RUNS})")
    p.add_argument("--quick", action="store_true", help=f"the smoke sizes: {QUICK_RUNS}")
    p.add_argument("--build-dir", help="ember build whose python/ to import (as bench/gpu.py)")
    p.add_argument("--arch", type=int, default=90, help="compute capability for NVRTC and ptxas (H100/H200: 90)")
    p.add_argument("--measured", default=str(DEFAULT_MEASURED), help="bench/gpu.py JSON with the measured times")
    p.add_argument("--json", help="also write the model as JSON here ('-': print it instead of the table)")
    a = p.parse_args()
    locate_ember(a.build_dir)
    em = import_ember()
    if not em._ember._nvrtc_built():
        raise SystemExit("this Ember was built without NVRTC (EMBER_WITH_CUDA): no PTX to read")
    ptxas = find_ptxas()
    if not ptxas:
        raise SystemExit("ptxas not found ($CUDA_HOME/bin, /usr/local/cuda/bin or PATH)")
    em.init("cpu")  # the workloads' programs are traced and lowered for cuda without running anything
    runs = parse_runs(a.workload or (QUICK_RUNS if a.quick else DEFAULT_RUNS), SPECS, p)
    measured = load_measured(a.measured)
    models = [model_workload(em, name, n, a.arch, ptxas, measured) for name, n in runs]
    out = {"gpus": {g: {"sms": s, "bandwidth_Bps": b, "fp32_flops": f} for g, (s, b, f) in GPUS.items()},
           "arch": a.arch, "nvrtc": em._ember._nvrtc_version(), "measured_file": a.measured, "workloads": models}
    if a.json == "-":
        print(json.dumps(out, indent=2))
        return
    print(markdown(models, a.measured if measured else None))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
