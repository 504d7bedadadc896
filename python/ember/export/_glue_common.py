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


def default_feedback(manifest):
    """Pairs each output buffer with the input of the same position, dtype and shape: the state a
    simulation step returns and takes back next step ({output: input}), as the N-body's (X, V)."""
    ins = [b for b in manifest["buffers"] if b["role"] in ("input", "inout")]
    outs = [b for b in manifest["buffers"] if b["role"] == "output"]
    pairs = {}
    for o, i in zip(outs, ins):
        if o["dtype"] == i["dtype"] and o["shape"] == i["shape"] and i["role"] == "input":
            pairs[o["name"]] = i["name"]
    return pairs


def default_display(manifest):
    """The buffer a sample scene draws: the first f32 output of shape [.., 3], else the first f32
    output, else the first f32 buffer."""
    bufs = manifest["buffers"]
    for pick in (lambda b: b["role"] == "output" and b["dtype"] == "f32" and b["shape"][-1:] == ["3"],
                 lambda b: b["role"] == "output" and b["dtype"] == "f32",
                 lambda b: b["dtype"] == "f32"):
        for b in bufs:
            if pick(b):
                return b["name"]
    return bufs[0]["name"] if bufs else None


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
