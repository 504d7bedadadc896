"""The manifest's plan expressions (docs/export.md: integer and float literals, inf, nan, names,
+ - * / % with C int64 semantics and a zero divisor giving 0, unary - and !, comparisons, && ||, ?:,
min/max/abs, floordiv/floormod, select) translated into C# and GDScript source for the engine glue
(unity.py, godot.py). Each translated expression has a type: "i" (a 64-bit integer), "f" (a float,
double precision) or "b" (a bool); operands are converted as C would convert them. Division by a
value that is not a non-zero literal calls the generated class's helpers (HELPERS names them)."""
import re

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*(?:[eE][-+]?\d+)?f?|\d+[eE][-+]?\d+f?|\.\d+(?:[eE][-+]?\d+)?f?|\d+f)|(\d+)|"
                    r"([A-Za-z_][A-Za-z_0-9]*)|(\|\||&&|==|!=|<=|>=|[-+*/%()<>!?:,]))")
_LEVELS = [["||"], ["&&"], ["==", "!="], ["<=", ">=", "<", ">"], ["+", "-"], ["*", "/", "%"]]


class ExprError(ValueError):
    """A plan expression that does not parse or names something unknown."""


def parse(text):
    """The AST of `text`: tuples ("num", value, is_float), ("name", id), ("un", op, a),
    ("bin", op, a, b), ("call", fn, [args]), ("tern", c, a, b)."""
    text = str(text)
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ExprError(f"bad expression {text!r} at {text[pos:]!r}")
        pos = m.end()
        if m.group(1):
            toks.append(("num", float(m.group(1).rstrip("f")), True))
        elif m.group(2):
            toks.append(("num", int(m.group(2)), False))
        elif m.group(3):
            toks.append(("id", m.group(3)))
        else:
            toks.append(("op", m.group(4)))
    p = _Parser(toks, text)
    node = p.ternary()
    if p.i != len(toks):
        raise ExprError(f"bad expression {text!r}: unexpected {toks[p.i][1]!r}")
    return node


class _Parser:
    def __init__(self, toks, text):
        self.toks, self.i, self.text = toks, 0, text

    def peek_op(self, *ops):
        t = self.toks[self.i] if self.i < len(self.toks) else None
        return t is not None and t[0] == "op" and t[1] in ops

    def take(self, op):
        if not self.peek_op(op):
            raise ExprError(f"bad expression {self.text!r}: expected {op!r}")
        self.i += 1

    def ternary(self):
        c = self.binary(0)
        if self.peek_op("?"):
            self.i += 1
            a = self.ternary()
            self.take(":")
            return ("tern", c, a, self.ternary())
        return c

    def binary(self, level):
        if level == len(_LEVELS):
            return self.unary()
        lhs = self.binary(level + 1)
        while self.peek_op(*_LEVELS[level]):
            op = self.toks[self.i][1]
            self.i += 1
            lhs = ("bin", op, lhs, self.binary(level + 1))
        return lhs

    def unary(self):
        if self.peek_op("-", "!", "+"):
            op = self.toks[self.i][1]
            self.i += 1
            a = self.unary()
            return a if op == "+" else ("un", op, a)
        return self.primary()

    def primary(self):
        if self.i >= len(self.toks):
            raise ExprError(f"bad expression {self.text!r}: unexpected end")
        t = self.toks[self.i]
        self.i += 1
        if t[0] == "num":
            return t
        if t[0] == "op" and t[1] == "(":
            n = self.ternary()
            self.take(")")
            return n
        if t[0] == "id":
            if self.peek_op("("):
                self.i += 1
                args = [self.ternary()]
                while self.peek_op(","):
                    self.i += 1
                    args.append(self.ternary())
                self.take(")")
                want = {"abs": 1, "select": 3}.get(t[1], 2)
                if t[1] not in ("min", "max", "abs", "floordiv", "floormod", "select") or len(args) != want:
                    raise ExprError(f"bad expression {self.text!r}: unknown function {t[1]}/{len(args)}")
                return ("call", t[1], args)
            return ("name", t[1])
        raise ExprError(f"bad expression {self.text!r}: unexpected {t[1]!r}")


# The division helpers each generated class defines, per language: (a, b) -> a / b with b == 0
# giving 0 (C truncation), a % b likewise, and the floor-rounded pair.
HELPERS = {"cs": {"/": "Div", "%": "Mod", "floordiv": "FloorDiv", "floormod": "FloorMod"},
           "gd": {"/": "_div", "%": "_mod", "floordiv": "_floordiv", "floormod": "_floormod"}}


class Emitter:
    """Translates expressions for one language ("cs" or "gd"). `names` maps each name an
    expression may use to (code, type)."""

    def __init__(self, lang, names):
        assert lang in ("cs", "gd")
        self.lang, self.names = lang, dict(names)

    def bind(self, name, code, typ):
        """Makes `name` available as `code` of type `typ` ("i", "f" or "b")."""
        self.names[name] = (code, typ)

    def expr(self, text_or_node):
        """(code, type) of an expression (text or AST)."""
        node = parse(text_or_node) if not isinstance(text_or_node, tuple) else text_or_node
        return self._emit(node)

    def as_int(self, text):
        return self._conv(self.expr(text), "i")

    def as_float(self, text):
        return self._conv(self.expr(text), "f")

    def as_bool(self, text):
        return self._conv(self.expr(text), "b")

    def _conv(self, ct, want):
        code, t = ct
        if t == want:
            return code
        cs = self.lang == "cs"
        if want == "b":
            return f"({code} != 0)"
        if t == "b":
            one, zero = ("1L", "0L") if want == "i" else ("1.0", "0.0")
            return f"({code} ? {one} : {zero})" if cs else (f"int({code})" if want == "i" else f"float({code})")
        if want == "f":
            return f"((double){code})" if cs else f"float({code})"
        return f"((long){code})" if cs else f"int({code})"

    def _emit(self, n):
        cs = self.lang == "cs"
        k = n[0]
        if k == "num":
            if n[2]:
                return repr(float(n[1])), "f"
            return (f"{n[1]}L" if cs else str(n[1])), "i"
        if k == "name" and n[1] in ("inf", "nan") and n[1] not in self.names:
            if cs:
                return ("double.PositiveInfinity" if n[1] == "inf" else "double.NaN"), "f"
            return ("INF" if n[1] == "inf" else "NAN"), "f"
        if k == "name":
            if n[1] not in self.names:
                raise ExprError(f"unknown name {n[1]!r} in a plan expression (known: {', '.join(sorted(self.names))})")
            return self.names[n[1]]
        if k == "un":
            a = self._emit(n[2])
            if n[1] == "!":
                return (f"(!{self._conv(a, 'b')})" if cs else f"(not {self._conv(a, 'b')})"), "b"
            t = "f" if a[1] == "f" else "i"
            return f"(-{self._conv(a, t)})", t
        if k == "tern":
            c = self._conv(self._emit(n[1]), "b")
            a, b = self._emit(n[2]), self._emit(n[3])
            t = "f" if "f" in (a[1], b[1]) else ("b" if a[1] == b[1] == "b" else "i")
            a, b = self._conv(a, t), self._conv(b, t)
            return (f"({c} ? {a} : {b})" if cs else f"({a} if {c} else {b})"), t
        if k == "call" and n[1] == "select":
            return self._emit(("tern",) + tuple(n[2]))
        if k == "call" and n[1] in ("floordiv", "floormod"):
            a, b = (self._emit(x) for x in n[2])
            t = "f" if "f" in (a[1], b[1]) else "i"
            return f"{HELPERS[self.lang][n[1]]}({self._conv(a, t)}, {self._conv(b, t)})", t
        if k == "call":
            args = [self._emit(a) for a in n[2]]
            t = "f" if any(a[1] == "f" for a in args) else "i"
            conv = [self._conv(a, t) for a in args]
            if cs:
                fn = {"min": "Math.Min", "max": "Math.Max", "abs": "Math.Abs"}[n[1]]
            else:
                fn = n[1] + ("f" if t == "f" else "i")  # mini maxi absi minf maxf absf
            return f"{fn}({', '.join(conv)})", t
        op, a, b = n[1], self._emit(n[2]), self._emit(n[3])
        if op in ("&&", "||"):
            word = op if cs else ("and" if op == "&&" else "or")
            return f"({self._conv(a, 'b')} {word} {self._conv(b, 'b')})", "b"
        t = "f" if "f" in (a[1], b[1]) else "i"
        x, y = self._conv(a, t), self._conv(b, t)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return f"({x} {op} {y})", "b"
        if op == "%" and t == "f":
            return (f"({x} % {y})" if cs else f"fmod({x}, {y})"), "f"  # C#'s double % is C's fmod
        if op in ("/", "%") and t == "i" and not (n[3][0] == "num" and not n[3][2] and n[3][1] != 0):
            return f"{HELPERS[self.lang][op]}({x}, {y})", "i"  # a zero divisor gives 0
        return f"({x} {op} {y})", t
