"""Unity glue for an `hlsl` export (Shader Model 5.0): write_unity(manifest, export_dir, out_dir) writes

- <program>.compute: every kernel file of the export behind `#pragma kernel ENTRY EMBER_KERNEL_<i>`
  (Unity compiles each kernel alone with its macro defined, so the kernels' identical helper and
  buffer names never meet), plus two helper kernels, ember_copy and ember_fill, for the plan's
  copy and fill steps;
- <Class>.cs: a class that creates one ComputeBuffer per manifest buffer and runs the host plan
  with SetBuffer / SetInt / SetFloat / Dispatch (plan expressions translated to C#; readbacks by
  GetData);
- <Class>Sample.cs: a MonoBehaviour that steps the program every frame (outputs fed back into the
  inputs they replace) and draws one buffer as points through a material;
- EmberPoints.shader: the unlit point material the sample draws with.
"""
import os
import re

from . import _glue_common as G
from ._glue_common import E
from ._unity_text import _CS_COPY_FILL, _CS_PRIVATE, _HELPERS_HLSL, _POINTS_SHADER

_CS_KEYWORDS = set("""abstract as base bool break byte case catch char checked class const continue decimal default
delegate do double else enum event explicit extern false finally fixed float for foreach goto if implicit in int
interface internal is lock long namespace new null object operator out override params private protected public
readonly ref return sbyte sealed short sizeof stackalloc static string struct switch this throw true try typeof uint
ulong unchecked unsafe ushort using virtual void volatile while""".split())
# Members of the generated class a buffer, dim or scalar must not be named after.
_RESERVED = {"Shader", "Run", "Dispose", "Copy", "Fill", "Dispatch", "ReadWord", "Bits", "FromBits", "NewBuffer",
             "Div", "Mod", "FloorDiv", "FloorMod",
             "Zero", "System", "Math", "UnityEngine", "ComputeBuffer", "ComputeShader"}


def _ident(name, taken):
    """A C# identifier for `name` not in `taken` (keywords get a suffix)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit():
        base = "_" + base
    if base in _CS_KEYWORDS or base in _RESERVED:
        base += "_"
    out, n = base, 2
    while out in taken:
        out, n = f"{base}{n}", n + 1
    taken.add(out)
    return out


def _float_members(hlsl_text):
    """Names declared `float NAME;` inside the cbuffers of an HLSL source (set with SetFloat; the
    other members are 32-bit words set with SetInt)."""
    out = set()
    for body in re.findall(r"cbuffer\s+\w+\s*(?::\s*register\s*\(\s*\w+\s*\))?\s*\{(.*?)\}", hlsl_text, re.S):
        out.update(re.findall(r"\bfloat\s+(\w+)\s*;", body))
    return out


class _Writer:
    def __init__(self):
        self.lines, self.depth = [], 0

    def __call__(self, text=""):
        self.lines.append(("    " * self.depth + text) if text else "")

    def open(self, text):
        if text:
            self(text)
        self("{")
        self.depth += 1

    def close(self, suffix=""):
        self.depth -= 1
        self("}" + suffix)

    def text(self):
        return "\n".join(self.lines) + "\n"


def _cs_float(v):
    t = repr(float(v))
    return t + "f" if "e" not in t and "inf" not in t and "nan" not in t else f"(float){t}"


class _UnityGen:
    def __init__(self, manifest, export_dir):
        self.m, self.dir = manifest, export_dir
        self.program = manifest["program"]
        self.cls = G.pascal(self.program)
        taken = {self.cls}
        self.dims = {d["name"]: _ident(d["name"], taken) for d in manifest.get("dims", [])}
        self.scalars = {s["name"]: (_ident(s["name"], taken), s["dtype"]) for s in manifest.get("scalars", [])}
        self.bufs = {b["name"]: _ident(b["name"], taken) for b in manifest["buffers"]}
        self.buf_specs = {b["name"]: b for b in manifest["buffers"]}
        self.files = G.kernel_files(manifest)
        self.file_index = {f[0]: i for i, f in enumerate(self.files)}
        self.kernel_field = {f[0]: _ident("_k" + re.sub(r"\W", "_", f[2]), taken) for f in self.files}
        self.values = {n: (_ident(n, taken), dt) for n, dt in G.plan_values(manifest["plan"]).items()}
        self.float_members = {}
        for f in self.files:
            with open(os.path.join(export_dir, f[0]), encoding="utf-8") as fh:
                self.float_members[f[0]] = _float_members(fh.read())
        self.kernels = {k["name"]: k for k in manifest["kernels"]}
        self.outputs = [o for o in manifest.get("outputs", []) if "value" in o]
        self.out_props = {o["index"]: _ident(f"Out{o['index']}", taken) for o in self.outputs}

    def emitter(self):
        names = {d: (ident, "i") for d, ident in self.dims.items()}
        names.update({s: (ident, G.VALUE_TYPE[dt]) for s, (ident, dt) in self.scalars.items()})
        names.update({v: (ident, G.VALUE_TYPE[dt]) for v, (ident, dt) in self.values.items()})
        return E.Emitter("cs", names)

    # --- the .compute file
    def compute(self):
        out = [f"// {self.program}.compute: generated by Ember's em.export(target=\"hlsl\", engine=\"unity\") from",
               "// manifest.json. Unity compiles each kernel alone with the macro on its #pragma line defined, so",
               "// each kernel file's text sits in its own #if block. Re-export instead of editing.", ""]
        for i, (f, _, entry, _) in enumerate(self.files):
            out.append(f"#pragma kernel {entry} EMBER_KERNEL_{i}")
        out += ["#pragma kernel ember_copy EMBER_COPY", "#pragma kernel ember_fill EMBER_FILL", ""]
        for i, (f, _, entry, _) in enumerate(self.files):
            with open(os.path.join(self.dir, f), encoding="utf-8") as fh:
                text = fh.read().rstrip("\n")
            out += [f"#if defined(EMBER_KERNEL_{i})", f"// ---- {f} (kernel {entry})", text, "#endif", ""]
        return "\n".join(out) + _HELPERS_HLSL

    # --- the C# class
    def cs_class(self):
        w = _Writer()
        m = self.m
        w(f"// {self.cls}.cs: generated by Ember's em.export(target=\"hlsl\", engine=\"unity\") from the manifest of")
        w(f"// {self.program}. Runs its host plan on {self.program}.compute: one ComputeBuffer per manifest buffer (4-byte")
        w("// elements; bool buffers hold 0/1 words), kernel parameters set by name before each Dispatch (32-bit")
        w("// words: float values go in as their bits unless the cbuffer declares the member float), and the")
        w("// ember_copy / ember_fill kernels for copy and fill steps. Re-export instead of editing.")
        w("using System;")
        w("using UnityEngine;")
        w()
        w.open(f"public sealed class {self.cls} : IDisposable")
        w("public readonly ComputeShader Shader;")
        for d in m.get("dims", []):
            src = d.get("from", {})
            w(f"public readonly long {self.dims[d['name']]};  // dim {d['name']}"
              + (f" (axis {src.get('axis')} of {src.get('input')})" if isinstance(src, dict) and "input" in src else ""))
        for b in m["buffers"]:
            w(f"public readonly ComputeBuffer {self.bufs[b['name']]};  // {b['role']} {b['dtype']} "
              f"[{', '.join(map(str, b['shape']))}]{', zeroed each run' if b.get('zero_init') else ''}")
        for o in self.outputs:
            t = {"f": "double", "i": "long", "b": "bool"}[G.VALUE_TYPE[o["dtype"]]]
            w(f"public {t} {self.out_props[o['index']]} {{ get; private set; }}  // return value {o['index']} ({o['dtype']})")
        for f, _, entry, _ in self.files:
            w(f"readonly int {self.kernel_field[f]};  // {entry}")
        w("readonly int _kCopy, _kFill;")
        w("readonly uint[] _word = new uint[1];")
        w()
        # constructor
        params = ", ".join(f"long {ident}" for ident in self.dims.values())
        w(f"/// <summary>Creates the buffers for these dims; `shader` is {self.program}.compute.</summary>")
        w.open(f"public {self.cls}(ComputeShader shader{', ' if params else ''}{params})")
        w("Shader = shader;")
        for d in m.get("dims", []):
            if d.get("value") is not None:
                ident = self.dims[d["name"]]
                w(f"if ({ident} != {int(d['value'])}L) throw new ArgumentException(\"{d['name']} was fixed to "
                  f"{int(d['value'])} at export; re-export for another size\");")
        for ident in self.dims.values():
            w(f"this.{ident} = {ident};")
        e = self.emitter()
        for b in m["buffers"]:
            w(f"{self.bufs[b['name']]} = NewBuffer({e.as_int(b['count'])});")
        for f, _, entry, _ in self.files:
            w(f"{self.kernel_field[f]} = shader.FindKernel(\"{entry}\");")
        w("_kCopy = shader.FindKernel(\"ember_copy\");")
        w("_kFill = shader.FindKernel(\"ember_fill\");")
        w.close()
        w()
        # Run
        args = ", ".join(f"{ {'f32': 'float', 'i32': 'int', 'u32': 'uint', 'bool': 'bool'}[dt]} {ident}"
                         for ident, dt in self.scalars.values())
        w("/// <summary>Runs the program once: its host plan, in order. Inputs are read from and outputs")
        w("/// written to the public buffers.</summary>")
        w.open(f"public void Run({args})")
        for v, (ident, dt) in self.values.items():
            t = {"f": "double", "i": "long", "b": "bool"}[G.VALUE_TYPE[dt]]
            w(f"{t} {ident} = {'false' if t == 'bool' else '0'};")
        for b in m["buffers"]:
            if b.get("zero_init"):
                w(f"Fill({self.bufs[b['name']]}, 0L, {e.as_int(b['count'])}, 0u);")
        self.steps(w, e, m["plan"])
        for o in self.outputs:
            w(f"{self.out_props[o['index']]} = {self.value_as(e, o['value'], o['dtype'])};")
        w.close()
        w()
        self.helpers(w)
        w.close()
        return w.text()

    def value_as(self, e, text, dtype):
        """C# code of `text` converted to dtype as C would (f32 rounds, i32/u32 wrap)."""
        if dtype == "f32":
            return f"(double)(float){e.as_float(text)}"
        if dtype == "i32":
            return f"(long)unchecked((int){e.as_int(text)})"
        if dtype == "u32":
            return f"(long)unchecked((uint){e.as_int(text)})"
        return e.as_bool(text)

    def steps(self, w, e, steps):
        for s in steps:
            getattr(self, "step_" + s["op"])(w, e, s)

    def step_dispatch(self, w, e, s):
        k = self.kernels[s["kernel"]]
        kf = self.kernel_field[k["file"]]
        w.open("")  # a block: gx/gy/gz are local to it
        g = list(s.get("groups") or [])
        g += ["1"] * (3 - len(g))
        w(f"long gx = {e.as_int(g[0])}, gy = {e.as_int(g[1])}, gz = {e.as_int(g[2])};")
        for b in k["bindings"]:
            var = b.get("var", f"m{b['binding']}")
            w(f"Shader.SetBuffer({kf}, \"{var}\", {self.bufs[b['buffer']]});")
        fields = {f["name"]: f for f in k.get("params", {}).get("fields", [])}
        floats = self.float_members[k["file"]]
        for name, value in s.get("params", {}).items():
            t = fields.get(name, {}).get("type", "u32")
            if t == "f32" and name in floats:
                w(f"Shader.SetFloat(\"{name}\", (float){e.as_float(value)});")
            elif t == "f32":
                w(f"Shader.SetInt(\"{name}\", Bits((float){e.as_float(value)}));")
            elif t == "bool":
                w(f"Shader.SetInt(\"{name}\", {e.as_bool(value)} ? 1 : 0);")
            else:
                w(f"Shader.SetInt(\"{name}\", unchecked((int){e.as_int(value)}));")
        w(f"Dispatch({kf}, gx, gy, gz);")
        w.close()

    def step_loop(self, w, e, s):
        var = s.get("var") or "_i"
        ident = _ident(var, set(self.dims.values()) | {i for i, _ in self.scalars.values()})
        inner = E.Emitter("cs", e.names)
        inner.bind(var, ident, "i")
        if "count" in s and "end" not in s:
            begin, cond, step = "0L", f"{ident} < {e.as_int(s['count'])}", f"{ident}++"
        else:
            begin = e.as_int(s.get("begin", "0"))
            end = e.as_int(s["end"])
            st = str(s.get("step", "1")).strip()
            if re.fullmatch(r"\d+", st) and int(st) > 0:
                cond, step = f"{ident} < {end}", (f"{ident}++" if st == "1" else f"{ident} += {st}L")
            elif re.fullmatch(r"-\d+", st):
                cond, step = f"{ident} > {end}", f"{ident} -= {st[1:]}L"
            else:
                stc = e.as_int(st)
                cond, step = f"({stc} > 0L ? {ident} < {end} : ({stc} < 0L && {ident} > {end}))", f"{ident} += {stc}"
        w.open(f"for (long {ident} = {begin}; {cond}; {step})")
        self.steps(w, inner, s["body"])
        w.close()

    def step_if(self, w, e, s):
        w.open(f"if ({e.as_bool(s['cond'])})")
        self.steps(w, e, s.get("then", []))
        if s.get("else"):
            w.close()
            w.open("else")
            self.steps(w, e, s["else"])
        w.close()

    def step_let(self, w, e, s):
        ident, dt = self.values[s["var"]]
        w(f"{ident} = {self.value_as(e, s['value'], dt)};")

    step_set = step_let

    def step_readback(self, w, e, s):
        ident, dt = self.values[s["into"]]
        word = f"ReadWord({self.bufs[s['buffer']]}, {e.as_int(s.get('index', '0'))})"
        conv = {"f32": f"(double)FromBits({word})", "i32": f"(long)unchecked((int){word})", "u32": f"(long){word}",
                "bool": f"{word} != 0u"}[s.get("dtype") or self.buf_specs[s["buffer"]]["dtype"]]
        w(f"{ident} = {conv};")

    def step_copy(self, w, e, s):
        w(f"Copy({self.bufs[s['src']]}, {e.as_int(s.get('src_offset', '0'))}, {self.bufs[s['dst']]}, "
          f"{e.as_int(s.get('dst_offset', '0'))}, {e.as_int(s['count'])});")

    def step_fill(self, w, e, s):
        buf = self.buf_specs[s["buffer"]]
        v = s["value"]
        if isinstance(v, int) and not isinstance(v, bool):
            word = f"0x{v & 0xFFFFFFFF:08X}u"
        elif buf["dtype"] == "f32":
            word = f"unchecked((uint)Bits((float){e.as_float(v)}))"
        elif buf["dtype"] == "bool":
            word = f"({e.as_bool(v)} ? 1u : 0u)"
        else:
            word = f"unchecked((uint){e.as_int(v)})"
        count = e.as_int(s["count"]) if "count" in s else f"{self.bufs[s['buffer']]}.count"
        w(f"Fill({self.bufs[s['buffer']]}, {e.as_int(s.get('offset', '0'))}, {count}, {word});")

    def helpers(self, w):
        """Copy and Fill, Dispose (one Release per buffer), then the fixed private helpers."""
        w.lines += _CS_COPY_FILL.rstrip("\n").split("\n")
        w()
        w("/// <summary>Releases every buffer.</summary>")
        w.open("public void Dispose()")
        for ident in self.bufs.values():
            w(f"{ident}.Release();")
        w.close()
        w()
        w.lines += _CS_PRIVATE.rstrip("\n").split("\n")

    # --- the sample MonoBehaviour
    def sample(self, feedback, display, scalar_defaults):
        w = _Writer()
        m = self.m
        cls = self.cls + "Sample"
        w(f"// {cls}.cs: generated by Ember's em.export(engine=\"unity\"). Steps {self.program} every frame")
        w("// (its outputs fed back into the inputs they replace) and draws one buffer as points through")
        w("// `material` (EmberPoints.shader). Attach to a GameObject; assign the compute shader and material.")
        w("using UnityEngine;")
        w()
        w.open(f"public class {cls} : MonoBehaviour")
        w(f"[Tooltip(\"{self.program}.compute\")]")
        w("public ComputeShader shader;")
        w("[Tooltip(\"A material with the Ember/Points shader (EmberPoints.shader)\")]")
        w("public Material material;")
        for d in m.get("dims", []):
            w(f"public int {self.dims[d['name']]} = {int(d.get('value') or 1024)};")
        for name, (ident, dt) in self.scalars.items():
            v = scalar_defaults.get(name, 0.01 if dt == "f32" else (False if dt == "bool" else 1))
            lit = _cs_float(v) if dt == "f32" else (("true" if v else "false") if dt == "bool" else
                                                      (f"{int(v)}u" if dt == "u32" else str(int(v))))
            w(f"public {dict(f32='float', i32='int', u32='uint', bool='bool')[dt]} {ident} = {lit};")
        w("[Tooltip(\"Inputs start uniform in [-spread, spread]\")]")
        w("public float spread = 2.0f;")
        w(f"{self.cls} sim;")
        w()
        w.open("void Start()")
        dims = ", ".join(self.dims.values())
        w(f"sim = new {self.cls}(shader{', ' if dims else ''}{dims});")
        w("var rng = new System.Random(1);")
        first = True
        for b in m["buffers"]:
            if b["role"] not in ("input", "inout"):
                continue
            ident = self.bufs[b["name"]]
            if b["dtype"] == "f32":
                scale = "spread" if first else "0.0f"
                first = False
                w(f"RandomFloats(sim.{ident}, rng, {scale});")
            else:
                w(f"RandomWords(sim.{ident}, rng, {'2' if b['dtype'] == 'bool' else '100'});")
        w.close()
        w()
        w.open("void Update()")
        args = ", ".join(ident for ident, _ in self.scalars.values())
        w(f"sim.Run({args});")
        for o, i in feedback.items():
            w(f"sim.Copy(sim.{self.bufs[o]}, 0L, sim.{self.bufs[i]}, 0L, sim.{self.bufs[o]}.count);  // {o} -> {i}")
        if display:
            shown = feedback.get(display, display)
            spec = self.buf_specs[display]
            per = 3 if spec["shape"][-1:] == ["3"] or spec["shape"][-1:] == [3] else 1
            w(f"material.SetBuffer(\"_EmberPositions\", sim.{self.bufs[shown]});")
            w(f"Graphics.DrawProcedural(material, new Bounds(Vector3.zero, Vector3.one * 1000.0f), MeshTopology.Points, "
              f"sim.{self.bufs[shown]}.count / {per});")
        w.close()
        w()
        w.open("void OnDestroy()")
        w("if (sim != null) sim.Dispose();")
        w.close()
        w()
        w.open("static void RandomFloats(ComputeBuffer b, System.Random rng, float scale)")
        w("var a = new float[b.count];")
        w("for (int i = 0; i < a.Length; i++) a[i] = scale * (float)(2.0 * rng.NextDouble() - 1.0);")
        w("b.SetData(a);")
        w.close()
        w()
        w.open("static void RandomWords(ComputeBuffer b, System.Random rng, int below)")
        w("var a = new int[b.count];")
        w("for (int i = 0; i < a.Length; i++) a[i] = rng.Next(below);")
        w("b.SetData(a);")
        w.close()
        w.close()
        return w.text()


def write_unity(manifest, export_dir, out_dir, *, feedback=None, display=None, scalar_defaults=None):
    """Writes the Unity glue for an `hlsl` export (module docstring) into out_dir; returns the
    paths written. `feedback` ({output: input}) and `display` (a buffer name) shape the sample
    MonoBehaviour; by default outputs feed the inputs of the same position, dtype and shape, and
    the first f32 output of shape [.., 3] is drawn."""
    G.check_target(manifest, "hlsl", "unity")
    gen = _UnityGen(manifest, export_dir)
    feedback = G.default_feedback(manifest) if feedback is None else dict(feedback)
    display = G.default_display(manifest) if display is None else display
    os.makedirs(out_dir, exist_ok=True)
    files = {
        f"{gen.program}.compute": gen.compute(),
        f"{gen.cls}.cs": gen.cs_class(),
        f"{gen.cls}Sample.cs": gen.sample(feedback, display, dict(scalar_defaults or {})),
        "EmberPoints.shader": _POINTS_SHADER,
    }
    written = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(path)
    return written
