#!/usr/bin/env python3
"""Recomputes the minimax coefficients of the cos/sin generator (src/kernels/sincos/mod.rs)
and the split constants it uses, and measures the polynomials' error as evaluated in f64.

    python3 tools/sincos_coefficients.py        (needs mpmath: pip install mpmath)

Polynomials, on |x| <= 1/2 (quarter turns, so |angle| <= pi/4), absolute error:
  sin(pi/2 x) ~ x * P(x^2), P of degree 4 (odd polynomial of degree 9)
  cos(pi/2 x) ~ 1 + x^2 * Q(x^2), Q of degree 4 (even, degree 10, constant fixed to 1)
found with the Remez exchange algorithm in y = x^2 with weights sqrt(y) and y.
Python floats are IEEE f64 and Python never fuses a multiply-add, so the measured error
includes the rounding of the coefficients and of the Horner evaluation the crate does.
Takes about half a minute.
"""
import random

import mpmath as mp

mp.mp.dps = 50
PI = mp.pi


def remez(g, w, n, a, b, iters=30, grid=4000):
    """Coefficients c[0..n] minimising max |w(y) (g(y) - sum c_k y^k)| on [a, b]."""
    m = n + 1
    ys = [a + (b - a) * (1 - mp.cos(PI * (j + 0.5) / m)) / 2 for j in range(m)]
    c = None
    for _ in range(iters):
        A = mp.matrix(m, m)
        rhs = mp.matrix(m, 1)
        for j, y in enumerate(ys):
            for k in range(n):
                A[j, k] = w(y) * y**k
            A[j, n] = (-1) ** j
            rhs[j] = w(y) * g(y)
        sol = mp.lu_solve(A, rhs)
        c = [sol[k] for k in range(n)]
        pts = [a + (b - a) * mp.mpf(i) / grid for i in range(grid + 1)]
        vals = [w(y) * (g(y) - sum(c[k] * y**k for k in range(n))) for y in pts]
        ext = []
        for i, v in enumerate(vals):
            left = abs(vals[i - 1]) if i > 0 else 0
            right = abs(vals[i + 1]) if i + 1 < len(vals) else 0
            if abs(v) >= left and abs(v) >= right and v != 0:
                ext.append((pts[i], v))
        runs = []
        for y, v in ext:
            if runs and mp.sign(runs[-1][1]) == mp.sign(v):
                if abs(v) > abs(runs[-1][1]):
                    runs[-1] = (y, v)
            else:
                runs.append((y, v))
        while len(runs) > m:
            runs.pop(0 if abs(runs[0][1]) < abs(runs[-1][1]) else -1)
        if len(runs) < m:
            break
        ys = [r[0] for r in runs]
    return c


def g_sin(y):
    if y == 0:
        return PI / 2
    x = mp.sqrt(y)
    return mp.sin(PI * x / 2) / x


def g_cos(y):
    if y == 0:
        return -(PI**2) / 8
    return (mp.cos(PI * mp.sqrt(y) / 2) - 1) / y


def triple(v):
    a = float(v)
    r = v - mp.mpf(a)
    b = float(r)
    c = float(r - mp.mpf(b))
    return a, b, c


def main():
    S = [float(c) for c in remez(g_sin, mp.sqrt, 5, mp.mpf(0), mp.mpf(0.25))]
    C = [float(c) for c in remez(g_cos, lambda y: y, 5, mp.mpf(0), mp.mpf(0.25))]
    print("const SIN: [f64; 5] = [%s];" % ", ".join(repr(x) for x in S))
    print("const COS: [f64; 5] = [%s];" % ", ".join(repr(x) for x in C))
    print("INV_2PI = [%s]" % ", ".join(repr(x) for x in triple(1 / (2 * PI))))
    print("TWO_PI  = [%s]" % ", ".join(repr(x) for x in triple(2 * PI)))

    def psin(x):
        z = x * x
        return x * (S[0] + z * (S[1] + z * (S[2] + z * (S[3] + z * S[4]))))

    def pcos(x):
        z = x * x
        return 1.0 + z * (C[0] + z * (C[1] + z * (C[2] + z * (C[3] + z * C[4]))))

    random.seed(1)
    xs = [i / 200000.0 for i in range(-100000, 100001)] + [random.uniform(-0.5, 0.5) for _ in range(100000)]
    es = max(abs(mp.mpf(psin(x)) - mp.sin(PI * mp.mpf(x) / 2)) for x in xs)
    ec = max(abs(mp.mpf(pcos(x)) - mp.cos(PI * mp.mpf(x) / 2)) for x in xs)
    print("max error in f64 over %d points: sin %s, cos %s" % (len(xs), mp.nstr(es, 4), mp.nstr(ec, 4)))


if __name__ == "__main__":
    main()
