"""Elementwise math beyond the arithmetic core: trigonometric and special
functions, integer and bitwise arithmetic, predicates (isnan...) and aliases.

Every differentiable op is one ``defop`` entry (``_registry``); aliases
(``arcsin``, ``fix``, ``greater``...) are the same public functions under
PyTorch's other names, and composites (``square``, ``float_power``,
``divide``...) are plain functions of entries.  numpy lacks most special
functions, so the module starts with vectorised float64 kernels for them
(Cody's erf/erfc, erfinv, lgamma, PyTorch's digamma and trigamma, Cephes'
Hurwitz zeta and Bessel I0/I1), written with the array module ``xp`` so
that numpy and CuPy share them.

Two conventions of PyTorch's recur below:

* binary ops that PyTorch declares only for tensors (``atan2``, ``hypot``,
  ``fmax``, ``gcd``...) refuse a Python number with its ``TypeError``, and
  integer-only or float-only kernels refuse other dtypes with its
  ``NotImplementedError`` naming the kernel (``"hypot_cpu" not implemented
  for 'Long'``);
* ops PyTorch records but cannot differentiate (``floor_divide``,
  ``heaviside``, ``remainder`` of a number by a tensor) record a node whose
  backward raises, as PyTorch's does: Note [Recorded but not differentiable].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._common import _is_bool, _pos, _quiet, _r, _unary_samples
from agrad._ops._elementwise import (
    _erf_erfc,
    _kinks,
    _off_integers,
    _zeros,
    cos,
    exp,
    ge,
    gt,
    le,
    logical_or,
    lt,
    mul,
    ne,
    neg,
    pow,
    rsqrt,
    sigmoid,
    sin,
    sub,
    where,
)
from agrad._ops._elementwise import abs as _abs
from agrad._ops._elementwise import (
    div as _true_div,
)
from agrad._ops._inplace import inplace_method
from agrad._ops._registry import REGISTRY, apply, defop, identity
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = [
    # trigonometric and hyperbolic
    "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "hypot",
    # exponentials, logarithms, special functions
    "exp2", "log10", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "i0", "sinc", "logit", "xlogy",
    # rounding, signs, conversions
    "square", "trunc", "fix", "frac", "sgn", "signbit", "deg2rad", "rad2deg", "nan_to_num",
    # predicates
    "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal",
    # arithmetic
    "div", "divide", "true_divide", "floor_divide", "remainder", "fmod", "multiply", "subtract", "negative",
    "positive", "rsub", "lerp", "addcmul", "addcdiv", "clamp_min", "clamp_max", "copysign", "heaviside",
    "logaddexp", "logaddexp2", "fmax", "fmin", "float_power", "ldexp", "nextafter",
    # integers and bits
    "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    # comparisons under their other names
    "greater", "greater_equal", "less", "less_equal", "not_equal",
]


# -- special-function kernels ----------------------------------------------------
# numpy has none of erfc, erfinv, lgamma, digamma, polygamma, i1: these
# are vectorised float64 implementations written with the array module ``xp``
# (numpy or CuPy), so they run where the tensor lives.  Each evaluates its
# formula on the whole array and selects per region with ``where``; the loops
# below run over a fixed number of terms or steps, never over elements.


def _polyval(xp: Any, coeffs: tuple[float, ...], x: Any) -> Any:
    """``coeffs[0] * x**(n-1) + ... + coeffs[-1]`` by Horner's rule."""
    out = xp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


# Note [erfinv by Newton's method]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# M. Giles' single-precision approximation ("Approximating the erfinv
# function", GPU Computing Gems, 2010) starts Newton's method, good to about
# 1e-7 where |a| < 1 - 1e-7 and to a few per cent closer to 1 (float64 gets
# as close as 1 - 2**-53, erfinv 5.86).  Below |a| = 1/2 Newton's method
# solves erf(z) = a; above, log(erfc(z)) = log(1 - a), where 1 - a is exact
# and log(erfc) is nearly quadratic, so that the steps converge from the far
# tail too and keep full relative precision there.  Four steps reach the
# precision of erf itself (PyTorch: 2 steps from a better start).
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv(xp: Any, y: Any) -> Any:
    """erfinv of a float64 array; see Note [erfinv by Newton's method]."""
    a = xp.abs(y)
    inside = a < 1
    a = xp.where(inside, a, 0.5)  # the others are set at the end
    t = 1 - a  # exact where it matters, a >= 1/2
    w = -xp.log(t * (1 + a))
    z = xp.where(w < 5, _polyval(xp, _GILES_CENTRAL, w - 2.5), _polyval(xp, _GILES_TAIL, xp.sqrt(w) - 3)) * a
    central = a < 0.5
    log_t = xp.log(t)
    for _ in range(4):
        erf, erfc = _erf_erfc(xp, z)
        slope = _TWO_OVER_SQRT_PI * xp.exp(-z * z)  # d erf / dz
        step = xp.where(central, (erf - a) / slope, (xp.log(erfc) - log_t) * erfc / -slope)
        z = z - step
    inf_or_nan = xp.where(xp.abs(y) == 1, xp.copysign(xp.inf, y), xp.nan)  # nan with PyTorch's (clear) sign bit
    return xp.where(inside, xp.copysign(xp.where(a == 0, 0.0, z), y), inf_or_nan)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _abs_sinpi(xp: Any, x: Any) -> Any:
    """``|sin(pi x)|``, exactly 0 at the integers (where ``sin(pi * x)`` is not)."""
    r = xp.abs(x - 2 * xp.round(x / 2))  # in [0, 1]
    return xp.sin(math.pi * xp.minimum(r, 1 - r))


# Stirling's series of lgamma: B_2k / (2k (2k - 1)), k = 1..8 (alternating signs).
_STIRLING = (1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188, 691 / 360360, 1 / 156, 3617 / 122400)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG_PI = math.log(math.pi)


def _lgamma(xp: Any, x: Any) -> Any:
    """``log|Gamma(x)|`` of a float64 array: Stirling's series at ``z >= 10``,
    reached by ``Gamma(z) = Gamma(z + k) / (z (z+1) ... (z+k-1))``, and the
    reflection formula below 1/2; about 1e-15 absolute (relative away from the
    zeros at 1 and 2), inf at the poles (the non-positive integers)."""
    reflect = x < 0.5
    z = xp.where(reflect, 1 - x, x)
    z = xp.where(xp.isfinite(z), z, 10.0)  # inf and nan are set at the end
    prod = xp.ones_like(z)
    for _ in range(10):  # z >= 1/2 reaches 10 in at most 10 steps
        low = z < 10
        prod = xp.where(low, prod * z, prod)
        z = xp.where(low, z + 1, z)
    r = 1 / z
    r2 = r * r
    series = xp.zeros_like(z)
    for c in reversed(_STIRLING):
        series = c - r2 * series
    lg = (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + r * series - xp.log(prod)
    with_reflection = xp.where(reflect, _LOG_PI - xp.log(_abs_sinpi(xp, x)) - lg, lg)
    return xp.where(xp.isinf(x), xp.inf, xp.where(xp.isnan(x), xp.nan, with_reflection))


# PyTorch's digamma and trigamma (ATen's calc_digamma, calc_trigamma, from
# Cephes), step by step, so that values agree to the last bits: its trigamma
# truncates its asymptotic series early (relative error up to ~5e-10), and a
# more accurate one would disagree with PyTorch's gradients of digamma.
_PSI_10 = 2.25175258906672110764
_DIGAMMA_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
              -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
              8.33333333333333333333E-2)


def _digamma(xp: Any, x: Any) -> Any:
    """digamma of a float64 array, as PyTorch's ``calc_digamma``: -inf at +0 (inf
    at -0), nan at the negative integers."""
    negative = x < 0
    pole = negative & (x == xp.trunc(x))
    zero = x == 0
    # x < 0: psi(x) = psi(1 - x) - pi / tan(pi r), r the fractional part of x
    result = xp.where(negative & ~pole, -math.pi / xp.tan(math.pi * xp.fmod(x, 1.0)), 0.0)
    z = xp.where(negative, 1 - x, xp.where(zero, 1.0, x))
    for _ in range(10):  # z > 0 reaches 10 in at most 10 steps
        low = z < 10
        result = xp.where(low, result - 1 / z, result)
        z = xp.where(low, z + 1, z)
    w = 1 / (z * z)
    asym = xp.where(z < 1e17, w * _polyval(xp, _DIGAMMA_A, w), 0.0)
    out = xp.where(z == 10, result + _PSI_10, xp.log(z) - 0.5 / z - asym + result)
    out = xp.where(pole, xp.nan, out)
    return xp.where(zero, xp.copysign(xp.inf, -x), out)


def _trigamma(xp: Any, x: Any) -> Any:
    """trigamma (polygamma of order 1) of a float64 array, as PyTorch's ``calc_trigamma``."""
    reflect = x < 0.5
    sin_pi_x = xp.sin(math.pi * x)
    result = xp.where(reflect, -(math.pi * math.pi) / (sin_pi_x * sin_pi_x), 0.0)
    z = xp.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (z * z)
        z = z + 1
    ixx = 1 / (z * z)
    result = result + (1 + 1 / (2 * z) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / z
    return xp.where(reflect, -result, result)


def _bernoulli_factors(n: int) -> tuple[float, ...]:
    """``(2k)! / B_2k`` for k = 1..n: the Euler-Maclaurin denominators of Cephes' zeta."""
    b = [Fraction(1)]
    for m in range(1, 2 * n + 1):  # B_m from the recurrence sum_k C(m+1, k) B_k = 0
        b.append(-sum((math.comb(m + 1, k) * b[k] for k in range(m)), Fraction(0)) / (m + 1))
    return tuple(float(math.factorial(2 * k) / b[2 * k]) for k in range(1, n + 1))


_ZETA_A = _bernoulli_factors(12)
_MACHEP = 1.11022302462515654042e-16


def _hurwitz_zeta_sum(xp: Any, s: float, q: Any) -> Any:
    """The Hurwitz zeta function ``sum_k (q + k)**-s`` for a number ``s > 1`` and a
    float64 array ``q``, as Cephes' ``zeta`` (PyTorch's): a direct sum up to
    ``q + k > 9`` (at least 9 terms), then the Euler-Maclaurin tail, each
    stopping where its terms fall below machine precision.  inf at the
    non-positive integers.  The direct sum takes ``9 - q`` steps below 0: see
    :func:`_hurwitz_zeta` for far negative ``q``."""
    pole = (q <= 0) & (q == xp.floor(q))
    q = xp.where(pole, 1.0, q)
    total = q ** -s
    a = q.copy()
    b = xp.zeros_like(q)
    done = xp.zeros(q.shape, dtype=bool)
    lowest = float(xp.min(xp.where(xp.isfinite(q), q, 1.0))) if q.size else 1.0
    steps = max(9, int(math.floor(9 - lowest)) + 1)  # as many as the most negative q needs
    for i in range(1, steps + 1):  # Cephes' "while (i < 9 || a <= 9)", with its early exit
        live = ~done & ((i <= 9) | (a <= 9))
        a = xp.where(live, a + 1, a)
        b = xp.where(live, a ** -s, b)
        total = xp.where(live, total + b, total)
        done = done | (live & (-_MACHEP * total < b) & (b < _MACHEP * total))
    w = a
    total = xp.where(done, total, total + b * w / (s - 1) - 0.5 * b)
    fac = xp.ones_like(q)
    k = 0.0
    for coef in _ZETA_A:
        fac = fac * (s + k)
        b = b / w
        t = fac * b / coef
        total = xp.where(done, total, total + t)
        done = done | (xp.abs(t / total) < _MACHEP)
        k += 1.0
        fac = fac * (s + k)
        b = b / w
        k += 1.0
    return xp.where(pole, xp.inf, total)


# Note [Hurwitz zeta far below 0]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Cephes' direct sum takes about -q steps for a negative q: a loop per element
# in PyTorch, but here each step is a pass over the array, too slow for
# q = -1e8.  For an integer s and q = -p < -50 (not an integer), splitting
# the sum at 0 gives zeta functions of positive arguments only:
#     zeta(s, q) = (-1)**s (zeta(s, f) - zeta(s, p + 1)) + zeta(s, 1 - f),
# f = p - floor(p): the negative terms are (-1)**s (f + j)**-s, j = 0..floor(p),
# and the positive ones start at 1 - f.  The same sum regrouped, so the same
# value up to rounding (both lose digits where its terms nearly cancel).
_ZETA_DIRECT_BELOW = -50.0


def _hurwitz_zeta(xp: Any, s: float, q: Any) -> Any:
    """The Hurwitz zeta function of an integer ``s > 1`` (a float) and a float64 array
    ``q``: Cephes' sum, regrouped far below 0 (Note [Hurwitz zeta far below 0])."""
    far = (q < _ZETA_DIRECT_BELOW) & (q != xp.floor(q))
    if not bool(far.any()):
        return _hurwitz_zeta_sum(xp, s, q)
    p = xp.where(far, -q, 0.5)
    f = p - xp.floor(p)
    regrouped = (-1.0) ** s * (_hurwitz_zeta_sum(xp, s, f) - _hurwitz_zeta_sum(xp, s, p + 1))
    regrouped = regrouped + _hurwitz_zeta_sum(xp, s, 1 - f)
    return xp.where(far, regrouped, _hurwitz_zeta_sum(xp, s, xp.where(far, 1.0, q)))


def _polygamma(xp: Any, n: int, x: Any) -> Any:
    """``polygamma(n, x)`` of a float64 array: digamma and trigamma for n = 0, 1;
    ``(-1)**(n+1) n! zeta(n + 1, x)`` above, as PyTorch computes them."""
    if n == 0:
        return _digamma(xp, x)
    if n == 1:
        return _trigamma(xp, x)
    factorial = math.exp(math.lgamma(n + 1.0)) if n <= 170 else math.inf  # 171! overflows float64
    return (1.0 if n % 2 else -1.0) * factorial * _hurwitz_zeta(xp, n + 1.0, x)


# Cephes' Chebyshev expansions of exp(-|x|) I0(x) and exp(-|x|) I1(x) / x on
# [0, 8], and of exp(-|x|) sqrt(|x|) I0(x), I1(x) on [8, inf) (PyTorch's i0
# and special.i1 use the same ones).
_I0_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
         1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
         -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
         9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
         -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
         1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
         -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
         1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
         -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
         1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
         3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
         1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
         -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
         7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
         -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
         3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
         2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
         8.04490411014108831608E-1)
_I1_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
         -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
         3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
         -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
         9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
         -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
         4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
         -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
         2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
         -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
         -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
         -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
         4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
         -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
         3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
         -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
         -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
         7.78576235018280120474E-1)


def _chbevl(xp: Any, x: Any, coeffs: tuple[float, ...]) -> Any:
    """Cephes' ``chbevl``: the Chebyshev series ``coeffs`` at ``x``."""
    b0 = xp.full_like(x, coeffs[0])
    b1 = b2 = xp.zeros_like(x)
    for c in coeffs[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _bessel_i(xp: Any, x: Any, order: int) -> Any:
    """The modified Bessel function I0 (``order`` 0) or I1 of a float64 array."""
    y = xp.abs(x)
    small = y <= 8
    y_small = xp.where(small, y, 8.0)
    y_large = xp.where(small, 8.0, y)
    if order == 0:
        near = _chbevl(xp, y_small / 2 - 2, _I0_A)
        far = _chbevl(xp, 32 / y_large - 2, _I0_B) / xp.sqrt(y_large)
        return xp.exp(y) * xp.where(small, near, far)
    near = _chbevl(xp, y_small / 2 - 2, _I1_A) * y
    far = _chbevl(xp, 32 / y_large - 2, _I1_B) / xp.sqrt(y_large)
    return xp.copysign(xp.exp(y) * xp.where(small, near, far), x)


# -- helpers -----------------------------------------------------------------------


def _in_float64(kernel: Callable[..., Any], xp: Any, input: Any, *args: Any) -> Any:
    """``kernel(xp, input, *args)`` computed in float64, returned in ``input``'s dtype."""
    return kernel(xp, input.astype(np.float64, copy=False), *args).astype(input.dtype, copy=False)


def _type_name(arr: Any) -> str:
    return _dtype.SCALAR_TYPE_NAMES[arr.dtype.name]


def _refuse_dtype(xp: Any, kernel: str, arr: Any, kinds: str) -> None:
    """PyTorch's ``NotImplementedError`` for a kernel without ``arr``'s dtype
    (``kinds``: the numpy kinds it has, ``"f"`` floating, ``"iu"`` integers, ``"b"`` bool).
    ``kernel`` is spelled as PyTorch's CPU kernel (``"hypot_cpu"``); ``_cuda`` on CUDA."""
    if arr.dtype.kind not in kinds:
        name = kernel if xp is np else kernel.replace("_cpu", "_cuda")
        raise NotImplementedError(f'"{name}" not implemented for \'{_type_name(arr)}\'')


def _tensors(name: str, *names: str) -> Callable[..., tuple[tuple, dict]]:
    """A ``parse`` taking the tensors ``names`` (positionally or by keyword) and
    refusing anything else with PyTorch's ``TypeError``, as its ops that have
    no overload for numbers do (``atan2(t, 2.0)``)."""

    def parse(*args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        if len(args) + len(kwargs) != len(names) or len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} arguments ({len(args) + len(kwargs)} given)")
        values = list(args)
        for n in names[len(args):]:
            if n not in kwargs:
                raise TypeError(f"{name}() missing required argument '{n}'")
            values.append(kwargs[n])
        for pos, (n, v) in enumerate(zip(names, values), 1):
            if not isinstance(v, Tensor):
                raise TypeError(f"{name}(): argument '{n}' (position {pos}) must be Tensor, not {type(v).__name__}")
        return tuple(values), {}

    return parse


def _first_is_tensor(name: str, input: Any, other: Any, second: str = "other") -> None:
    """PyTorch's ``TypeError`` for ops whose first argument must be a tensor (``fmod(2, t)``)."""
    if not isinstance(input, Tensor):
        kinds = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in (input, other))
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({kinds}), but expected "
                        f"one of:\n * (Tensor input, Tensor {second})\n * (Tensor input, Number {second})")


def _tensor_pairs(domain=_r, other=None):
    """Samples of an op taking two tensors (no Python numbers): same shapes,
    broadcasting both ways, 0-d with n-d, empty."""
    other = other or domain
    return lambda rng: [
        ((domain(rng, 3, 4), other(rng, 3, 4)), {}),
        ((domain(rng, 3, 1), other(rng, 4)), {}),
        ((domain(rng), other(rng, 2, 3)), {}),
        ((domain(rng, 0, 3), other(rng, 3)), {}),
    ]


def _between(low: float, high: float):
    """A sample domain: uniform values in ``(low, high)``."""
    return lambda rng, *shape: rng.uniform(low, high, size=shape)


# Note [Recorded but not differentiable]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch has no derivative for some ops on floating tensors (floor_divide,
# heaviside, remainder of a number by a tensor) yet records them: the result
# requires grad, its grad_fn is named ``torch::autograd::NotImplemented``, and
# only a backward through it raises "derivative for aten::<op> is not
# implemented".  agrad does the same with vjps that raise.  An entry that is
# never differentiable has no ``samples`` (gradcheck cannot run on it: the op
# table's EXEMPT_FROM_SAMPLES lists it); tests/ops/test_pointwise.py checks
# its values against PyTorch's and the error.
_NOT_IMPLEMENTED = "torch::autograd::NotImplemented"


def _no_derivative(name: str) -> Callable[[Tensor], Tensor]:
    def vjp(g: Tensor) -> Tensor:
        raise RuntimeError(f"derivative for aten::{name} is not implemented")

    return vjp


# -- trigonometric and hyperbolic functions ---------------------------------------------


@defop(ref=lambda torch: torch.sinh, vjp=lambda g, input: g * cosh(input), node="SinhBackward0",
       methods=("sinh",), inplace=("sinh_",), to_float=True, samples=_unary_samples())
@_quiet
def sinh(xp, input):
    """Elementwise hyperbolic sine."""
    return xp.sinh(input)


@defop(ref=lambda torch: torch.cosh, vjp=lambda g, input: g * sinh(input), node="CoshBackward0",
       methods=("cosh",), inplace=("cosh_",), to_float=True, samples=_unary_samples())
@_quiet
def cosh(xp, input):
    """Elementwise hyperbolic cosine."""
    return xp.cosh(input)


_unit = _between(-0.9, 0.9)  # inside asin's, acos's and atanh's domain, off its edges


@defop(ref=lambda torch: torch.asin, vjp=lambda g, input: g * rsqrt(1 - input * input), node="AsinBackward0",
       methods=("asin", "arcsin"), inplace=("asin_", "arcsin_"), to_float=True, samples=_unary_samples(_unit))
@_quiet
def asin(xp, input):
    """Elementwise arcsine (nan outside [-1, 1])."""
    return xp.arcsin(input)


@defop(ref=lambda torch: torch.acos, vjp=lambda g, input: g * -rsqrt(1 - input * input), node="AcosBackward0",
       methods=("acos", "arccos"), inplace=("acos_", "arccos_"), to_float=True, samples=_unary_samples(_unit))
@_quiet
def acos(xp, input):
    """Elementwise arccosine (nan outside [-1, 1])."""
    return xp.arccos(input)


@defop(ref=lambda torch: torch.atan, vjp=lambda g, input: g / (input * input + 1), node="AtanBackward0",
       methods=("atan", "arctan"), inplace=("atan_", "arctan_"), to_float=True, samples=_unary_samples())
def atan(xp, input):
    """Elementwise arctangent."""
    return xp.arctan(input)


@defop(ref=lambda torch: torch.asinh, vjp=lambda g, input: g * rsqrt(input * input + 1), node="AsinhBackward0",
       methods=("asinh", "arcsinh"), inplace=("asinh_", "arcsinh_"), to_float=True, samples=_unary_samples())
def asinh(xp, input):
    """Elementwise inverse hyperbolic sine."""
    return xp.arcsinh(input)


@defop(ref=lambda torch: torch.acosh, vjp=lambda g, input: g * rsqrt(input * input - 1), node="AcoshBackward0",
       methods=("acosh", "arccosh"), inplace=("acosh_", "arccosh_"), to_float=True,
       samples=_unary_samples(_between(1.2, 3.0)))
@_quiet
def acosh(xp, input):
    """Elementwise inverse hyperbolic cosine (nan below 1)."""
    return xp.arccosh(input)


@defop(ref=lambda torch: torch.atanh, vjp=lambda g, input: g / (1 - input * input), node="AtanhBackward0",
       methods=("atanh", "arctanh"), inplace=("atanh_", "arctanh_"), to_float=True, samples=_unary_samples(_unit))
@_quiet
def atanh(xp, input):
    """Elementwise inverse hyperbolic tangent (±inf at ±1, nan beyond)."""
    return xp.arctanh(input)


arcsin = asin
arccos = acos
arctan = atan
arcsinh = asinh
arccosh = acosh
arctanh = atanh


def _atan2_grad_input(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    return g * other / (input * input + other * other)


def _atan2_grad_other(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    return g * -input / (input * input + other * other)


@defop(ref=lambda torch: torch.atan2, vjp=(_atan2_grad_input, _atan2_grad_other), node="Atan2Backward0",
       methods=("atan2", "arctan2"), inplace=("atan2_", "arctan2_"), promote=True, to_float=True,
       parse=_tensors("atan2", "input", "other"), samples=_tensor_pairs(_kinks))
def atan2(xp, input, other):
    """Elementwise angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant."""
    return xp.arctan2(input, other)


arctan2 = atan2


@defop(ref=lambda torch: torch.hypot,
       vjp=(lambda g, input, out: g * input / out, lambda g, other, out: g * other / out), node="HypotBackward0",
       methods=("hypot",), inplace=("hypot_",), promote=True, parse=_tensors("hypot", "input", "other"),
       samples=_tensor_pairs(_kinks))
def hypot(xp, input, other):
    """Elementwise ``sqrt(input**2 + other**2)``, without overflow; floating tensors only."""
    _refuse_dtype(xp, "hypot_cpu", input, "f")
    return xp.hypot(input, other)


# -- exponentials, logarithms and special functions ---------------------------------------

_LN2 = math.log(2.0)


@defop(ref=lambda torch: torch.exp2, vjp=lambda g, out: g * out * _LN2, node="Exp2Backward0",
       methods=("exp2",), inplace=("exp2_",), to_float=True, samples=_unary_samples())
@_quiet
def exp2(xp, input):
    """Elementwise ``2 ** input``."""
    return xp.exp2(input)


@defop(ref=lambda torch: torch.log10, vjp=lambda g, input: g / (input * math.log(10.0)), node="Log10Backward0",
       methods=("log10",), inplace=("log10_",), to_float=True, samples=_unary_samples(_pos))
@_quiet
def log10(xp, input):
    """Elementwise base-10 logarithm (nan below 0, with PyTorch's clear sign bit, where numpy's is set)."""
    return xp.where(input < 0, xp.nan, xp.log10(input)).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.erfc, vjp=lambda g, input: g * (-_TWO_OVER_SQRT_PI) * exp(-(input * input)),
       node="ErfcBackward0", methods=("erfc",), inplace=("erfc_",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4, low=-3.0, high=5.0),), {}), ((_r(rng),), {}), ((_r(rng, 0, 2),), {})])
@_quiet
def erfc(xp, input):
    """Elementwise complementary error function ``1 - erf(input)``, accurate where it is tiny."""
    return _in_float64(lambda xp, x: _erf_erfc(xp, x)[1], xp, input)


@defop(ref=lambda torch: torch.erfinv, vjp=lambda g, out: g * (math.sqrt(math.pi) / 2) * exp(out * out),
       node="ErfinvBackward0", methods=("erfinv",), inplace=("erfinv_",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4, low=-0.95, high=0.95),), {}), ((_unit(rng),), {}),
                            ((_unit(rng, 0, 2),), {}), ((np.array([0.999, -0.9999, 1e-8, 0.5]),), {})])
@_quiet
def erfinv(xp, input):
    """Elementwise inverse error function (±inf at ±1, nan beyond)."""
    return _in_float64(_erfinv, xp, input)


def _gamma_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    # positive and negative arguments, off the poles at the non-positive integers
    return [((rng.uniform(0.2, 6.0, size=(3, 4)),), {}), ((_off_integers(rng, 5),), {}),
            ((np.asarray(rng.uniform(0.5, 3.0)),), {}), ((rng.uniform(0.5, 2.0, size=(0, 2)),), {})]


@defop(ref=lambda torch: torch.lgamma, vjp=lambda g, input: g * digamma(input), node="LgammaBackward0",
       methods=("lgamma",), inplace=("lgamma_",), to_float=True, samples=_gamma_samples)
@_quiet
def lgamma(xp, input):
    """Elementwise ``log|Gamma(input)|`` (inf at the non-positive integers)."""
    return _in_float64(_lgamma, xp, input)


@defop(ref=lambda torch: torch.digamma, vjp=lambda g, input: g * polygamma(1, input), node="DigammaBackward0",
       methods=("digamma",), inplace=("digamma_",), to_float=True, samples=_gamma_samples)
@_quiet
def digamma(xp, input):
    """Elementwise logarithmic derivative of Gamma (-inf at 0, nan at the negative integers)."""
    return _in_float64(_digamma, xp, input)


def _polygamma_args(n: Any, input: Any) -> tuple[tuple, dict]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if not isinstance(input, Tensor):
        raise TypeError(f"polygamma(): argument 'input' (position 2) must be Tensor, not {type(input).__name__}")
    return (input,), {"n": int(n), "overload": 0}


@defop(ref=lambda torch: torch.polygamma, vjp=lambda g, input, n: g * polygamma(n + 1, input),
       node=("PolygammaBackward0", "PolygammaBackward1"), node_for=lambda n, overload: f"PolygammaBackward{overload}",
       to_float=True, parse=_polygamma_args,
       samples=lambda rng: [((0, rng.uniform(0.2, 6.0, size=(3, 4))), {}), ((1, _off_integers(rng, 5)), {}),
                            ((2, rng.uniform(0.2, 6.0, size=(2, 3))), {}), ((3, np.asarray(1.7)), {}),
                            ((1, rng.uniform(0.5, 2.0, size=(0, 2))), {})])
@_quiet
def polygamma(xp, input, *, n, overload=0):
    """The ``n``-th derivative of digamma, elementwise (``polygamma(0, x)`` is digamma);
    ``overload`` 1 is PyTorch's ``polygamma_``, which names the node PolygammaBackward1."""
    return _in_float64(lambda xp, x: _polygamma(xp, n, x), xp, input)


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """``t.polygamma(n)``: :func:`polygamma` with the tensor first."""
    return polygamma(n, self)


def _polygamma_written(self: Tensor, n: int) -> Tensor:
    """What ``t.polygamma_(n)`` writes: PyTorch records that overload as PolygammaBackward1."""
    inputs, attrs = _polygamma_args(n, self)
    attrs["overload"] = 1
    return apply(REGISTRY["polygamma"], inputs, attrs)


# ``i0``'s derivative is ``special.i1`` (agrad has no ``special`` module: a private op).
@defop(ref=lambda torch: torch.i0, vjp=lambda g, input: g * _special_i1(input), node="I0Backward0",
       methods=("i0",), inplace=("i0_",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4, low=-10.0, high=10.0),), {}), ((_r(rng),), {}),
                            ((_r(rng, 0, 2),), {})])
@_quiet
def i0(xp, input):
    """Elementwise modified Bessel function of the first kind, of order 0."""
    return _in_float64(_bessel_i, xp, input, 0)


def _i1_grad(g: Tensor, input: Tensor, out: Tensor) -> Tensor:
    # PyTorch's i1_backward: I1'(x) = I0(x) - I1(x) / x, 1/2 at (and within eps of) 0.
    eps = float(np.finfo(input._data.dtype).eps)
    tiny = _abs(input) <= eps
    safe = where(tiny, eps, input)
    return g * where(tiny, 0.5, i0(safe) - out / safe)


@defop(ref=lambda torch: torch.special.i1, vjp=_i1_grad, node="SpecialI1Backward0", to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4, low=-10.0, high=10.0),), {}), ((_r(rng),), {}),
                            ((np.array([0.0, 9.0, -12.0]),), {})])
@_quiet
def _special_i1(xp, input):
    """Modified Bessel function of the first kind, of order 1 (PyTorch's ``special.i1``): ``i0``'s derivative."""
    return _in_float64(_bessel_i, xp, input, 1)


def _sinc_grad(g: Tensor, input: Tensor) -> Tensor:
    # (pi x cos(pi x) - sin(pi x)) / (pi x**2); 0 at 0, as PyTorch's (whose
    # masked_fill makes the second derivative there 0 too)
    zero = input == 0
    x = where(zero, 1.0, input)
    px = x * math.pi
    return g * where(zero, 0.0, (px * cos(px) - sin(px)) / (px * x))


@defop(ref=lambda torch: torch.sinc, vjp=_sinc_grad, node="SincBackward0", methods=("sinc",), inplace=("sinc_",),
       to_float=True, samples=_unary_samples(_kinks))
@_quiet
def sinc(xp, input):
    """Elementwise normalised sinc, ``sin(pi x) / (pi x)``, 1 at 0."""
    px = input * math.pi
    return xp.where(input == 0, 1, xp.sin(px) / px).astype(input.dtype, copy=False)


def _logit_grad(g: Tensor, input: Tensor, eps: Any) -> Tensor:
    # PyTorch's logit_backward: nan outside [0, 1] without eps; 0 where eps clamped.
    if eps is None:
        return where(logical_or(input < 0, input > 1), math.nan, g / (input * (1 - input)))
    return where(logical_or(input < eps, input > 1 - eps), 0.0, g / (input * (1 - input)))


@defop(ref=lambda torch: torch.logit, vjp=_logit_grad, node="LogitBackward0", methods=("logit",),
       inplace=("logit_",), to_float=True,
       samples=lambda rng: [((_between(0.05, 0.95)(rng, 3, 4),), {}), ((np.asarray(0.3),), {}),
                            ((_between(0.05, 0.95)(rng, 0, 2),), {}),
                            ((np.array([0.01, 0.3, 0.5, 0.98]),), {"eps": 0.05})])
@_quiet
def logit(xp, input, *, eps=None):
    """Elementwise ``log(p / (1 - p))``; with ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]``."""
    if eps is not None:
        lo = input.dtype.type(eps)
        input = xp.clip(input, lo, 1 - lo)
    odds = input / (1 - input)
    return xp.where(odds < 0, xp.nan, xp.log(odds))  # outside [0, 1]: nan with PyTorch's (clear) sign bit


def _xlogy_args(input: Any, other: Any) -> tuple[tuple, dict]:
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlogy(): argument 'input' must be Tensor, not " + type(input).__name__)
    # PyTorch's overloads, which name the node: Tensor-Tensor, Scalar-Tensor, Tensor-Scalar.
    overload = 1 if not isinstance(input, Tensor) else 2 if not isinstance(other, Tensor) else 0
    return (input, other), {"overload": overload}


@defop(ref=lambda torch: torch.xlogy,
       vjp=(lambda g, input, other: g * xlogy(input != 0, other), lambda g, input, other: g * input / other),
       node=("XlogyBackward0", "XlogyBackward1", "XlogyBackward2"),
       node_for=lambda overload: f"XlogyBackward{overload}", methods=("xlogy",), inplace=("xlogy_",),
       promote=True, to_float=True, parse=_xlogy_args,
       samples=lambda rng: [((_r(rng, 3, 4), _pos(rng, 3, 4)), {}), ((_r(rng, 3, 1), _pos(rng, 4)), {}),
                            ((_r(rng), _pos(rng, 2, 3)), {}), ((_r(rng, 2, 3), 1.5), {}), ((2.5, _pos(rng, 3)), {}),
                            ((_r(rng, 0, 3), _pos(rng, 3)), {})])
@_quiet
def xlogy(xp, input, other, *, overload=0):
    """Elementwise ``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is nan)."""
    out = xp.where(input == 0, 0, input * xp.log(other))
    return xp.where(xp.isnan(other), other, out).astype(input.dtype, copy=False)


# -- rounding, signs and conversions ---------------------------------------------------------


def square(input: Tensor) -> Tensor:
    """Elementwise ``input ** 2`` (PyTorch's composite: a ``pow``, PowBackward0; integers stay integers)."""
    return pow(input, 2)


@defop(ref=lambda torch: torch.trunc, vjp=_zeros, node="TruncBackward0", methods=("trunc", "fix"),
       inplace=("trunc_", "fix_"), samples=_unary_samples(_off_integers))
def trunc(xp, input):
    """Elementwise rounding towards zero; zero gradient (integers are returned unchanged)."""
    _refuse_dtype(xp, "trunc_vml_cpu", input, "fiu")
    return input.copy() if input.dtype.kind in "iu" else xp.trunc(input)


fix = trunc


@defop(ref=lambda torch: torch.frac, vjp=identity, node="FracBackward0", methods=("frac",), inplace=("frac_",),
       samples=_unary_samples(_off_integers))
@_quiet
def frac(xp, input):
    """Elementwise fractional part ``input - trunc(input)``, with ``input``'s sign; floating tensors only."""
    _refuse_dtype(xp, "frac_cpu", input, "f")
    return input - xp.trunc(input)


def _sgn_ref(torch: Any) -> Callable[[Any], Any]:
    """PyTorch's sgn for the oracle tests, whose gradient (an "efficient zero
    tensor", which they cannot read as an array) a hook makes a plain one."""

    def sgn(input: Any) -> Any:
        if input.requires_grad:
            input.register_hook(lambda g: torch.zeros(g.shape, dtype=g.dtype) + g)
        return torch.sgn(input)

    return sgn


@defop(ref=_sgn_ref, vjp=_zeros, node="SgnBackward0",
       methods=("sgn",), inplace=("sgn_",),
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_kinks(rng),), {}), ((_r(rng, 0, 2),), {})])
def sgn(xp, input):
    """Elementwise sign (``sign`` for real tensors: -1, 0 or 1, 0 for nan); zero gradient."""
    if input.dtype == bool:
        return input.copy()
    out = xp.sign(input)
    return xp.nan_to_num(out) if input.dtype.kind == "f" else out


@defop(ref=lambda torch: torch.signbit, vjp=None, methods=("signbit",),
       samples=lambda rng: [((np.array([-0.0, 0.0, -1.5, 2.0, np.inf, -np.inf]),), {}),
                            ((rng.integers(-3, 3, (2, 3)),), {}), ((rng.random(3) < 0.5,), {})])
def signbit(xp, input):
    """Elementwise: whether the sign bit is set (true for -0.0); a bool tensor."""
    if input.dtype.kind == "f":
        return xp.signbit(input)
    return input < 0 if input.dtype.kind == "i" else xp.zeros(input.shape, dtype=bool)


_DEG_PER_RAD = 180.0 / math.pi


@defop(ref=lambda torch: torch.deg2rad, vjp=lambda g: g * (math.pi / 180.0), node="Deg2RadBackward0",
       methods=("deg2rad",), inplace=("deg2rad_",), to_float=True, samples=_unary_samples())
def deg2rad(xp, input):
    """Elementwise conversion of degrees to radians."""
    return input * (math.pi / 180.0)


@defop(ref=lambda torch: torch.rad2deg, vjp=lambda g: g * _DEG_PER_RAD, node="Rad2DegBackward0",
       methods=("rad2deg",), inplace=("rad2deg_",), to_float=True, samples=_unary_samples())
def rad2deg(xp, input):
    """Elementwise conversion of radians to degrees."""
    return input * _DEG_PER_RAD


def _special_values(rng: np.random.Generator) -> np.ndarray:
    x = _r(rng, 2, 4)
    x[0, 1], x[1, 2], x[1, 3] = np.nan, np.inf, -np.inf
    return x


@defop(ref=lambda torch: torch.nan_to_num, vjp=lambda g, input: g * isfinite(input), node="NanToNumBackward0",
       methods=("nan_to_num",), inplace=("nan_to_num_",), opmath=False,
       samples=lambda rng: [((_special_values(rng),), {}),
                            ((_special_values(rng),), {"nan": 1.5, "posinf": 10.0, "neginf": -10.0}),
                            ((np.asarray(np.nan),), {"nan": -2.0}), ((_r(rng, 0, 2),), {})])
@_quiet
def nan_to_num(xp, input, *, nan=0.0, posinf=None, neginf=None):
    """``input`` with nan, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default
    the dtype's largest and lowest values); the gradient is 0 where the input was not finite."""
    if input.dtype.kind != "f":
        return input.copy()
    return xp.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


# -- predicates (not differentiable) -------------------------------------------------------------


def _predicate_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((_special_values(rng),), {}), ((rng.integers(-3, 3, (2, 3)),), {}), ((rng.random(3) < 0.5,), {}),
            ((np.asarray(np.inf),), {})]


def _predicate(name: str, kernel: Callable[[Any, Any], Any], doc: str) -> Callable[..., Tensor]:
    def forward(xp, input):
        if input.dtype.kind != "f":
            return xp.full(input.shape, name in ("isfinite", "isreal"), dtype=bool)
        return kernel(xp, input)

    forward.__name__ = name
    forward.__doc__ = doc
    return defop(ref=lambda torch: getattr(torch, name), vjp=None, methods=(name,),
                 samples=_predicate_samples)(forward)


isnan = _predicate("isnan", lambda xp, x: xp.isnan(x), "Elementwise: whether the value is nan; a bool tensor.")
isinf = _predicate("isinf", lambda xp, x: xp.isinf(x), "Elementwise: whether the value is ±inf; a bool tensor.")
isfinite: Callable[..., Tensor] = _predicate("isfinite", lambda xp, x: xp.isfinite(x),
                      "Elementwise: whether the value is neither inf nor nan; a bool tensor.")
isposinf = _predicate("isposinf", lambda xp, x: x == xp.inf, "Elementwise: whether the value is +inf; a bool tensor.")
isneginf = _predicate("isneginf", lambda xp, x: x == -xp.inf,
                      "Elementwise: whether the value is -inf; a bool tensor.")
isreal = _predicate("isreal", lambda xp, x: xp.ones(x.shape, dtype=bool),
                    "Elementwise: whether the value is real (always, for agrad's real dtypes); a bool tensor.")


# -- division with rounding, remainders -------------------------------------------------------


def _check_integer_divisor(other: Any) -> None:
    """PyTorch's error for an integer division by zero (numpy's: 0 and a warning)."""
    if other.dtype.kind in "iu" and bool((other == 0).any()):
        raise RuntimeError("ZeroDivisionError")


def _floor_quotient(xp: Any, input: Any, other: Any) -> Any:
    """``floor(input / other)``, as PyTorch's ``div_floor``: numpy's floor division
    is the same algorithm for floats (exact where ``input / other`` rounds to an
    integer) and Python's for integers."""
    _check_integer_divisor(other)
    return xp.floor_divide(input, other)


def _trunc_quotient(xp: Any, input: Any, other: Any) -> Any:
    """``trunc(input / other)``, as PyTorch's ``div_trunc`` (C's integer division)."""
    if input.dtype.kind == "f":
        return xp.trunc(input / other)
    q = _floor_quotient(xp, input, other)
    return xp.where((xp.remainder(input, other) != 0) & ((input < 0) != (other < 0)), q + 1, q)


def _div_rounding_args(input: Any, other: Any, *, rounding_mode: Any) -> tuple[tuple, dict]:
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    return (input, other), {"rounding_mode": rounding_mode}


def _quotient_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    """Pairs whose quotient stays off the integers, where remainders and rounded
    quotients jump (so finite differences see the smooth pieces)."""

    def fractions(*shape: int) -> np.ndarray:
        return rng.integers(-3, 3, size=shape) + rng.uniform(0.2, 0.8, size=shape)

    other = _kinks(rng, 3, 4)
    row = _kinks(rng, 4)
    zero_d = np.asarray(_kinks(rng))
    x = np.asarray(1.3)
    return [((other * fractions(3, 4), other), {}), ((row * fractions(3, 4), row), {}),
            ((zero_d * fractions(2, 3), zero_d), {}), ((x, x / fractions(2, 3)), {}),
            ((1.5 * fractions(2, 3), 1.5), {}), ((np.zeros((0, 3)), row[:3]), {})]


@defop(ref=lambda torch: torch.div, vjp=(_zeros, _zeros), node="DivBackward2", promote=True,
       parse=_div_rounding_args,
       samples=lambda rng: [(args, {"rounding_mode": mode}) for (args, _), mode
                            in zip(_quotient_samples(rng), ("floor", "trunc") * 3)])
@_quiet
def _div_rounding(xp, input, other, *, rounding_mode):
    """``div(input, other, rounding_mode=...)``: the quotient rounded down
    (``"floor"``) or towards zero (``"trunc"``); integers stay integers; zero gradient."""
    _refuse_dtype(xp, f"div_{rounding_mode}_cpu", input, "fiu")
    if rounding_mode == "floor":
        return _floor_quotient(xp, input, other)
    return _trunc_quotient(xp, input, other)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``input / other``, rounded as ``rounding_mode`` says: None (true division,
    ``/``), ``"trunc"`` or ``"floor"`` (zero gradient, integers stay integers)."""
    if rounding_mode is None:
        return _true_div(input, other)
    return _div_rounding(input, other, rounding_mode=rounding_mode)


divide = div
true_divide = _true_div


@defop(ref=lambda torch: torch.floor_divide, vjp=(_no_derivative("floor_divide"),) * 2, node=_NOT_IMPLEMENTED,
       methods=("floor_divide", "__floordiv__"), rmethods=("__rfloordiv__",),
       inplace=("floor_divide_", "__ifloordiv__"), promote=True)
@_quiet
def floor_divide(xp, input, other):
    """Elementwise ``floor(input / other)`` (Python's ``//``); integers stay integers.
    Not differentiable: see Note [Recorded but not differentiable]."""
    _refuse_dtype(xp, "div_floor_cpu", input, "fiu")
    return _floor_quotient(xp, input, other)


def _remainder_args(input: Any, other: Any) -> tuple[tuple, dict]:
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"remainder(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    # PyTorch's overloads, which name the node: Tensor-Scalar 0, Tensor-Tensor 1,
    # and Scalar-Tensor, which has no derivative (Note [Recorded but not differentiable]).
    return (input, other), {"overload": 2 if not isinstance(input, Tensor) else 1 if isinstance(other, Tensor) else 0}


def _remainder_grad_other(g: Tensor, input: Tensor, other: Tensor, overload: int) -> Tensor:
    if overload == 2:
        raise RuntimeError("derivative for aten::remainder is not implemented")
    return -g * _div_rounding(input, other, rounding_mode="floor")


@defop(ref=lambda torch: torch.remainder, vjp=(identity, _remainder_grad_other),
       node=("RemainderBackward0", "RemainderBackward1", _NOT_IMPLEMENTED),
       node_for=lambda overload: _NOT_IMPLEMENTED if overload == 2 else f"RemainderBackward{overload}",
       methods=("remainder", "__mod__"), rmethods=("__rmod__",), inplace=("remainder_", "__imod__"),
       promote=True, parse=_remainder_args, samples=_quotient_samples)
@_quiet
def remainder(xp, input, other, *, overload=1):
    """Elementwise remainder of ``input / other`` with ``other``'s sign (Python's ``%``)."""
    _refuse_dtype(xp, "remainder_cpu", input, "fiu")
    _check_integer_divisor(other)
    mod = xp.fmod(input, other)
    return xp.where((mod != 0) & ((other < 0) != (mod < 0)), mod + other, mod)


def _fmod_args(input: Any, other: Any) -> tuple[tuple, dict]:
    _first_is_tensor("fmod", input, other)
    return (input, other), {"overload": 1 if isinstance(other, Tensor) else 0}


@defop(ref=lambda torch: torch.fmod,
       vjp=(identity, lambda g, input, other: -g * _div_rounding(input, other, rounding_mode="trunc")),
       node=("FmodBackward0", "FmodBackward1"), node_for=lambda overload: f"FmodBackward{overload}",
       methods=("fmod",), inplace=("fmod_",), promote=True, parse=_fmod_args, samples=_quotient_samples)
@_quiet
def fmod(xp, input, other, *, overload=1):
    """Elementwise remainder of ``input / other`` with ``input``'s sign (C's ``fmod``)."""
    _refuse_dtype(xp, "fmod_cpu", input, "fiu")
    _check_integer_divisor(other)
    return xp.fmod(input, other)


# -- arithmetic under other names, and its relatives -------------------------------------------

multiply = mul
subtract = sub
negative = neg


def positive(input: Tensor) -> Tensor:
    """``input`` itself (``+input``), as PyTorch returns it; refused for bool tensors."""
    if input.dtype is _dtype.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def _result_dtype(*args: Any) -> _dtype.dtype:
    """PyTorch's result type of tensors and numbers."""
    dims: list[_dtype.dtype] = []
    zero_dims: list[_dtype.dtype] = []
    scalars: list[Any] = []
    for a in args:
        if isinstance(a, Tensor):
            (dims if a.ndim else zero_dims).append(a.dtype)
        else:
            scalars.append(a)
    return _dtype.result_type(dims, zero_dims, scalars)


def _rsub_args(input: Any, other: Any, alpha: Any = 1) -> tuple[tuple, dict]:
    _first_is_tensor("rsub", input, other)
    if _is_bool(input) and _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    if isinstance(alpha, float) and not _result_dtype(input, other).is_floating_point:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return (input, other), {"alpha": alpha, "overload": 0 if isinstance(other, Tensor) else 1}


@defop(ref=lambda torch: torch.rsub, vjp=(lambda g, alpha: -g if alpha == 1 else g * -alpha, identity),
       node=("RsubBackward0", "RsubBackward1"), node_for=lambda alpha, overload: f"RsubBackward{overload}",
       promote=True, parse=_rsub_args, methods=("__rsub__",),  # ``1 - x``: PyTorch's Tensor.__rsub__ is rsub
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 3, 4)), {}), ((_r(rng, 3, 1), _r(rng, 4)), {"alpha": 2.5}),
                            ((_r(rng), _r(rng, 2, 3)), {}), ((_r(rng, 2, 3), 1.5), {}),
                            ((_r(rng, 0, 3), _r(rng, 3)), {"alpha": -1})])
def rsub(xp, input, other, *, alpha=1, overload=0):
    """Elementwise ``other - alpha * input`` (subtraction with the operands reversed)."""
    return other - input if alpha == 1 else other - alpha * input


def _lerp(xp: Any, input: Any, end: Any, weight: Any) -> Any:
    # PyTorch's formula, exact at both ends: from ``input`` for small weights,
    # from ``end`` for large ones.
    if isinstance(weight, (int, float)):
        return input + weight * (end - input) if abs(weight) < 0.5 else end - (end - input) * (1 - weight)
    return xp.where(xp.abs(weight) < 0.5, input + weight * (end - input), end - (end - input) * (1 - weight))


def _lerp_samples(with_weight: Callable[[np.random.Generator, tuple[int, ...]], Any]):
    def samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
        return [((_r(rng, 3, 4), _r(rng, 3, 4), with_weight(rng, (3, 4))), {}),
                ((_r(rng, 3, 1), _r(rng, 4), with_weight(rng, (4,))), {}),
                ((_r(rng), _r(rng, 2, 3), with_weight(rng, ())), {}),
                ((_r(rng, 0, 3), _r(rng, 3), with_weight(rng, (3,))), {})]

    return samples


@defop(ref=lambda torch: torch.lerp, vjp=(lambda g, weight: g * (1 - weight), lambda g, weight: g * weight),
       node="LerpBackward0", promote=True,
       parse=lambda input, end, weight: ((input, end), {"weight": weight}),
       samples=_lerp_samples(lambda rng, shape: float(rng.uniform(-0.5, 1.5))))
def _lerp_scalar(xp, input, end, *, weight):
    """``lerp`` with a number weight (PyTorch's ``lerp.Scalar``, LerpBackward0)."""
    _refuse_dtype(xp, "lerp_kernel_scalar", input, "f")
    return _lerp(xp, input, end, weight)


@defop(ref=lambda torch: torch.lerp,
       vjp=(lambda g, weight: g * (1 - weight), lambda g, weight: g * weight,
            lambda g, input, end: g * (end - input)),
       node="LerpBackward1", promote=True,
       samples=_lerp_samples(lambda rng, shape: rng.uniform(-0.5, 1.5, size=shape)))
def _lerp_tensor(xp, input, end, weight):
    """``lerp`` with a tensor weight (PyTorch's ``lerp.Tensor``, LerpBackward1)."""
    _refuse_dtype(xp, "lerp_kernel_tensor", input, "f")
    return _lerp(xp, input, end, weight)


def _lerp_dtype_check(input: Tensor, name: str, t: Tensor) -> None:
    if t.dtype is not input.dtype:
        raise RuntimeError(f"expected dtype {_dtype.CPP_TYPE_NAMES[input.dtype.name]} for `{name}` but got dtype "
                           f"{_dtype.CPP_TYPE_NAMES[t.dtype.name]}")


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """Linear interpolation ``input + weight * (end - input)``, elementwise; ``weight``
    is a number or a tensor.  ``end`` (and a weight tensor that is not 0-d) must
    have ``input``'s dtype, as in PyTorch."""
    for pos, (name, t) in enumerate((("input", input), ("end", end)), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"lerp(): argument '{name}' (position {pos}) must be Tensor, not {type(t).__name__}")
    _lerp_dtype_check(input, "end", end)
    if isinstance(weight, Tensor):
        if weight.ndim:
            _lerp_dtype_check(input, "weight", weight)
        return _lerp_tensor(input, end, weight)
    return _lerp_scalar(input, end, weight)


def _addc_args(name: str) -> Callable[..., tuple[tuple, dict]]:
    def parse(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> tuple[tuple, dict]:
        for pos, (n, t) in enumerate((("input", input), ("tensor1", tensor1), ("tensor2", tensor2)), 1):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name}(): argument '{n}' (position {pos}) must be Tensor, not {type(t).__name__}")
        if name == "addcdiv" and not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
            raise RuntimeError(
                "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
                "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
                "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
                "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
        return (input, tensor1, tensor2), {"value": value}

    return parse


def _value_in(value: Any, arr: Any) -> Any:
    # ``value`` converted to the computation's dtype, as PyTorch's kernels do (2.5 is 2 for integers).
    return int(value) if arr.dtype.kind in "iu" else value


def _addc_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((_r(rng, 3, 4), _r(rng, 3, 4), _kinks(rng, 3, 4)), {}),
            ((_r(rng, 4), _r(rng, 3, 1), _kinks(rng, 3, 4)), {"value": 0.5}),
            ((_r(rng), _r(rng, 2, 3), _kinks(rng)), {"value": -2}),
            ((_r(rng, 0, 3), _r(rng, 3), _kinks(rng, 1, 3)), {})]


@defop(ref=lambda torch: torch.addcmul,
       vjp=(identity, lambda g, tensor2, value: g * (tensor2 * value), lambda g, tensor1, value: g * (tensor1 * value)),
       node="AddcmulBackward0", methods=("addcmul",), inplace=("addcmul_",), promote=True,
       parse=_addc_args("addcmul"), samples=_addc_samples)
def addcmul(xp, input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 * tensor2``."""
    _refuse_dtype(xp, "addcmul_cpu_out", input, "fiu")
    return input + _value_in(value, input) * tensor1 * tensor2


@defop(ref=lambda torch: torch.addcdiv,
       vjp=(identity, lambda g, tensor2, value: g * (value / tensor2),
            lambda g, tensor1, tensor2, value: -g * (value * tensor1 / (tensor2 * tensor2))),
       node="AddcdivBackward0", methods=("addcdiv",), inplace=("addcdiv_",), promote=True,
       parse=_addc_args("addcdiv"), samples=_addc_samples)
@_quiet
def addcdiv(xp, input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 / tensor2`` (true division; integer
    ``tensor1`` and ``tensor2`` are refused, as in PyTorch)."""
    return input + _value_in(value, input) * tensor1 / tensor2


def _bound_args(name: str, arg: str, input: Any, bound: Any) -> tuple[tuple, dict]:
    _first_is_tensor(name, input, bound, arg)
    if isinstance(bound, Tensor):
        return (input, bound), {"overload": 1}
    _dtype.check_scalar(bound, _result_dtype(input, bound))  # Note [Checked scalar conversion]
    return (input, bound), {"overload": 0}


def _bound_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    return [((x, np.where(rng.random((3, 4)) < 0.5, x - 0.3, x + 0.3)), {}), ((_r(rng, 3, 4), _r(rng, 4)), {}),
            ((_r(rng, 2, 3), 0.25), {}), ((_r(rng, 2, 3), np.asarray(-0.4)), {}), ((_r(rng, 0, 3), _r(rng, 3)), {})]


@defop(ref=lambda torch: torch.clamp_min,
       vjp=(lambda g, input, min: where(input >= min, g, 0.0), lambda g, input, min: where(input < min, g, 0.0)),
       node=("ClampMinBackward0", "ClampMinBackward1"), node_for=lambda overload: f"ClampMinBackward{overload}",
       methods=("clamp_min",), inplace=("clamp_min_",), promote=True,
       parse=lambda input, min: _bound_args("clamp_min", "min", input, min), samples=_bound_samples)
def clamp_min(xp, input, min, *, overload=1):
    """Elementwise ``max(input, min)`` (nan propagates); the gradient passes at the bound, as in PyTorch."""
    return xp.maximum(input, min)


@defop(ref=lambda torch: torch.clamp_max,
       vjp=(lambda g, input, max: where(input <= max, g, 0.0), lambda g, input, max: where(input > max, g, 0.0)),
       node=("ClampMaxBackward0", "ClampMaxBackward1"), node_for=lambda overload: f"ClampMaxBackward{overload}",
       methods=("clamp_max",), inplace=("clamp_max_",), promote=True,
       parse=lambda input, max: _bound_args("clamp_max", "max", input, max), samples=_bound_samples)
def clamp_max(xp, input, max, *, overload=1):
    """Elementwise ``min(input, max)`` (nan propagates); the gradient passes at the bound, as in PyTorch."""
    return xp.minimum(input, max)


def _copysign_args(input: Any, other: Any) -> tuple[tuple, dict]:
    _first_is_tensor("copysign", input, other)
    return (input, other), {"overload": 0 if isinstance(other, Tensor) else 1}


def _copysign_grad(g: Tensor, input: Tensor, out: Tensor) -> Tensor:
    # PyTorch's copysign_tensor_self_backward: g * out / input, 0 where input is 0
    zero = input == 0
    return g * where(zero, 0.0, out / where(zero, 1.0, input))


@defop(ref=lambda torch: torch.copysign, vjp=(_copysign_grad, _zeros),
       node=("CopysignBackward0", "CopysignBackward1"), node_for=lambda overload: f"CopysignBackward{overload}",
       methods=("copysign",), inplace=("copysign_",), promote=True, to_float=True, parse=_copysign_args,
       samples=lambda rng: [((_kinks(rng, 3, 4), _kinks(rng, 3, 4)), {}), ((_kinks(rng, 3, 1), _kinks(rng, 4)), {}),
                            ((_kinks(rng), _kinks(rng, 2, 3)), {}), ((_kinks(rng, 2, 3), -1.0), {}),
                            ((_r(rng, 0, 3), _r(rng, 3)), {})])
def copysign(xp, input, other, *, overload=0):
    """Elementwise magnitude of ``input`` with the sign (bit) of ``other``; integers compute in float."""
    return xp.copysign(input, other)


def _heaviside_args(input: Any, values: Any) -> tuple[tuple, dict]:
    _tensors("heaviside", "input", "values")(input, values)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return (input, values), {}


@defop(ref=lambda torch: torch.heaviside, vjp=(_no_derivative("heaviside"),) * 2, node=_NOT_IMPLEMENTED,
       methods=("heaviside",), inplace=("heaviside_",), parse=_heaviside_args)
def heaviside(xp, input, values):
    """Elementwise step function: 0 below 0, ``values`` at 0, 1 above (0 for nan).
    Not differentiable: see Note [Recorded but not differentiable]."""
    return xp.where(input == 0, values, input > 0).astype(input.dtype, copy=False)


# Their gradients, g / (1 + exp(other - input)) and g / (1 + 2**(other - input))
# as PyTorch writes them, are computed as sigmoids, which do not overflow.
@defop(ref=lambda torch: torch.logaddexp,
       vjp=(lambda g, input, other: g * sigmoid(input - other), lambda g, input, other: g * sigmoid(other - input)),
       node="LogaddexpBackward0", methods=("logaddexp",), promote=True,
       parse=_tensors("logaddexp", "input", "other"), samples=_tensor_pairs())
@_quiet
def logaddexp(xp, input, other):
    """Elementwise ``log(exp(input) + exp(other))``, without overflow; floating tensors only."""
    _refuse_dtype(xp, "logaddexp_cpu", input, "f")
    return xp.logaddexp(input, other)


@defop(ref=lambda torch: torch.logaddexp2,
       vjp=(lambda g, input, other: g * sigmoid((input - other) * _LN2),
            lambda g, input, other: g * sigmoid((other - input) * _LN2)),
       node="Logaddexp2Backward0", methods=("logaddexp2",), promote=True,
       parse=_tensors("logaddexp2", "input", "other"), samples=_tensor_pairs())
@_quiet
def logaddexp2(xp, input, other):
    """Elementwise ``log2(2**input + 2**other)``, without overflow; floating tensors only."""
    _refuse_dtype(xp, "logaddexp2_cpu", input, "f")
    return xp.logaddexp2(input, other)


def _nan_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [*_tensor_pairs()(rng), ((np.array([np.nan, 1.0, 2.0]), np.array([0.5, np.nan, 3.0])), {})]


def _fmax_keeps_input(input: Tensor, other: Tensor) -> Tensor:
    return logical_or(input >= other, isnan(other))


def _fmin_keeps_input(input: Tensor, other: Tensor) -> Tensor:
    return logical_or(input <= other, isnan(other))


@defop(ref=lambda torch: torch.fmax,
       vjp=(lambda g, input, other: where(_fmax_keeps_input(input, other), g, 0.0),
            lambda g, input, other: where(_fmax_keeps_input(input, other), 0.0, g)),
       node="FmaxBackward0", methods=("fmax",), promote=True, parse=_tensors("fmax", "input", "other"),
       samples=_nan_samples)
def fmax(xp, input, other):
    """Elementwise maximum ignoring nan (nan only where both are); a tie's gradient goes to ``input``."""
    return xp.fmax(input, other)


@defop(ref=lambda torch: torch.fmin,
       vjp=(lambda g, input, other: where(_fmin_keeps_input(input, other), g, 0.0),
            lambda g, input, other: where(_fmin_keeps_input(input, other), 0.0, g)),
       node="FminBackward0", methods=("fmin",), promote=True, parse=_tensors("fmin", "input", "other"),
       samples=_nan_samples)
def fmin(xp, input, other):
    """Elementwise minimum ignoring nan (nan only where both are); a tie's gradient goes to ``input``."""
    return xp.fmin(input, other)


def _as_double(v: Any) -> Any:
    if isinstance(v, Tensor):
        return v if v.dtype is _dtype.float64 else v.to(_dtype.float64)
    return float(v)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in float64 whatever the inputs' dtypes (PyTorch's
    composite: a cast, recorded, then ``pow``)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): argument 'input' (position 1) must be Tensor, not "
                        + type(input).__name__)
    return pow(_as_double(input), _as_double(exponent))


_float_power_into = inplace_method(float_power, "float_power_")


def _float_power_(self: Tensor, exponent: Any) -> Tensor:
    """``t.float_power_(exponent)``: only for a float64 ``t`` (the result's dtype), as in PyTorch."""
    if self.dtype is not _dtype.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {_dtype.SCALAR_TYPE_NAMES[self.dtype.name]} "
                           "but the operation's result requires dtype Double")
    return _float_power_into(self, exponent)


# Note [ldexp's gradient with integer exponents]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# d/dinput ldexp(input, other) is 2**other.  PyTorch computes it as
# ``pow(2, other)``, which for an integer ``other`` is integer arithmetic: its
# gradient is 0 wherever the exponent is negative (``2 ** -1 == 0``).  agrad
# gives the true derivative, in the gradient's dtype: a deliberate difference
# (tests/ops/test_pointwise.py), the same values wherever the exponents are
# floating or non-negative.
def _ldexp_grad_input(g: Tensor, other: Tensor) -> Tensor:
    return g * exp2(other if other.dtype.is_floating_point else other.to(g.dtype))


@defop(ref=lambda torch: torch.ldexp,
       vjp=(_ldexp_grad_input, lambda g, out: g * out * _LN2),
       node="LdexpBackward0", methods=("ldexp",), inplace=("ldexp_",), promote=True, to_float=True,
       parse=_tensors("ldexp", "input", "other"),
       samples=lambda rng: [((_r(rng, 3, 4), rng.integers(0, 4, (3, 4))), {}), *_tensor_pairs()(rng)])
@_quiet
def ldexp(xp, input, other):
    """Elementwise ``input * 2 ** other``; integers compute in the default float dtype."""
    return input * xp.exp2(other)


# PyTorch's gradient: ``grad`` for ``input`` except where it equals ``other``
# (where the result is ``other``), zeros for ``other``.
@defop(ref=lambda torch: torch.nextafter, vjp=(lambda g, input, other: where(input == other, 0.0, g), _zeros),
       node="NextafterBackward0",
       methods=("nextafter",), inplace=("nextafter_",), promote=True, opmath=False,
       parse=_tensors("nextafter", "input", "other"), samples=_tensor_pairs())
def nextafter(xp, input, other):
    """Elementwise next floating-point value after ``input`` towards ``other``; floating tensors only."""
    _refuse_dtype(xp, "nextafter_cpu", input, "f")
    return xp.nextafter(input, other)


# -- integers and bits (not differentiable) ------------------------------------------------


def _integer_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((rng.integers(-20, 20, (3, 4)), rng.integers(-20, 20, (3, 4))), {}),
            ((rng.integers(-20, 20, (3, 1)), rng.integers(0, 20, 4)), {}),
            ((np.asarray(12), rng.integers(-20, 20, (2, 3))), {}),
            ((np.array([0, 0, -6], dtype=np.int32), np.array([0, 4, 4], dtype=np.int8)), {})]


def _integer_op(name: str, ufunc: str, doc: str):
    def forward(xp, input, other):
        _refuse_dtype(xp, f"{name}_cpu", input, "iu")
        return getattr(xp, ufunc)(input, other)

    forward.__name__ = name
    forward.__doc__ = doc
    return defop(ref=lambda torch: getattr(torch, name), vjp=None, methods=(name,), inplace=(name + "_",),
                 promote=True, parse=_tensors(name, "input", "other"), samples=_integer_samples)(forward)


gcd = _integer_op("gcd", "gcd", "Elementwise greatest common divisor (non-negative); integer tensors only.")
lcm = _integer_op("lcm", "lcm", "Elementwise least common multiple (non-negative); integer tensors only.")


def _bitwise_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((rng.integers(-20, 20, (3, 4)), rng.integers(-20, 20, (3, 4))), {}),
            ((rng.random((3, 1)) < 0.5, rng.random(4) < 0.5), {}),
            ((rng.integers(0, 200, (2, 3)).astype(np.uint8), np.asarray(np.int8(-3))), {}),
            ((rng.integers(-20, 20, (2, 3)), 6), {}), ((rng.random(3) < 0.5, True), {}),
            ((np.zeros((0, 3), dtype=np.int16), rng.integers(0, 5, 3)), {})]


def _bitwise(name: str, ufunc: str, dunder: str, doc: str):
    def forward(xp, input, other):
        _refuse_dtype(xp, f"{name}_cpu", input, "iub")
        return getattr(xp, ufunc)(input, other)

    forward.__name__ = name
    forward.__doc__ = doc
    return defop(ref=lambda torch: getattr(torch, name), vjp=None, methods=(name, f"__{dunder}__"),
                 rmethods=(f"__r{dunder}__",), inplace=(name + "_", f"__i{dunder}__"), promote=True,
                 samples=_bitwise_samples)(forward)


bitwise_and = _bitwise("bitwise_and", "bitwise_and", "and",
                       "Elementwise bitwise and (logical and for bool tensors); integer and bool tensors only.")
bitwise_or = _bitwise("bitwise_or", "bitwise_or", "or",
                      "Elementwise bitwise or (logical or for bool tensors); integer and bool tensors only.")
bitwise_xor = _bitwise("bitwise_xor", "bitwise_xor", "xor",
                       "Elementwise bitwise exclusive or (logical for bool tensors); integer and bool tensors only.")


# Note [Shifts out of range]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# C leaves a shift by a negative amount or by the width of the type or more
# undefined; PyTorch defines it, and so does agrad: a left shift gives 0, a
# right shift the sign (-1 or 0 for signed types, 0 for unsigned ones).
# numpy's shifts are only used with amounts in range.
def _shift_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((rng.integers(-200, 200, (3, 4)), rng.integers(0, 10, (3, 4))), {}),
            ((rng.integers(-100, 100, (3, 1)).astype(np.int8), np.array([-1, 0, 3, 8, 9], dtype=np.int8)), {}),
            ((rng.integers(0, 255, 4).astype(np.uint8), np.array([1, 7, 8, 255], dtype=np.uint8)), {}),
            ((rng.integers(-20, 20, (2, 3)), 70), {}), ((3, rng.integers(0, 5, 4)), {}),
            ((np.zeros((0, 3), dtype=np.int64), np.arange(3)), {})]


def _shift(xp: Any, input: Any, other: Any, kernel: str) -> Any:
    _refuse_dtype(xp, f"{kernel}_cpu", input, "iu")
    bits = input.dtype.itemsize * 8
    out_of_range = (other < 0) | (other >= bits)  # Note [Shifts out of range]
    amount = xp.where(out_of_range, 0, other)
    if kernel == "lshift":
        out = xp.where(out_of_range, 0, xp.left_shift(input, amount))
    else:
        fill = xp.right_shift(input, bits - 1) if input.dtype.kind == "i" else 0
        out = xp.where(out_of_range, fill, xp.right_shift(input, amount))
    return out.astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.bitwise_left_shift, vjp=None, methods=("bitwise_left_shift", "__lshift__"),
       rmethods=("__rlshift__",), inplace=("bitwise_left_shift_", "__ilshift__"), promote=True,
       samples=_shift_samples)
def bitwise_left_shift(xp, input, other):
    """Elementwise ``input << other`` (0 for amounts out of range); integer tensors only."""
    return _shift(xp, input, other, "lshift")


@defop(ref=lambda torch: torch.bitwise_right_shift, vjp=None, methods=("bitwise_right_shift", "__rshift__"),
       rmethods=("__rrshift__",), inplace=("bitwise_right_shift_", "__irshift__"), promote=True,
       samples=_shift_samples)
def bitwise_right_shift(xp, input, other):
    """Elementwise arithmetic ``input >> other`` (the sign for amounts out of range); integer tensors only."""
    return _shift(xp, input, other, "rshift")


# -- comparisons: other names, in-place forms --------------------------------------------------

greater = gt
greater_equal = ge
less = lt
less_equal = le
not_equal = ne

_COMPARISONS = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
                "ge": "greater_equal"}


def _compare_into_args(input: Any, other: Any, *, op: str) -> tuple[tuple, dict]:
    # PyTorch's overloads name the node: EqBackward0 for a number, EqBackward1 for a tensor.
    return (input, other), {"op": op, "overload": 1 if isinstance(other, Tensor) else 0,
                            "dtype": input._data.dtype.name}


def _compare_into_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((_r(rng, 3, 4), _r(rng, 3, 4)), {"op": "lt"}), ((_r(rng, 3, 4), _r(rng, 4)), {"op": "ge"}),
            ((_r(rng, 2, 3), 0.5), {"op": "gt"}), ((_r(rng, 2, 3), rng.integers(-2, 2, (2, 3))), {"op": "le"}),
            ((_r(rng), _r(rng)), {"op": "ne"}), ((_r(rng, 3), 1.0), {"op": "eq"}),
            ((_r(rng, 0, 3), _r(rng, 3)), {"op": "lt"})]


# Note [In-place comparisons]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``t.lt_(other)`` writes the comparison into ``t`` in ``t``'s dtype (1.0 and
# 0.0 for a float tensor).  PyTorch records it (LtBackward0 for a number,
# LtBackward1 for a tensor) with zero gradients, so that the values it
# overwrote stop contributing; the plain comparisons are not differentiable
# (their result is bool), so the in-place forms are this op of their own.
@defop(ref=lambda torch: lambda input, other, op: getattr(input.clone(), op + "_")(other),
       vjp=(_zeros, _zeros), node=tuple(f"{op.capitalize()}Backward{k}" for op in _COMPARISONS for k in (0, 1)),
       node_for=lambda op, overload, dtype: f"{op.capitalize()}Backward{overload}", promote=True,
       parse=_compare_into_args, samples=_compare_into_samples)
def _compare_into(xp, input, other, *, op, overload, dtype):
    """What ``input.<op>_(other)`` writes: the comparison in ``input``'s dtype; see Note [In-place comparisons]."""
    return getattr(xp, _COMPARISONS[op])(input, other).astype(dtype)


def _compare_in_place(op: str, name: str) -> Callable[..., Tensor]:
    return inplace_method(lambda self, other: _compare_into(self, other, op=op), name)


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "square": square,
    "square_": inplace_method(square, "square_"),
    "polygamma": _polygamma_method,
    "polygamma_": inplace_method(_polygamma_written, "polygamma_"),
    "multiply": mul,
    "multiply_": inplace_method(mul, "multiply_"),
    "subtract": sub,
    "subtract_": inplace_method(sub, "subtract_"),
    "negative_": inplace_method(neg, "negative_"),
    "positive": positive,
    "div": div,
    "div_": inplace_method(div, "div_"),
    "divide": divide,
    "divide_": inplace_method(divide, "divide_"),
    "true_divide": _true_div,
    "true_divide_": inplace_method(_true_div, "true_divide_"),
    "lerp": lerp,
    "lerp_": inplace_method(lerp, "lerp_"),
    "float_power": float_power,
    "float_power_": _float_power_,
    "greater": gt,
    "greater_equal": ge,
    "less": lt,
    "less_equal": le,
    "not_equal": ne,
    **{f"{op}_": _compare_in_place(op, f"{op}_") for op in _COMPARISONS},
    **{f"{alias}_": _compare_in_place(op, f"{alias}_") for alias, op in (
        ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne"))},
}
