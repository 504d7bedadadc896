"""What the Unity and Godot glue share: reading an export's manifest (names, types, which buffers feed
back into which for a simulation step) and naming things safely in the target language."""
import re

from . import _glue_expr as E

# dtype -> expression type of a host value (_glue_expr): f32 values are floats, bool values bools.
VALUE_TYPE = {"f32": "f", "i32": "i", "u32": "i", "bool": "b"}


def kernel_files(manifest):
    """Distinct kernel files in manifest order: [(file, source, entry, first kernel dict)]."""
    seen, out = set(), []
    for k in manifest["kernels"]:
        if k["file"] not in seen:
            seen.add(k["file"])
            out.append((k["file"], k.get("source", k["file"]), k.get("entry", "main"), k))
    return out


def plan_values(steps, found=None):
    """{name: dtype} of the host values a plan's steps define (readback `into`, let `var`)."""
    found = {} if found is None else found
    for s in steps:
        op = s["op"]
        if op == "readback":
            found.setdefault(s["into"], s.get("dtype", "i32"))
        elif op in ("let", "set"):
            found.setdefault(s["var"], s.get("dtype", "i32"))
        for key in ("body", "then", "else"):
            if key in s:
                plan_values(s[key], found)
    return found


def loop_vars(steps, found=None):
    """Names of every loop variable in the plan."""
    found = set() if found is None else found
    for s in steps:
        if s["op"] == "loop" and s.get("var"):
            found.add(s["var"])
        for key in ("body", "then", "else"):
            if key in s:
                loop_vars(s[key], found)
    return found


def _returned_buffers(manifest):
    """The program's returned buffers in return order (manifest `outputs`), else its output buffers."""
    bufs = {b["name"]: b for b in manifest["buffers"]}
    if manifest.get("outputs"):
        return [bufs[o["buffer"]] for o in sorted(manifest["outputs"], key=lambda o: o["index"]) if "buffer" in o]
    return [b for b in manifest["buffers"] if b["role"] == "output"]


def _input_buffers(manifest):
    """The program's buffer arguments in call order (manifest `args`), else its input buffers."""
    bufs = {b["name"]: b for b in manifest["buffers"]}
    if manifest.get("args"):
        return [bufs[a["name"]] for a in manifest["args"] if a["kind"] == "buffer"]
    return [b for b in manifest["buffers"] if b["role"] in ("input", "inout")]


def default_feedback(manifest):
    """Pairs the i-th returned buffer with the i-th buffer argument when their dtype and shape agree:
    the state a simulation step returns and takes back next step ({output: input}), as the N-body's
    (X, V) -> (X', V')."""
    pairs = {}
    for o, i in zip(_returned_buffers(manifest), _input_buffers(manifest)):
        if o["dtype"] == i["dtype"] and o["shape"] == i["shape"] and i["role"] == "input":
            pairs[o["name"]] = i["name"]
    return pairs


def default_display(manifest):
    """The buffer a sample scene draws: the first returned f32 buffer of shape [.., 3], else the
    first returned f32 buffer, else the first f32 buffer."""
    outs = _returned_buffers(manifest)
    for pick in (lambda b: b["dtype"] == "f32" and [str(x) for x in b["shape"][-1:]] == ["3"],
                 lambda b: b["dtype"] == "f32"):
        for b in outs:
            if pick(b):
                return b["name"]
    for b in manifest["buffers"]:
        if b["dtype"] == "f32":
            return b["name"]
    return manifest["buffers"][0]["name"] if manifest["buffers"] else None


def pascal(name):
    """nbody_step -> NbodyStep (a class name)."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name) if p]
    s = "".join(p[:1].upper() + p[1:] for p in parts) or "Program"
    return s if not s[0].isdigit() else "P" + s


def check_target(manifest, want, engine):
    """Raises ember.BackendError unless the export's target is `want`."""
    if manifest.get("target") != want:
        from .. import _ember as _C
        raise _C.BackendError(f"em.export engine={engine!r} needs a {want!r} export; this one is "
                              f"{manifest.get('target')!r} (export with target={want!r})")


def scalar_types(manifest):
    return {s["name"]: s["dtype"] for s in manifest.get("scalars", [])}


__all__ = ["E", "VALUE_TYPE", "kernel_files", "plan_values", "loop_vars", "default_feedback", "default_display",
           "pascal", "check_target", "scalar_types"]
