"""Runs the GDScript class Ember's Godot glue generates (ember/<program>_ember.gd) outside Godot, for
the tests: a small interpreter of the GDScript subset that class is written in (on gdtoolkit's
parser; run with the Python of tools/bootstrap-checkers' venv) and a recording stand-in for Godot's
RenderingDevice that logs each dispatch (kernel file, groups, parameter words by byte offset),
copy, fill and readback in tools/export_runner's --trace format. Not a Godot run: it checks that the
generated plan is well-formed GDScript of this subset, calls RenderingDevice methods with sensible
arguments, and asks for what the runner does.

usage: gd_plan_run.py SCRIPT.gd INIT_ARGS_JSON RUN_ARGS_JSON READBACK_WORDS_JSON
"""
import json
import re
import struct
import sys
from pathlib import Path

from gdtoolkit.parser import parser
from lark import Token

LOG = []


class GdError(Exception):
    pass


class Rid:
    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)


class PackedByteArray(bytearray):
    def resize(self, n):
        if n < len(self):
            del self[n:]
        else:
            self.extend(b"\0" * (n - len(self)))

    def size(self):
        return len(self)

    def encode_u32(self, off, v):
        assert 0 <= v <= 0xFFFFFFFF, f"encode_u32({v})"
        struct.pack_into("<I", self, off, v)

    def encode_float(self, off, v):
        struct.pack_into("<f", self, off, float(v))

    def decode_u32(self, off):
        return struct.unpack_from("<I", self, off)[0]

    def decode_s32(self, off):
        return struct.unpack_from("<i", self, off)[0]

    def decode_float(self, off):
        return struct.unpack_from("<f", self, off)[0]


class PackedInt32Array(list):
    def resize(self, n):
        del self[n:]
        self.extend([0] * (n - len(self)))

    def fill(self, v):
        assert -2**31 <= v < 2**31, f"PackedInt32Array.fill({v})"
        self[:] = [v] * len(self)

    def to_byte_array(self):
        return PackedByteArray(struct.pack(f"<{len(self)}i", *self))


class RDUniform:
    def __init__(self):
        self.ids, self.binding, self.uniform_type = [], -1, None

    def add_id(self, rid):
        self.ids.append(rid)


class ShaderFile:
    def __init__(self, path):
        self.path = path

    def get_spirv(self):
        return Rid("spirv", path=self.path)


class RenderingDevice:
    UNIFORM_TYPE_STORAGE_BUFFER = "storage_buffer"

    def __init__(self, shader_dir, readbacks):
        self.shader_dir, self.readbacks, self.names, self.list = shader_dir, list(readbacks), {}, None

    def storage_buffer_create(self, size, data=None):
        assert size > 0 and size % 4 == 0, size
        return Rid("buffer", size=size, name="?")

    def shader_create_from_spirv(self, spirv):
        assert spirv.kind == "spirv"
        return Rid("shader", path=spirv.path)

    def compute_pipeline_create(self, shader):
        return Rid("pipeline", stem=Path(shader.path).stem)

    def uniform_set_create(self, uniforms, shader, set_index):
        assert set_index == 0 and all(u.uniform_type == "storage_buffer" and len(u.ids) == 1 for u in uniforms)
        return Rid("uniform_set", shader=shader, bindings={u.binding: u.ids[0] for u in uniforms})

    def compute_list_begin(self):
        assert self.list is None, "compute_list_begin inside a compute list"
        self.list = {"pipeline": None, "set": None, "push": b""}
        return 1

    def compute_list_bind_compute_pipeline(self, lst, p):
        self.list["pipeline"] = p

    def compute_list_bind_uniform_set(self, lst, s, index):
        assert index == 0
        self.list["set"] = s

    def compute_list_set_push_constant(self, lst, data, size):
        assert size == len(data) and size % 16 == 0, f"push constants of {size} bytes"
        self.list["push"] = bytes(data)

    def compute_list_dispatch(self, lst, x, y, z):
        p = self.list["pipeline"]
        assert p is not None and self.list["set"] is not None
        assert Path(self.list["set"].shader.path).stem == p.stem, "uniform set of another shader"
        push = self.list["push"]
        for rid in self.list["set"].bindings.values():
            if rid.name.startswith("param:"):
                assert not push, "push constants and a parameter buffer"
                push = rid.data
        words = " ".join(f"@{i * 4}=0x{w:08X}" for i, w in enumerate(struct.unpack(f"<{len(push) // 4}I", push)))
        LOG.append(f"dispatch {p.stem} {x} {y} {z} {words}".rstrip())

    def compute_list_end(self):
        assert self.list is not None
        self.list = None

    def buffer_update(self, buf, off, size, data):
        assert size == len(data) and off + size <= buf.size, (buf.name, off, size)
        if buf.name.startswith("param:"):  # the words of the next dispatch of that kernel
            buf.data = bytes(data)
            return
        words = struct.unpack(f"<{size // 4}I", bytes(data))
        assert len(set(words)) <= 1, "buffer_update inside run() is a fill"
        LOG.append(f"fill {buf.name} {off // 4} {size // 4} 0x{words[0]:08X}")

    def buffer_clear(self, buf, off, size):
        assert off + size <= buf.size
        LOG.append(f"fill {buf.name} {off // 4} {size // 4} 0x00000000")

    def buffer_copy(self, src, dst, so, do, size):
        assert so + size <= src.size and do + size <= dst.size
        LOG.append(f"copy {src.name} {dst.name} {so // 4} {do // 4} {size // 4}")

    def buffer_get_data(self, buf, off=0, size=0):
        assert size == 4 and off + size <= buf.size
        w = self.readbacks.pop(0) if self.readbacks else 0
        LOG.append(f"readback {buf.name} {off // 4} = 0x{w:08X}")
        return PackedByteArray(struct.pack("<I", w))

    def submit(self):
        pass

    def sync(self):
        pass

    def free_rid(self, rid):
        pass


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


BUILTINS = {
    "mini": min, "maxi": max, "minf": min, "maxf": max, "absi": abs, "absf": abs, "int": int, "float": float,
    "PackedByteArray": PackedByteArray, "PackedInt32Array": PackedInt32Array,
    "range": lambda *a: range(*a),
}


class Return(Exception):
    def __init__(self, value):
        self.value = value


class Instance:
    """An instance of the class in SCRIPT: members, functions, and the interpreter."""

    def __init__(self, tree, rd):
        self.funcs, self.members, self.consts, self.rd = {}, {}, {}, rd
        for node in tree.children:
            if node.data == "func_def":
                self.funcs[str(node.children[0].children[0])] = node
            elif node.data == "static_func_def":
                f = node.children[0]
                self.funcs[str(f.children[0].children[0])] = f
            elif node.data == "class_var_stmt":
                v = node.children[0]
                self.members[str(v.children[0])] = self.eval(v.children[-1], {}) if v.data.endswith("assgnd") else None
            elif node.data == "const_stmt":
                c = node.children[0]
                self.consts[str(c.children[0])] = self.eval(c.children[-1], {})

    def call(self, name, args):
        f = self.funcs[name]
        header = f.children[0]
        params = [a for a in header.children[1].children]
        local = {}
        for i, p in enumerate(params):
            pname = str(p.children[0])
            if i < len(args):
                local[pname] = args[i]
            elif len(p.children) > 2 or p.data == "func_arg_inf":
                local[pname] = self.eval(p.children[-1], local)
            else:
                raise GdError(f"{name}: missing argument {pname}")
        if len(args) > len(params):
            raise GdError(f"{name} takes {len(params)} arguments, got {len(args)}")
        try:
            self.block(f.children[1:], local)
        except Return as r:
            return r.value
        return None

    def block(self, stmts, local):
        for s in stmts:
            self.stmt(s, local)

    def stmt(self, s, local):
        k = s.data
        if k == "expr_stmt":
            self.eval(s.children[0], local)
        elif k == "func_var_stmt":
            v = s.children[0]
            local[str(v.children[0])] = self.eval(v.children[-1], local) if v.data != "func_var_typed" else None
        elif k == "return_stmt":
            raise Return(self.eval(s.children[0], local) if s.children else None)
        elif k == "pass_stmt":
            pass
        elif k == "if_stmt":
            for br in s.children:
                if br.data == "else_branch":
                    self.block(br.children, local)
                    return
                if self.eval(br.children[0], local):
                    self.block(br.children[1:], local)
                    return
        elif k == "for_stmt":
            name, it = str(s.children[0]), self.eval(s.children[1], local)
            if isinstance(it, int):
                it = range(it)
            for v in list(it):
                local[name] = v
                self.block(s.children[2:], local)
        else:
            raise GdError(f"statement {k} is outside the subset")

    def lookup(self, name, local):
        for scope in (local, self.members, self.consts):
            if name in scope:
                return scope[name]
        if name in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[name]
        if name == "RenderingDevice":
            return RenderingDevice
        if name == "RDUniform":
            return RDUniform
        raise GdError(f"unknown name {name}")

    def assign(self, target, value, local):
        if isinstance(target, Token):
            name = str(target)
            if name in local:
                local[name] = value
            elif name in self.members:
                self.members[name] = value
            else:
                raise GdError(f"assignment to undeclared {name}")
        elif target.data == "getattr":
            setattr(self.eval(target.children[0], local), str(target.children[2]), value)
        elif target.data == "subscr_expr":
            self.eval(target.children[0], local)[self.eval(target.children[1], local)] = value
        else:
            raise GdError(f"assignment target {target.data}")

    def binop(self, op, a, b):
        if op == "/":
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                if b == 0:
                    raise GdError("integer division by zero")
                return _c_div(a, b)
            return a / b
        if op == "%":
            if b == 0:
                raise GdError("modulo by zero")
            return a - _c_div(a, b) * b
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "&": lambda: a & b,
                "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
                "==": lambda: a == b, "!=": lambda: a != b}[op]()

    def eval(self, n, local):
        if isinstance(n, Token):
            t = str(n)
            if re.fullmatch(r"-?(0x[0-9A-Fa-f_]+|0b[01_]+|[0-9_]+)", t):
                return int(t.replace("_", ""), 0)
            if re.fullmatch(r"-?[0-9_]*\.?[0-9_]*(e[-+]?[0-9]+)?", t) and any(ch.isdigit() for ch in t):
                return float(t.replace("_", ""))
            if n.type.endswith("STRING"):
                return t[1:-1]
            return self.lookup(t, local)
        k = n.data
        c = n.children
        if k in ("expr", "par_expr"):
            return self.eval(c[0], local)
        if k == "string":
            return str(c[0])[1:-1]
        if k == "assnmnt_expr":
            assert str(c[1]) == "=", c[1]
            self.assign(c[0], self.eval(c[2], local), local)
            return None
        if k in ("arith_expr", "mdr_expr", "asless_arith_expr", "asless_mdr_expr", "comparison", "asless_comparison",
                 "bitw_and"):
            v = self.eval(c[0], local)
            for i in range(1, len(c), 2):
                v = self.binop(str(c[i]), v, self.eval(c[i + 1], local))
            return v
        if k in ("and_test", "asless_and_test"):
            return all(self.eval(x, local) for x in c if not (isinstance(x, Token) and str(x) == "and"))
        if k in ("or_test", "asless_or_test"):
            return any(self.eval(x, local) for x in c if not (isinstance(x, Token) and str(x) == "or"))
        if k in ("asless_actual_not_test", "actual_not_test", "not_test"):
            return not self.eval(c[-1], local)
        if k in ("asless_actual_neg_expr", "actual_neg_expr", "neg_expr"):
            return -self.eval(c[-1], local)
        if k in ("test_expr", "asless_test_expr"):
            return self.eval(c[0], local) if self.eval(c[2], local) else self.eval(c[4], local)
        if k == "array":
            return [self.eval(x, local) for x in c]
        if k == "dict":
            return {self.eval(e.children[0], local): self.eval(e.children[1], local) for e in c}
        if k == "subscr_expr":
            return self.eval(c[0], local)[self.eval(c[1], local)]
        if k == "getattr":
            obj = self.eval(c[0], local)
            return getattr(obj, str(c[2]))
        if k == "getattr_call":
            g = c[0]
            obj, meth = self.eval(g.children[0], local), str(g.children[2])
            args = [self.eval(x, local) for x in c[1:]]
            if meth == "new":
                return obj()
            if isinstance(obj, dict) and meth in ("has", "clear", "size", "keys"):
                return {"has": lambda: args[0] in obj, "clear": obj.clear, "size": lambda: len(obj),
                        "keys": lambda: list(obj)}[meth]()
            if isinstance(obj, list) and meth == "append":
                return obj.append(args[0])
            return getattr(obj, meth)(*args)
        if k == "standalone_call":
            name = str(c[0])
            args = [self.eval(x, local) for x in c[1:]]
            if name in self.funcs:
                return self.call(name, args)
            if name == "assert":
                if not args[0]:
                    raise GdError(f"assert failed: {args[1:]}")
                return None
            if name == "load":
                return ShaderFile(args[0])
            if name in BUILTINS:
                return BUILTINS[name](*args)
            raise GdError(f"unknown function {name}")
        raise GdError(f"expression {k} is outside the subset")


def main():
    script, init_args, run_args, readbacks = sys.argv[1], *map(json.loads, sys.argv[2:5])
    tree = parser.parse(Path(script).read_text())
    rd = RenderingDevice(Path(script).parent, readbacks)
    inst = Instance(tree, rd)
    inst.call("_init", [rd, *init_args])
    for name, rid in inst.members["buffers"].items():
        rid.name = name
    for name, rid in inst.members["_param_buffers"].items():
        rid.name = "param:" + name
    for f in {Path(p.path).name for p in inst.members["_shaders"].values()}:
        assert (Path(script).parent / f).exists(), f"missing shader {f}"
    inst.call("run", run_args)
    print("\n".join(LOG))


if __name__ == "__main__":
    main()
