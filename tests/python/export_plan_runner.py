"""An independent runner of an exported manifest (docs/export.md) for the `cpp` target, for the
export tests: compiles the exported kernels with g++ -fopenmp into a shared library, loads it with
ctypes, and runs the plan on NumPy buffers with its own parser of the expression grammar. It
shares no code with Ember's runtime, so agreement with Ember's results checks the manifest."""
import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"\s*(\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+|[A-Za-z_]\w*|==|!=|<=|>=|&&|\|\||[-+*/%()<>!,])")


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"bad expression {text!r} at {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _cdiv(a, b):
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(text, env):
    """The value of an expression of the grammar (64-bit integers, C division) with names in env."""
    toks, i = _tokens(text), [0]

    def peek():
        return toks[i[0]] if i[0] < len(toks) else None

    def take(t=None):
        tok = toks[i[0]]
        assert t is None or tok == t, (text, tok, t)
        i[0] += 1
        return tok

    def primary():
        t = take()
        if t == "(":
            v = expr()
            take(")")
            return v
        if t[0].isdigit():
            return float(t) if any(c in t for c in ".e") else int(t)
        if t in ("inf", "nan"):
            return float(t)
        if peek() == "(":
            take("(")
            args = [expr()]
            while peek() == ",":
                take(",")
                args.append(expr())
            take(")")
            a = args
            return {"min": lambda: min(a[0], a[1]), "max": lambda: max(a[0], a[1]),
                    "floordiv": lambda: a[0] // a[1] if a[1] else 0, "floormod": lambda: a[0] % a[1] if a[1] else 0,
                    "select": lambda: a[1] if a[0] else a[2]}[t]()
        return env[t]

    def unary():
        if peek() == "-":
            take()
            return -unary()
        if peek() == "!":
            take()
            return int(not unary())
        return primary()

    def term():
        v = unary()
        while peek() in ("*", "/", "%"):
            op, w = take(), unary()
            v = v * w if op == "*" else _cdiv(v, w) if op == "/" else (v - _cdiv(v, w) * w if w else 0)
        return v

    def total():
        v = term()
        while peek() in ("+", "-"):
            v = v + term() if take() == "+" else v - term()
        return v

    def cmp():
        v = total()
        if peek() in ("==", "!=", "<", "<=", ">", ">="):
            op, w = take(), total()
            v = int({"==": v == w, "!=": v != w, "<": v < w, "<=": v <= w, ">": v > w, ">=": v >= w}[op])
        return v

    def land():
        v = cmp()
        while peek() == "&&":
            take()
            w = cmp()
            v = int(bool(v) and bool(w))
        return v

    def expr():
        v = land()
        while peek() == "||":
            take()
            w = land()
            v = int(bool(v) or bool(w))
        return v

    v = expr()
    assert i[0] == len(toks), f"trailing tokens in {text!r}"
    return v


_NP = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "bool": np.uint32}


def _word(value, dtype):
    if dtype == "f32":
        return int(np.array(value, np.float32).view(np.uint32))
    return int(value) & 0xFFFFFFFF


def run_cpp_export(out_dir, args, work):
    """Runs the `cpp` export in out_dir on `args` (NumPy arrays and Python numbers, in call order);
    returns the outputs as NumPy arrays (and the inout inputs, updated in place in `args` copies)."""
    out_dir = Path(out_dir)
    m = __import__("json").loads((out_dir / "manifest.json").read_text())
    assert m["target"] == "cpp"
    sources = sorted({str(out_dir / k["file"]) for k in m["kernels"]})
    lib_path = Path(work) / "kernels.so"
    subprocess.run(["g++", "-std=c++17", "-O1", "-fopenmp", "-shared", "-fPIC", "-I", str(out_dir), *sources,
                    "-o", str(lib_path)], check=True, capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    env, bufs = {}, {}
    for a, v in zip(m["args"], args):
        if a["kind"] == "scalar":
            env[a["name"]] = v
        else:
            bufs[a["name"]] = np.ascontiguousarray(v).view(np.uint32).reshape(-1).copy()
    for d in m["dims"]:
        shape = np.shape(args[[a["name"] for a in m["args"]].index(d["from"]["input"])])
        env[d["name"]] = shape[d["from"]["axis"]]
        assert "value" not in d or d["value"] == env[d["name"]]
    for b in m["buffers"]:
        if b["name"] not in bufs:
            bufs[b["name"]] = np.zeros(evaluate(b["count"], env), np.uint32)
    kernels = {k["name"]: k for k in m["kernels"]}

    def steps(plan):
        for s in plan:
            op = s["op"]
            if op == "dispatch":
                k = kernels[s["kernel"]]
                threads = evaluate(s["threads"], env)
                ptrs = (ctypes.POINTER(ctypes.c_uint32) * len(k["bindings"]))(
                    *[bufs[b["buffer"]].ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)) for b in k["bindings"]])
                words = [_word(evaluate(s["params"][f["name"]], env), f["type"]) for f in k["params"]["fields"]]
                params = (ctypes.c_uint32 * max(1, len(words)))(*words)
                fn = getattr(lib, k["entry"])
                fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
                if threads > 0:
                    fn(ptrs, params, 0, threads)
            elif op == "loop":
                k, end, step = evaluate(s["begin"], env), evaluate(s["end"], env), evaluate(s["step"], env)
                while (k < end) if step > 0 else (k > end):
                    env[s["var"]] = k
                    steps(s["body"])
                    k += step
            elif op == "if":
                steps(s["then"] if evaluate(s["cond"], env) else s["else"])
            elif op == "let":
                env[s["var"]] = evaluate(s["value"], env)
            elif op == "copy":
                n = evaluate(s["count"], env)
                bufs[s["dst"]][:n] = bufs[s["src"]][:n]
            elif op == "fill":
                bufs[s["buffer"]][:evaluate(s["count"], env)] = s["value"]
            elif op == "readback":
                w = bufs[s["buffer"]][evaluate(s["index"], env):][:1].copy()
                env[s["into"]] = w.view(_NP[s["dtype"]])[0].item()
            else:
                raise ValueError(f"unknown step {op}")

    steps(m["plan"])
    outs = []
    shapes = {b["name"]: [evaluate(e, env) for e in b["shape"]] for b in m["buffers"]}
    for o in m["outputs"]:
        if "buffer" in o:
            b = next(x for x in m["buffers"] if x["name"] == o["buffer"])
            outs.append(bufs[o["buffer"]].view(_NP[b["dtype"]]).reshape(shapes[o["buffer"]]).copy())
        else:
            outs.append(evaluate(o["value"], env))
    return outs
