"""The affine_range write-conflict check (at trace time).

An affine_range promises iterations without a loop-carried dependency, so the
chip may run them in any order (or preempt between them). Two iterations that
store into overlapping parts of one kernel argument break that promise: which
one wins depends on the order. When an affine loop closes, every pair of stores
inside it (a store with itself included) is checked: could iteration a of one
and iteration a' != a of the other write one element?

A store covers, per dim of the argument, [start, start + size) with start an
affine expression of the loop variables. In one dim, two stores overlap when
y = start_A - start_B lies in [1 - size_A, size_B - 1]. The loops outside the
checked one have one value for both stores (their contribution to y: a range);
the loops inside it run freely in each (a range too); the checked loop's
variable gives step_A * a - step_B * a'. With equal steps (every kernel that
tiles an output) that is step * k with k = a - a' != 0, so each dim allows an
interval of k and the stores conflict when the dims' intervals share a k != 0.
Unequal steps are checked pair by pair for loops of up to 64 iterations (and
not checked above that: the check is a help, neurond's validation is the rule).
"""

import collections
import math

Store = collections.namedtuple("Store", "arg dims loops trips line")

_BRUTE_FORCE_TRIPS = 64


def _range(store, start, levels):
    """(lo, hi) of sum(step[l] * iv[l]) over `levels` (each iv in [0, trips[l]))."""
    lo = hi = 0
    for l in levels:
        span = start.steps[l] * (store.trips[l] - 1)
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi


def _dim_terms(A, B, sa, za, sb, zb, depth):
    """For one dim: (Lx, Ux) such that the stores overlap in it iff
    step_A * a - step_B * a' lies in [Lx, Ux]."""
    outer = range(depth)
    diff_lo = diff_hi = sa.base - sb.base
    for l in outer:  # one value of iv[l] for both
        span = (sa.steps[l] - sb.steps[l]) * (A.trips[l] - 1)
        diff_lo, diff_hi = (diff_lo + span, diff_hi) if span < 0 else (diff_lo, diff_hi + span)
    a_lo, a_hi = _range(A, sa, range(depth + 1, len(A.trips)))
    b_lo, b_hi = _range(B, sb, range(depth + 1, len(B.trips)))
    c_lo, c_hi = diff_lo + a_lo - b_hi, diff_hi + a_hi - b_lo  # start_A - start_B without the loop's term
    return 1 - za - c_hi, zb - 1 - c_lo


def _conflict(A, B, depth, n):
    keys = A.dims.keys() & B.dims.keys()
    terms = []
    for key in keys:
        (sa, za), (sb, zb) = A.dims[key], B.dims[key]
        lx, ux = _dim_terms(A, B, sa, za, sb, zb, depth)
        terms.append((sa.steps[depth], sb.steps[depth], lx, ux))
    if all(ta == tb for ta, tb, _, _ in terms):
        k_lo, k_hi = -(n - 1), n - 1
        for s, _, lx, ux in terms:
            if s == 0:
                if not lx <= 0 <= ux:
                    return False
                continue
            lo, hi = (lx, ux) if s > 0 else (ux, lx)
            k_lo, k_hi = max(k_lo, math.ceil(lo / s)), min(k_hi, math.floor(hi / s))
        return k_lo <= k_hi and (k_lo != 0 or k_hi != 0)
    if n > _BRUTE_FORCE_TRIPS:
        return False
    return any(a != b and all(lx <= ta * a - tb * b <= ux for ta, tb, lx, ux in terms)
               for a in range(n) for b in range(n))


def check_affine_loop(tracer, loop_id, depth, n):
    """Raises KernelError if two iterations of the affine loop (id, at `depth`,
    n iterations) store into overlapping parts of one argument."""
    if n < 2:
        return
    inside = [s for s in tracer.stores if len(s.loops) > depth and s.loops[depth] == loop_id]
    for x, A in enumerate(inside):
        for B in inside[x:]:
            if A.arg == B.arg and _conflict(A, B, depth, n):
                from ._trace import KernelError, source_line
                names = list(tracer.code.co_varnames[:tracer.code.co_argcount])
                arg = names[A.arg] if A.arg < len(names) else f"argument {A.arg}"
                where = f"the store at line {A.line} ({source_line(tracer.file, A.line)})"
                if B is not A:
                    where += f" and the store at line {B.line} ({source_line(tracer.file, B.line)})"
                raise KernelError(f"write conflict: different iterations of this affine_range store into "
                                  f"overlapping parts of {arg!r}: {where}; give each iteration its own part of "
                                  f"the output, or use sequential_range if the iterations depend on each other")
