#!/usr/bin/env python3
"""Prints the constants of codegen/shader_math_text.h (the GPU dialects' float-only math): the bits
of 2/pi for the integer (Payne-Hanek) reduction of sin/cos/tan, pi/2 in pieces for the float
(Cody-Waite) reduction and as a float pair split for Dekker products, ln 2 in two pieces, the
Taylor coefficients of exp, sin, cos, sinh and log's atanh series, and a least-squares fit of
tanh on [0, 0.625] (needs NumPy). Each float is printed as the decimal of its exact value, so any
compiler (glslang reads a double, then rounds) gets the same float. Run: python3 gen_shader_math.py"""
from decimal import Decimal, getcontext
from fractions import Fraction
from math import factorial

import numpy as np

getcontext().prec = 150


def pi():  # the recipe from the decimal module's documentation
    getcontext().prec += 2
    three = Decimal(3)
    lasts, t, s, n, na, d, da = 0, three, 3, 1, 0, 0, 24
    while s != lasts:
        lasts = s
        n, na = n + na, na + 8
        d, da = d + da, da + 32
        t = (t * n) / d
        s += t
    getcontext().prec -= 2
    return +s


def ln2():
    getcontext().prec += 2
    s, k = Decimal(0), 1
    while True:  # ln 2 = sum 1 / (k 2^k)
        t = Decimal(1) / (k * Decimal(2) ** k)
        if t < Decimal(10) ** -(getcontext().prec):
            break
        s += t
        k += 1
    getcontext().prec -= 2
    return +s


PI = Fraction(pi())
LN2 = Fraction(ln2())


def f32(x):
    """x rounded to the nearest float32, as a Fraction."""
    return Fraction(float(np.float32(float(x))))


def lit(x):
    """A float literal of the float32 nearest x: the shortest decimal of its exact (double) value."""
    return repr(float(np.float32(float(x)))) + "f"


def top_bits(x, bits):
    """x truncated to `bits` significant bits."""
    e = 0
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    while Fraction(2) ** e > abs(x):
        e -= 1
    q = Fraction(2) ** (e - bits + 1)
    return Fraction(int(x / q)) * q


print("// 2/pi's bits 1..256 after the point, after one word of zeros (word i = bits 32(i-1)+1 .. 32i)")
two_over_pi = 2 / PI
words = [0]
frac = two_over_pi
for _ in range(8):
    frac *= 2**32
    w = int(frac)
    words.append(w)
    frac -= w
print(", ".join(f"0x{w:08x}u" for w in words))

half_pi = PI / 2
c1 = top_bits(half_pi, 16)
c2 = top_bits(half_pi - c1, 16)
c3 = top_bits(half_pi - c1 - c2, 16)
c4 = f32(half_pi - c1 - c2 - c3)
print("// pi/2 = C1 + C2 + C3 + C4: C1..C3 of 16 bits (their products with k < 2^8 are exact)")
print("C1..C4:", lit(c1), lit(c2), lit(c3), lit(c4), " residual %.3g" % float(half_pi - c1 - c2 - c3 - c4))
ph = f32(half_pi)
pl = f32(half_pi - ph)
print("// pi/2 = PH + PL (floats); PH = PHH + PHL, 12 bits each (Dekker's product)")
phh = top_bits(ph, 12)
print("PH PL PHH PHL:", lit(ph), lit(pl), lit(phh), lit(ph - phh))
print("2/pi:", lit(2 / PI))

l_hi = top_bits(LN2, 16)
print("// ln 2 = LN2_HI (16 bits) + LN2_LO; log2(e); ln 2")
print("LN2_HI LN2_LO:", lit(l_hi), lit(LN2 - l_hi), " LOG2E:", lit(1 / LN2), " LN2:", lit(LN2))
log2e = f32(1 / LN2)
print("log2(e) = L1 (12 bits) + L2:", lit(top_bits(log2e, 12)), lit(1 / LN2 - top_bits(log2e, 12)))

print("// expm1(r) = r + r^2 (E2 + r (E3 + ...)): 1/n!, n = 2..8")
print(", ".join(lit(Fraction(1, factorial(n))) for n in range(2, 9)))
print("// sin(r) = r + r^3 (S3 + z (S5 + ...)), z = r^2: (-1)^k/(2k+1)!, k = 1..4")
print(", ".join(lit(Fraction((-1) ** k, factorial(2 * k + 1))) for k in range(1, 5)))
print("// cos(r) = 1 - z/2 + z^2 (K4 + z (K6 + ...)): (-1)^k/(2k)!, k = 2..5")
print(", ".join(lit(Fraction((-1) ** k, factorial(2 * k))) for k in range(2, 6)))
print("// sinh(a) = a + a^3 (H3 + z (H5 + ...)): 1/(2k+1)!, k = 1..5")
print(", ".join(lit(Fraction(1, factorial(2 * k + 1))) for k in range(1, 6)))
print("// log: R(z) = z (2/3 + z (2/5 + z (2/7 + z 2/9)))")
print(", ".join(lit(Fraction(2, 2 * k + 1)) for k in range(1, 5)))


def tanh_fit(degree, xmax=0.625, nodes=600):
    """tanh(x) = x + x z P(z), z = x^2 in [0, xmax^2]: P by least squares on Chebyshev nodes, weighted
    so that the residual is tanh's error relative to tanh; coefficients (low first) as float32 and
    the max relative error of the float32 coefficients' polynomial on a fine grid (in float64)."""
    zmax = xmax * xmax
    z = zmax * (1 + np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)) / 2
    x = np.sqrt(z)
    w = x / np.tanh(x)
    a = np.vander(z, degree + 1, increasing=True) * (x * z)[:, None] * (1 / np.tanh(x))[:, None]
    c, *_ = np.linalg.lstsq(a, (np.tanh(x) - x) / np.tanh(x), rcond=None)
    del w
    c32 = np.float32(c).astype(np.float64)
    xx = np.linspace(0, xmax, 400001)[1:]
    zz = xx * xx
    err = np.abs(xx + xx * zz * np.polyval(c32[::-1], zz) - np.tanh(xx)) / np.tanh(xx)
    return c32, err.max()


for deg in (5, 6, 7):
    c, e = tanh_fit(deg)
    print(f"// tanh on [0, 0.625], degree {deg} in z: max relative error {e:.3g}")
    print(", ".join(lit(v) for v in c))


def atan_fit(degree, xmax=0.4375, nodes=600):
    """atan(x) = x + x z P(z), z = x^2 in [0, xmax^2]: as tanh_fit."""
    zmax = xmax * xmax
    z = zmax * (1 + np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)) / 2
    x = np.sqrt(z)
    a = np.vander(z, degree + 1, increasing=True) * (x * z)[:, None] * (1 / np.arctan(x))[:, None]
    c, *_ = np.linalg.lstsq(a, (np.arctan(x) - x) / np.arctan(x), rcond=None)
    c32 = np.float32(c).astype(np.float64)
    xx = np.linspace(0, xmax, 400001)[1:]
    zz = xx * xx
    err = np.abs(xx + xx * zz * np.polyval(c32[::-1], zz) - np.arctan(xx)) / np.arctan(xx)
    return c32, err.max()


for deg in (5, 6, 7):
    c, e = atan_fit(deg)
    print(f"// atan on [0, 7/16], degree {deg} in z: max relative error {e:.3g}")
    print(", ".join(lit(v) for v in c))
print("// atan(0.5), atan(1) = pi/4, atan(1.5), pi/2 as float pairs (head, tail)")
for v in (Fraction(1, 2), Fraction(1), Fraction(3, 2)):
    getcontext().prec = 60
    # atan by its series on v / (1 + sqrt(1 + v^2)) halving: atan(v) = 2 atan(v / (1 + sqrt(1 + v^2)))
    x = Decimal(v.numerator) / Decimal(v.denominator)
    halvings = 0
    while x > Decimal("0.01"):
        x = x / (1 + (1 + x * x).sqrt())
        halvings += 1
    s, term, k = Decimal(0), x, 0
    while abs(term) > Decimal(10) ** -55:
        s += term / (2 * k + 1) * (-1) ** k
        term *= x * x
        k += 1
    a = Fraction(s * 2**halvings)
    print(lit(a), lit(a - f32(a)))
print(lit(PI / 2), lit(PI / 2 - f32(PI / 2)))
print("// pi/4 head (pi/2's head halved)", lit(f32(PI / 2) / 2))
