#!/usr/bin/env python3
"""Prints the constants of core/math/ember_math.h: pi/2 split for an exact Cody-Waite
reduction and, for E = 0..104, 2^E mod 2pi split the same way (the reduction of sin/cos for
|x| >= 2^23, where x = M * 2^E with an integer M < 2^24: x = M * (2^E mod 2pi) modulo 2pi), and
the coefficients of atan on [0, tan(pi/8)] (needs NumPy). Run: python3 gen_constants.py"""
from decimal import Decimal, getcontext
from fractions import Fraction

getcontext().prec = 120


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


HALF_PI = Fraction(pi() / 2)


def split(c):
    """c in [0, 8): c0 on a 2^-26 grid, c1 on a 2^-52 grid (below 2^-26), c2 the rest as a double."""
    c0 = Fraction(int(c * 2**26), 2**26)
    c1 = Fraction(int((c - c0) * 2**52), 2**52)
    return float(c0), float(c1), float(c - c0 - c1)


p = split(HALF_PI)
print("// pi/2 = P1 + P2 + P3 (P1 on a 2^-26 grid, P2 on a 2^-52 grid)")
print("constexpr double kHalfPi1 = %s, kHalfPi2 = %s, kHalfPi3 = %s;" % tuple(v.hex() for v in p))
print("// 2^E mod 2pi for E = 0..104, split as pi/2 is: row E at [3E, 3E + 3) (a flat table and a 64-bit")
print("// index: GCC 12 vectorizes that gather, not one from a 2-D table)")
print("constexpr double kPow2Mod2Pi[105 * 3] = {")
for e in range(105):
    v = Fraction(2**e)
    q = v // (4 * HALF_PI)
    print("  %s, %s, %s," % tuple(x.hex() for x in split(v - q * 4 * HALF_PI)))
print("};")


def atan_fit(degree=6, nodes=400):
    """atan(t) = t + t z P(z), z = t^2 in [0, tan(pi/8)^2]: P by least squares on Chebyshev nodes,
    weighted by z (the error of atan relative to t); returns the coefficients, low first, and
    the max relative error found on a fine grid."""
    import numpy as np
    zmax = (np.sqrt(2) - 1) ** 2
    z = zmax * (1 + np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)) / 2
    t = np.sqrt(z)
    c, *_ = np.linalg.lstsq(np.vander(z, degree + 1, increasing=True) * z[:, None], (np.arctan(t) / t - 1), rcond=None)
    zz = np.linspace(0, zmax, 200001)[1:]
    tt = np.sqrt(zz)
    err = np.abs(tt + tt * zz * np.polyval(c[::-1], zz) - np.arctan(tt)) / np.arctan(tt)
    return c, err.max()


c, err = atan_fit()
print("// atan: P(z) coefficients, highest first (max relative error %.3g)" % err)
print(", ".join(float(v).hex() for v in c[::-1]))
