"""em.export: a compiled program's kernels as readable source files plus manifest.json (buffers,
bindings, parameter layouts and the host plan with symbolic dims), for running them without Ember
(docs/export.md). The manifest and the kernel files come from C++ (export/export_program.h), built
from the same lowered program and kernel interface Ember's own backends run."""
import importlib
import json
import os

from .. import _ember as _C

TARGETS = ("spirv", "glsl", "hlsl", "cpp")
ENGINES = ("unity", "godot")
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "manifest.schema.json")


def export(prog, out_dir, target, engine=None, example_args=None, dims=None):
    """export(prog, out_dir, target, engine=None, example_args=None, dims=None) -> dict

    Writes compiled program `prog`'s kernels for `target` ("spirv", "glsl", "hlsl" or "cpp"; "cuda"
    is not yet supported: ember.BackendError) as readable source files plus manifest.json into
    `out_dir`, and returns the manifest as a dict: the buffers to create, each kernel's bindings and
    parameter block, and the host plan (dispatches, loops, ifs, copies) with symbolic dims, so a
    host can run them without Ember (docs/export.md). `engine` ("unity" or "godot") adds engine glue
    under out_dir/<engine>. `example_args` (a call's arguments) or `dims` ({"N": 4096}) give values
    that the export fixes only for dims whose host math the manifest cannot express. The command
    line does the same: ``python3 -m ember export FILE:FUNCTION --target T --out DIR``.

    >>> import os, tempfile
    >>> @em.compile
    ... def blend(a: em.f32["N"], b: em.f32["N"], t: em.f32):
    ...     return a + (b - a) * t
    >>> out = tempfile.mkdtemp()
    >>> manifest = em.export(blend, out, target="glsl")
    >>> len(manifest["kernels"]), sorted(f for f in os.listdir(out) if f.endswith(".comp"))
    (1, ['blend_k0.comp'])
    """
    from .._program import Program, _signature
    from .. import _dtypes as D
    if not isinstance(prog, Program):
        raise _C.TypeError(f"em.export: expected a compiled program (@em.compile), got {type(prog).__name__}")
    if not isinstance(target, str) or target not in TARGETS + ("cuda",):
        raise _C.BackendError(f"em.export: unknown target {target!r} (expected spirv, glsl, hlsl or cpp)")
    if engine is not None and engine not in ENGINES:
        raise _C.BackendError(f"em.export: unknown engine {engine!r} (expected None, 'unity' or 'godot')")
    _, params = _signature(prog.fn)
    if any(not isinstance(spec, (D.TensorType, D.DType)) for _, spec in params):
        raise _C.CompileError(f"em.export: {prog.name} takes a Module or optimizer argument; export a program of "
                              "tensor and scalar arguments")
    fixed = dict(dims or {})
    if example_args is not None:
        fixed.update(_dims_of(prog.name, params, example_args))
    prog._trace()
    if prog._tracer is None:  # the tracer gave its program to a compile: trace again
        prog._traced_text = None
        prog._trace()
    manifest_text, files = _C.export_program(prog._tracer, target, sorted(fixed.items()))
    os.makedirs(out_dir, exist_ok=True)
    for name, data in files:
        _write(os.path.join(out_dir, name), data)
    _write(os.path.join(out_dir, "manifest.json"), manifest_text.encode())
    manifest = json.loads(manifest_text)
    if engine is not None:
        _engine_glue(engine, manifest, out_dir)
    return manifest


def _dims_of(name, params, example_args):
    """{dim name: value} from example arguments matched to the tensor annotations."""
    from .. import _dtypes as D
    args = list(example_args)
    if len(args) != len(params):
        raise _C.TypeError(f"em.export: example_args has {len(args)} values; {name} takes {len(params)}")
    found = {}
    for (pname, spec), a in zip(params, args):
        if not isinstance(spec, D.TensorType):
            continue
        shape = tuple(getattr(a, "shape", ()))
        if len(shape) != len(spec.dims):
            raise _C.ShapeError(f"em.export: example argument '{pname}' has shape {shape}; expected rank "
                                f"{len(spec.dims)}")
        for d, v in zip(spec.dims, shape):
            if isinstance(d, str):
                found.setdefault(d, int(v))
    return found


def _write(path, data):
    """Writes bytes atomically enough for an export directory (a whole file or none)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _engine_glue(engine, manifest, out_dir):
    """Calls ember.export.<engine>.write_<engine>(manifest, out_dir, out_dir/<engine>), imported lazily."""
    try:
        mod = importlib.import_module(f"{__name__}.{engine}")
    except ImportError as e:
        raise _C.BackendError(f"em.export: engine glue for {engine!r} is not available in this Ember build "
                              f"(ember/export/{engine}.py: {e})") from None
    fn = getattr(mod, f"write_{engine}", None)
    if fn is None:
        raise _C.BackendError(f"em.export: ember/export/{engine}.py has no write_{engine}(manifest, export_dir, out_dir)")
    fn(manifest, out_dir, os.path.join(out_dir, engine))
