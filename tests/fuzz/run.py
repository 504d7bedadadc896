"""Runs generated programs: the reference interpreter after every pass (both pipeline
configurations) and every selected backend, each compared with the NumPy reference.

Classifications: ok, mismatch (stage or backend, output, max error, worst index), internal
(ember.InternalError, a non-ember exception, a pass/verifier failure, generated code that does not
compile), user-error (another ember.Error on a program the generator believes valid), crash (the
worker died of a signal), timeout. A worker subprocess runs the programs so that a crash or a
hang is caught and attributed to its seed (run_many / Worker).
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import traceback

import numpy as np

from . import gen, gen_race, grad as G

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = ("vulkan", "vulkan-hlsl", "opengl", "cuda")  # GPU-class math tolerances
# (name, lower_groups, tile_threads, split_reductions): the pipeline as the CPU and the GPU backends
# run it, the GPU one splitting every reduction loop it can (the backends do from 2048 trips; the
# fuzzer runs them with EMBER_SPLIT_REDUCTIONS=1 so that its small programs are split too).
STAGE_CONFIGS = (("cpu-pipeline", True, True, 0), ("gpu-pipeline", False, False, 1))
SAFETY = 2.0
NPDT = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}


def load(prog):
    """A fresh em.Program of the generated source (each compiles once per backend)."""
    ns = {}
    exec(compile(prog.em_src, f"<fuzz seed {prog.seed}>", "exec"), ns)
    return ns["f"]


def compare(got, prog, cls):
    """None, or a description of the first output / argument that differs from the reference
    beyond its error bound (cls 0: cpu and interpreter bounds, 1: GPU bounds)."""
    want = [(o, e, dt, f"output {k}") for k, (o, e, dt) in enumerate(zip(prog.ref_outs, prog.ref_errs, prog.outs))]
    targs = [a for a in prog.args if a[2]]
    want += [(o, e, a[1], f"argument {a[0]}") for a, (o, e) in zip(targs, prog.ref_args)]
    if len(got) != len(want):
        return {"what": "count", "msg": f"{len(got)} results, expected {len(want)}"}
    for g, (w, e, dt, what) in zip(got, want):
        g = np.asarray(g)
        if g.shape != w.shape:
            return {"what": what, "msg": f"{what}: shape {g.shape}, expected {w.shape}"}
        if g.dtype != NPDT[dt]:
            return {"what": what, "msg": f"{what}: dtype {g.dtype}, expected {np.dtype(NPDT[dt])}"}
        if dt == "f32":
            gf = g.astype(np.float64)
            nan_w, nan_g = np.isnan(w), np.isnan(gf)
            with np.errstate(invalid="ignore"):
                d = np.abs(gf - w)
                tol = SAFETY * e[cls] + 1e-30
                bad = (nan_w != nan_g) | (~nan_w & ~(d <= tol) & ~((gf == w) & np.isinf(w)))
        else:
            d = np.abs(g.astype(np.int64) - w.astype(np.int64)) if dt != "bool" else (g != w).astype(float)
            tol = np.zeros(w.shape)
            bad = d != 0
        if np.any(bad):
            dd = np.where(bad, np.nan_to_num(d, nan=np.inf), -1)
            k = np.unravel_index(int(np.argmax(dd)), w.shape) if w.shape else ()
            return {"what": what, "index": [int(i) for i in k], "got": _num(g[k]), "want": _num(w[k]),
                    "tol": float(np.asarray(tol)[k]) if np.ndim(tol) else float(tol), "nbad": int(bad.sum()),
                    "max_err": _num(np.max(np.where(bad, d, 0))),
                    "msg": f"{what} [{', '.join(map(str, k))}]: got {_num(g[k])}, expected {_num(w[k])} "
                           f"(tolerance {float(np.asarray(tol)[k]) if np.ndim(tol) else float(tol):.3g}; "
                           f"{int(bad.sum())} of {w.size} elements differ)"}
    return None


def _num(x):
    x = np.asarray(x).item()
    return x if not isinstance(x, float) or np.isfinite(x) else str(x)


def classify_exc(em, e):
    msg = f"{type(e).__name__}: {e}"
    if isinstance(e, em.InternalError):
        return "internal", msg
    if isinstance(e, em.CompileError) and "compiling generated kernels failed" in str(e):
        return "internal", msg  # Ember printed code its compiler rejects
    if isinstance(e, em.Error):
        return "user-error", msg
    return "internal", msg + "\n" + "".join(traceback.format_exception(e)[-4:])


def run_program(prog, backends, stages=True, progress=None, info=None):
    """Runs one generated program; returns a list of failures (dicts), empty when all is well.
    A program of the gradient mode (prog.grad) runs its gradient program instead (run_grad)."""
    if prog.grad:
        return run_grad(prog, backends, stages, progress, info)
    if getattr(prog, "expect_race", False):
        return run_race(prog, backends, progress)
    import ember as em
    os.environ.setdefault("EMBER_VERIFY", "1")
    fails = []
    if stages:
        for cfg, lg, tt, sr in STAGE_CONFIGS:
            where = f"interp:{cfg}"
            progress and progress(where)
            try:
                st = load(prog)._interpret_stages(*prog.inputs(), lower_groups=lg, tile_threads=tt, split_reductions=sr)
            except Exception as e:
                c, msg = classify_exc(em, e)
                fails.append({"where": where, "cls": c, "msg": msg})
                continue
            for name, arrays in st:
                if name.startswith("error"):
                    c = "internal" if "internal error" in str(arrays) else "user-error"
                    fails.append({"where": f"{where}:{name[len('error:'):]}", "cls": c, "msg": str(arrays)})
                    break
                m = compare(arrays, prog, 0)
                if m:
                    fails.append({"where": f"{where}:{name}", "cls": "mismatch", **m})
                    break
    for b in backends:
        if b in GPU and not prog.gpu_ok:
            continue
        progress and progress(b)
        try:
            em.init(b)
            args = prog.inputs()
            fn = load(prog)
            out = fn(*args)
            got = [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
            got += [a for a, spec in zip(args, prog.args) if spec[2]]
            if info is not None and info.get("want_stats") and "passes" not in info:
                pass_stats(fn, info)
        except Exception as e:
            c, msg = classify_exc(em, e)
            fails.append({"where": b, "cls": c, "msg": msg})
            continue
        m = compare(got, prog, 0 if b == "cpu" else 1)
        if m:
            fails.append({"where": b, "cls": "mismatch", **m})
    return fails


def run_race(prog, backends, progress=None):
    """A race program whose reference found two threads writing different values into one element:
    every backend must refuse it with an ember.ShapeError that says it races (check_races)."""
    import ember as em
    fails = []
    for b in backends:
        if b in GPU and not prog.gpu_ok:
            continue
        progress and progress(b)
        try:
            em.init(b)
            load(prog)(*prog.inputs())
            fails.append({"where": b, "cls": "silent-race", "msg": "a store whose threads write different values into "
                                                                   "one element ran without an error"})
        except em.ShapeError as e:
            if "races" not in str(e):
                fails.append({"where": b, "cls": "user-error", "msg": f"ShapeError without 'races': {e}"})
        except Exception as e:
            c, msg = classify_exc(em, e)
            fails.append({"where": b, "cls": c, "msg": msg})
    return fails


_ATOMIC_RE = re.compile(r"= atomic |^\s*atomic", re.M)


def pass_stats(fn, info):
    """--stats: the passes that changed the program (the first backend it ran on) and its atomics
    before and after reduce_atomics (the IR after fuse_loads, the pass before it, and after it)."""
    st = fn.stats
    info["passes"] = sorted({p["name"] for p in st["passes"] if p["changed"]})
    info["kernels"] = st["kernels"]
    try:
        info["atomics"] = [len(_ATOMIC_RE.findall(fn.ir("fuse_loads"))), len(_ATOMIC_RE.findall(fn.ir("reduce_atomics")))]
    except Exception:  # a program cache hit keeps no stages
        pass


def run_grad(prog, backends, stages=True, progress=None, info=None):
    """The gradient mode (tests/fuzz/grad.py): the program's gradient program through the
    interpreter after every pass and on every backend, L and each gradient compared with the
    reference's central differences. info (a dict) receives the statistics of the differences."""
    import ember as em
    os.environ.setdefault("EMBER_VERIFY", "1")
    gp = G.GradProgram(prog)
    if info is not None:
        info["grad"] = {"skipped": gp.why_not} if not gp.ok else {}
    if not gp.ok:
        return []
    progress and progress("reference")
    try:
        gp.reference()
    except Exception as e:
        return [{"where": "generator", "cls": "internal", "msg": "fuzzer error (central differences): " +
                 "".join(traceback.format_exception(e))}]
    if info is not None:
        info["grad"] = dict(gp.stats)
    n = 1 + len(gp.wrt)
    fails = []
    if stages:
        for cfg, lg, tt, sr in STAGE_CONFIGS:
            where = f"interp:{cfg}"
            progress and progress(where)
            try:
                st = load(gp)._interpret_stages(*gp.inputs(), lower_groups=lg, tile_threads=tt, split_reductions=sr)
            except Exception as e:
                c, msg = classify_exc(em, e)
                fails.append({"where": where, "cls": c, "msg": msg})
                continue
            for name, arrays in st:
                if name.startswith("error"):
                    c = "internal" if "internal error" in str(arrays) else "user-error"
                    fails.append({"where": f"{where}:{name[len('error:'):]}", "cls": c, "msg": str(arrays)})
                    break
                m = gp.compare(list(arrays)[:n], 0)
                if m:
                    fails.append({"where": f"{where}:{name}", "cls": "mismatch", **m})
                    break
    for b in backends:
        if b in GPU and not prog.gpu_ok:
            continue
        progress and progress(b)
        try:
            em.init(b)
            fn = load(gp)
            out = fn(*gp.inputs())
            got = [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
            if info is not None and info.get("want_stats") and "passes" not in info:
                pass_stats(fn, info)
        except Exception as e:
            c, msg = classify_exc(em, e)
            fails.append({"where": b, "cls": c, "msg": msg})
            continue
        m = gp.compare(got, 0 if b == "cpu" else 1)
        if m:
            fails.append({"where": b, "cls": "mismatch", **m})
    return fails


_PREFETCHED = {}  # (seed, grad) -> Program generated by a batch's prefetch in this worker


def generate(seed, grad=False, race=False, choices=None, drop=()):
    """The program of `seed` in the job's mode: a race program (gen_race.py), else gen.generate."""
    if race:
        return gen_race.generate_race(seed, choices)
    return gen.generate(seed, choices, drop, grad=grad)


def job_program(job):
    if job.get("choices") is None and not job.get("drop"):
        p = _PREFETCHED.pop((job["seed"], job.get("grad", False), job.get("race", False)), None)
        if p is not None:
            return p
    return generate(job["seed"], job.get("grad", False), job.get("race", False), job.get("choices"), job.get("drop", ()))


def prefetch_cpu(seeds, grad=False, race=False):
    """Compiles the cpu kernels of the programs of `seeds` together (one compiler run per unit for
    the whole batch instead of one or more per program, backends/cpu/cpu.h): each program is traced
    and lowered for cpu with the backend deferring, then every kept kernel is compiled into the
    compile cache, where each program's own compile finds them. Errors are ignored here: the
    program that causes one meets it again in its own run, attributed to it."""
    import ember as em
    _PREFETCHED.clear()
    em.init("cpu")
    em._ember._cpu_set_deferred(True)
    try:
        for s in seeds:
            try:
                prog = _PREFETCHED[(s, grad, race)] = generate(s, grad, race)
                if prog.grad:
                    gp = G.GradProgram(prog)
                    if not gp.ok:
                        continue
                    prog = gp
                load(prog)._compile()
            except Exception:
                pass
    finally:
        em._ember._cpu_set_deferred(False)
    try:
        return em._ember._cpu_compile_deferred()
    except Exception:
        return 0


# ---- the worker process --------------------------------------------------------------------
def worker_main():
    """Reads JSON jobs ({seed, backends, stages, choices?, drop?}) from stdin, one per line, and
    writes '@@FUZZ {json}' lines: progress ({"phase": where}) and results ({"seed", "fails"})."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr, not into the protocol
    for line in sys.stdin:
        job = json.loads(line)

        def progress(w):
            out.write("@@FUZZ " + json.dumps({"phase": w}) + "\n")
        try:
            if job.get("prefetch"):
                progress("prefetch")
                prefetch_cpu(job["prefetch"], job.get("grad", False), job.get("race", False))
            progress("generate")
            prog = job_program(job)
            info = {"want_stats": bool(job.get("stats"))}
            fails = run_program(prog, job["backends"], job.get("stages", True), progress, info)
            info.pop("want_stats", None)
            res = {"seed": job["seed"], "fails": fails, "features": prog.features, **info}
        except Exception as e:
            res = {"seed": job["seed"], "fails": [{"where": "generator", "cls": "internal",
                                                   "msg": "fuzzer error: " + "".join(traceback.format_exception(e))}]}
        out.write("@@FUZZ " + json.dumps(res) + "\n")


class Worker:
    """A worker subprocess; restarted after a crash or a timeout."""

    def __init__(self, env=None):
        self.env = env
        self.p = None

    def start(self):
        env = dict(os.environ, **(self.env or {}))
        build = env.get("EMBER_BUILD_DIR") or os.path.join(REPO, "build")
        env["PYTHONPATH"] = os.path.join(build, "python") + os.pathsep + REPO
        env.setdefault("EMBER_CACHE_DIR", os.path.join(build, "fuzz-cache"))
        env.setdefault("EMBER_VERIFY", "1")
        # The GPU backends split every reduction loop they can (split_reductions), not only those
        # of 2048 trips or more: the fuzzer's programs are small.
        env.setdefault("EMBER_SPLIT_REDUCTIONS", "1")
        # One compiler process at a time per worker (--jobs sets the parallelism): a batch's kernels
        # are one translation unit; the memory cache holds a batch's kernels and its GPU shaders.
        env.setdefault("EMBER_COMPILE_JOBS", "1")
        env.setdefault("EMBER_MEMORY_CACHE_ENTRIES", "2048")
        if not env.get("XDG_RUNTIME_DIR"):
            x = os.path.join(build, "xdg-runtime")
            os.makedirs(x, mode=0o700, exist_ok=True)
            env["XDG_RUNTIME_DIR"] = x
        self.p = subprocess.Popen([sys.executable, "-m", "tests.fuzz.run", "--worker"], cwd=REPO, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        self.buf = b""

    def stop(self):
        self.buf = b""
        if self.p and self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except OSError:
                pass
            self.p.wait()
        self.p = None

    def run(self, job, timeout=60.0):
        if self.p is None or self.p.poll() is not None:
            self.start()
        try:
            self.p.stdin.write((json.dumps(job) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            self.stop()
            self.start()
            self.p.stdin.write((json.dumps(job) + "\n").encode())
            self.p.stdin.flush()
        phase = "start"
        deadline = time.time() + timeout
        fd = self.p.stdout.fileno()
        while True:
            if b"\n" in self.buf:
                raw, self.buf = self.buf.split(b"\n", 1)
                line = raw.decode(errors="replace")
                if not line.startswith("@@FUZZ "):
                    continue
                msg = json.loads(line[7:])
                if "phase" in msg:
                    if phase == "prefetch":  # the batch's prefetch had its own `timeout`
                        deadline = time.time() + timeout
                    phase = msg["phase"]
                    continue
                return msg
            left = deadline - time.time()
            if left <= 0:
                self.stop()
                return {"seed": job["seed"], "fails": [{"where": phase, "cls": "timeout",
                                                        "msg": f"no result after {timeout:.0f} s (in {phase})"}]}
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 1 << 16)
            if chunk:
                self.buf += chunk
                continue
            if not chunk:
                self.buf = b""
                rc = self.p.wait()
                self.p = None
                sig = -rc if rc < 0 else None
                what = f"killed by signal {signal.Signals(sig).name}" if sig else f"exited with status {rc}"
                return {"seed": job["seed"], "fails": [{"where": phase, "cls": "crash",
                                                        "msg": f"worker {what} (in {phase})"}]}


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main()


def run_seed(worker, job, timeout=60.0):
    """Runs a job; after a crash or timeout in one phase, goes on with the phases after it."""
    backends = list(job["backends"])
    res = worker.run(job, timeout)
    if job.get("prefetch") and any(f["where"] == "prefetch" for f in res.get("fails", [])):
        # a crash or hang while prefetching the batch: some program of it crashes on cpu; run this
        # seed alone (the culprit fails in its own run, attributed to its seed)
        job = {k: v for k, v in job.items() if k != "prefetch"}
        res = worker.run(job, timeout)
    fails = list(res.get("fails", []))
    features = res.get("features", [])
    extra = {k: v for k, v in res.items() if k in ("grad", "passes", "atomics", "kernels")}
    while fails and fails[-1]["cls"] in ("crash", "timeout"):
        where = fails[-1]["where"]
        if where in backends:
            rest = backends[backends.index(where) + 1:]
        elif where.startswith("interp"):
            rest = backends
        else:
            break
        if not rest:
            break
        backends = rest
        res = worker.run(dict(job, backends=rest, stages=False), timeout)
        fails += res.get("fails", [])
        features = features or res.get("features", [])
        if "grad" in res:
            extra.setdefault("grad", res["grad"])
    return {"seed": job["seed"], "fails": fails, "features": features, **extra}


BATCH = 16  # programs whose cpu kernels one worker compiles together (prefetch_cpu)


def run_many(seeds, backends, jobs=1, timeout=60.0, stages=True, on_result=None, grad=False, batch=BATCH,
             stats=False, race=False):
    """Runs the seeds on `jobs` worker processes; returns {seed: result}. With cpu among the
    backends, each worker takes `batch` seeds at a time and compiles their cpu kernels together
    first (prefetch_cpu; batch <= 1: each program compiles its own). stats: each result also has
    "passes" (the passes that changed it), "kernels" and "atomics" (pass_stats)."""
    import queue
    import threading
    q = queue.Queue()
    for s in seeds:
        q.put(s)
    results = {}
    lock = threading.Lock()

    def loop():
        w = Worker()
        try:
            while True:
                todo = []
                while len(todo) < max(1, batch if "cpu" in backends else 1):
                    try:
                        todo.append(q.get_nowait())
                    except queue.Empty:
                        break
                if not todo:
                    return
                for k, s in enumerate(todo):
                    job = {"seed": s, "backends": list(backends), "stages": stages, "grad": grad, "stats": stats,
                           "race": race}
                    if k == 0 and len(todo) > 1:
                        job["prefetch"] = todo
                    r = run_seed(w, job, timeout)
                    with lock:
                        results[s] = r
                        if on_result:
                            on_result(r)
        finally:
            w.stop()
    threads = [threading.Thread(target=loop) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def signature(f):
    """What makes two failures 'the same' for the minimizer: class, place and error site."""
    where = f["where"]
    if where.startswith("interp:"):
        parts = where.split(":")
        where = ":".join(parts[:2]) + (":" + parts[2].split(" ")[-1] if len(parts) > 2 else "")
    site = ""
    m = re.search(r"at (/\S+?:\d+)|(\S+\.cpp):\d+|error: (‘[^’]*’|'[^']*') was not declared", f.get("msg", ""))
    if f["cls"] in ("internal", "user-error") and m:
        site = re.sub(r":\d+$", "", m.group(1) or m.group(2) or m.group(3) or "")
    if f["cls"] == "mismatch" and f.get("site"):
        site = f["site"]  # gradient mode: "L" (the forward part) or "grad"
    return (f["cls"], where.split(":")[0] if f["cls"] == "mismatch" else where, site)
