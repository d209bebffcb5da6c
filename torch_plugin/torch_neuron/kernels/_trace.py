"""Tracing a kernel into a tile program: affine loop expressions, HBM views,
on-chip tiles, and the tracer that records instructions with their source line.

A kernel runs once per shape/dtype signature with symbolic loop variables; every
tile operation appends one instruction (dicts packed by _format.pack). Tiles get
on-chip memory from a bump allocator: a tile created inside a loop body is one
region reused by every iteration, which is what the program's affine offsets say.
"""

import inspect
import os
import threading

from . import _format as F
from . import _writes

_state = threading.local()


class KernelError(Exception):
    """A kernel that cannot become a tile program, or that neurond refused; the
    message names the kernel's file and line."""


def _tracer():
    t = getattr(_state, "tracer", None)
    if t is None:
        raise KernelError("tile operations run only inside a @torch_neuron.kernels.kernel function being traced")
    return t


# ---------------------------------------------------------------- affine values

class Affine:
    """base + sum(steps[l] * iv[l]) over the open loops (l = 0 the outermost)."""

    __slots__ = ("base", "steps")

    def __init__(self, base=0, steps=(0,) * F.MAX_LOOPS):
        self.base = int(base)
        self.steps = tuple(int(s) for s in steps)

    @staticmethod
    def of(v):
        if isinstance(v, Affine):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise KernelError(f"{v!r} is not an integer or a loop expression (loop bounds and offsets are static)")
        return Affine(v)

    def __add__(self, o):
        o = Affine.of(o)
        return Affine(self.base + o.base, tuple(a + b for a, b in zip(self.steps, o.steps)))

    __radd__ = __add__

    def __neg__(self):
        return Affine(-self.base, tuple(-s for s in self.steps))

    def __sub__(self, o):
        return self + (-Affine.of(o))

    def __rsub__(self, o):
        return Affine.of(o) - self

    def __mul__(self, k):
        if isinstance(k, Affine):
            if any(k.steps) and any(self.steps):
                raise KernelError("a loop variable times a loop variable is not affine")
            k, s = (k.base, self) if not any(k.steps) else (self.base, k)
            return Affine(s.base * k, tuple(x * k for x in s.steps))
        if not isinstance(k, int):
            raise KernelError(f"loop expressions multiply by integers, not {k!r}")
        return Affine(self.base * k, tuple(s * k for s in self.steps))

    __rmul__ = __mul__

    def constant(self):
        return None if any(self.steps) else self.base

    def range(self, trips):
        """(lowest, highest) value over the open loops' iterations."""
        lo = hi = self.base
        for s, n in zip(self.steps, trips):
            span = s * (n - 1)
            lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
        return lo, hi

    def wire(self):
        return (self.base, self.steps)

    def __repr__(self):
        terms = [f"{s}*i{l}" for l, s in enumerate(self.steps) if s]
        return " + ".join(terms + [str(self.base)]) if terms else str(self.base)

    def __index__(self):
        c = self.constant()
        if c is None:
            raise KernelError(f"{self!r} depends on a loop variable: it cannot be a Python int")
        return c


def _steps_at(depth):
    return tuple(1 if l == depth else 0 for l in range(F.MAX_LOOPS))


def _loop(n, flags):
    t = _tracer()
    n = Affine.of(n).constant()
    if n is None or n < 1:
        raise KernelError(f"a loop runs a static number of times >= 1, not {n!r}")
    if len(t.trips) == F.MAX_LOOPS:
        raise KernelError(f"loops nest at most {F.MAX_LOOPS} deep")
    t.emit(dict(op=F.OP_LOOP_BEGIN, i=(n,), flags=flags))
    depth = len(t.trips)
    t.trips.append(n)
    t.loop_ids.append(t.next_loop_id)
    t.next_loop_id += 1
    completed = False
    try:
        yield Affine(0, _steps_at(depth))
        completed = True
    finally:
        t.trips.pop()
        loop_id = t.loop_ids.pop()
        t.emit(dict(op=F.OP_LOOP_END))
    if completed and not flags & F.SEQUENTIAL:
        _writes.check_affine_loop(t, loop_id, depth, n)


def affine_range(n):
    """Iterations without a loop-carried dependency (PSUM accumulation allowed)."""
    return _loop(n, 0)


def sequential_range(n):
    """Iterations that depend on each other."""
    return _loop(n, F.SEQUENTIAL)


def static_range(n):
    """A loop unrolled at trace time: each iteration is a Python int, so an inner
    loop's bound or a slice may depend on it (a triangular loop: the tiles of a
    causal mask's lower half). Every iteration's tiles reuse one on-chip region
    (the copies run one after the other); tiles made before the loop persist."""
    t = _tracer()
    n = Affine.of(n).constant()
    if n is None or n < 0:
        raise KernelError(f"static_range takes a static count >= 0, not {n!r}")
    mark, high = (t.sbuf_next, t.psum_next), (t.sbuf_next, t.psum_next)
    for i in range(n):
        t.sbuf_next, t.psum_next = mark
        yield i
        high = (max(high[0], t.sbuf_next), max(high[1], t.psum_next))
    t.sbuf_next, t.psum_next = high  # a tile of the last copy may still be read after the loop


def cdiv(a, b):
    return -(-int(a) // int(b))


# ---------------------------------------------------------------- dtypes

def dtype_code(dtype):
    import torch
    codes = {torch.float32: F.F32, torch.bfloat16: F.BF16, torch.float16: F.F16, torch.int32: F.I32}
    if dtype not in codes:
        raise KernelError(f"tiles hold float32, bfloat16, float16 or int32, not {dtype}")
    return codes[dtype]


def torch_dtype(code):
    import torch
    return {F.F32: torch.float32, F.BF16: torch.bfloat16, F.F16: torch.float16, F.I32: torch.int32}[code]


# ---------------------------------------------------------------- HBM tensors

class HBMView:
    """A rectangle of a kernel argument: per dim an affine start, a static size
    and a stride (elements). Parts past the argument's shape are masked."""

    def __init__(self, arg, shape, dtype, starts, sizes, strides, bounds, base=None, fixed=()):
        self.arg, self.shape, self.dtype = arg, tuple(shape), dtype
        self.starts, self.sizes, self.strides, self.bounds = list(starts), list(sizes), list(strides), list(bounds)
        self.base = Affine(0) if base is None else base  # elements of the dims an index dropped
        self.fixed = tuple(fixed)  # those dims: (stride, index, bound), for the write-conflict check

    @property
    def T(self):
        if len(self.sizes) != 2:
            raise KernelError(".T is for 2-D views")
        r = lambda v: list(reversed(v))
        return HBMView(self.arg, r(self.shape), self.dtype, r(self.starts), r(self.sizes), r(self.strides),
                       r(self.bounds), self.base, self.fixed)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > len(self.sizes):
            raise KernelError(f"{len(key)} indices for a {len(self.sizes)}-D view")
        starts, sizes, strides, bounds = [], [], [], []
        base, fixed = self.base, list(self.fixed)
        for d in range(len(self.sizes)):
            k = key[d] if d < len(key) else slice(None)
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise KernelError("slices take step 1 (use a transposed or strided view instead)")
                lo = Affine.of(0 if k.start is None else k.start)
                hi = Affine.of(self.sizes[d] if k.stop is None else k.stop)
                n = (hi - lo).constant()
                if n is None or n < 1:
                    raise KernelError(f"slice {k} of dim {d}: its size must be a static integer >= 1 "
                                      f"(write x[i*128:i*128+128], not x[i*128:n])")
                starts.append(self.starts[d] + lo)
                sizes.append(n)
                strides.append(self.strides[d])
                bounds.append(self.bounds[d])
            else:
                # An index (an int or a loop expression) drops the dim: x[b, rows, :]. It is
                # not masked, so it must lie inside the dim in every iteration.
                if isinstance(k, slice) or k is None or isinstance(k, float):
                    raise KernelError(f"index dim {d} with a slice, an int or a loop expression, not {k!r}")
                idx = self.starts[d] + Affine.of(k)
                lo, hi = idx.range(_tracer().trips)
                if lo < 0 or hi + 1 > self.bounds[d] or self.sizes[d] < 1:
                    raise KernelError(f"index {Affine.of(k)!r} of dim {d} runs over [{lo}, {hi}], outside "
                                      f"[0, {self.bounds[d]})")
                base = base + idx * self.strides[d]
                fixed.append((self.strides[d], idx, self.bounds[d]))
        if not sizes:
            raise KernelError("a view keeps at least one dim (index with a slice: x[i:i+1])")
        return HBMView(self.arg, self.shape, self.dtype, starts, sizes, strides, bounds, base, fixed)

    def broadcast(self, partitions):
        """A 1-D view repeated on `partitions` rows (the DMA reads it that many times)."""
        if len(self.sizes) != 1:
            raise KernelError("broadcast() is for 1-D views")
        return HBMView(self.arg, (partitions,) + self.shape, self.dtype, [Affine(0)] + self.starts,
                       [partitions] + self.sizes, [0] + self.strides, [partitions] + self.bounds, self.base,
                       self.fixed)

    def region(self):
        """The rectangle this view covers, per dim of the argument: {stride: (start, size)}
        (dims of extent 1 and broadcast dims, which separate no writes, left out)."""
        dims = {}
        for s, n, st, b in zip(self.starts, self.sizes, self.strides, self.bounds):
            if st and b > 1:
                dims[st] = (s, n)
        for st, idx, b in self.fixed:
            if st and b > 1:
                dims[st] = (idx, 1)
        return dims

    def access(self):
        """(the access pattern, the masks its rows/columns past the argument need)."""
        t = _tracer()
        offset = self.base
        for s, st in zip(self.starts, self.strides):
            offset = offset + s * st
        masks = []
        for d, (s, n, b) in enumerate(zip(self.starts, self.sizes, self.bounds)):
            lo, hi = s.range(t.trips)
            if lo < 0:
                raise KernelError(f"dim {d} starts at {s!r}, which is negative in some iteration")
            if hi + n > b:
                masks.append(dict(start=s.wire(), limit=b, dim=d))
        if len(masks) > F.MAX_MASKS:
            raise KernelError(f"the view passes the tensor's end along {len(masks)} dims; at most {F.MAX_MASKS} "
                              f"may be masked")
        ap = dict(space=F.HBM, dtype=self.dtype, arg=self.arg, offset=offset.wire(), sizes=self.sizes,
                  strides=self.strides)
        return ap, masks


class HBMTensor(HBMView):
    """A kernel argument: a contiguous tensor in device memory."""

    def __init__(self, arg, shape, dtype):
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
        super().__init__(arg, shape, dtype, [Affine(0)] * len(shape), list(shape), strides, list(shape))

    @property
    def nbytes(self):
        n = 1
        for s in self.shape:
            n *= s
        return n * F.DTYPE_BYTES[self.dtype]


# ---------------------------------------------------------------- the tracer

class Tracer:
    def __init__(self, fn, sbuf_bytes=224 * 1024):
        self.fn = fn
        self.code = fn.__code__
        self.file = os.path.abspath(self.code.co_filename)
        self.insns = []
        self.trips = []
        self.sbuf_next = 0
        self.psum_next = 0
        self.sbuf_bytes = sbuf_bytes
        self.written = set()
        self.loop_ids, self.next_loop_id = [], 0  # the open loops' identities (the write check)
        self.stores = []  # every store into an argument: _writes.Store

    def line(self):
        """The kernel's line that called the tile operation."""
        f = inspect.currentframe()
        while f is not None:
            if os.path.abspath(f.f_code.co_filename) == self.file and f.f_code.co_name != "<module>":
                if f.f_code is self.code or not f.f_code.co_filename.endswith(("_trace.py", "language.py")):
                    return f.f_lineno
            f = f.f_back
        return 0

    def emit(self, insn):
        insn.setdefault("line", self.line())
        self.insns.append(insn)
        for op in insn.get("operands", [])[:1]:
            if op["space"] == F.HBM:
                self.written.add(op["arg"])

    def record_store(self, view):
        self.stores.append(_writes.Store(view.arg, view.region(), tuple(self.loop_ids), tuple(self.trips),
                                         self.insns[-1]["line"]))

    def alloc(self, buffer, per_partition):
        if buffer == F.PSUM:
            bank = 2048
            size = -(-per_partition // bank) * bank if per_partition > bank else per_partition
            start = self.psum_next
            if start // bank != (start + size - 1) // bank:
                start = -(-start // bank) * bank
            self.psum_next = start + size
            if self.psum_next > 16 * 1024:
                raise KernelError(f"PSUM is full: this tile needs {per_partition} bytes per partition, "
                                  f"{16 * 1024 - start} are left of 16 KiB")
            return start
        start = -(-self.sbuf_next // 4) * 4
        self.sbuf_next = start + per_partition
        if self.sbuf_next > self.sbuf_bytes:
            raise KernelError(f"SBUF is full: this tile needs {per_partition} bytes per partition, "
                              f"{self.sbuf_bytes - start} of {self.sbuf_bytes} are left")
        return start


def tracing(tracer):
    class _Scope:
        def __enter__(self):
            if getattr(_state, "tracer", None) is not None:
                raise KernelError("a kernel cannot call another kernel while it is traced")
            _state.tracer = tracer
            return tracer

        def __exit__(self, *exc):
            _state.tracer = None
            return False
    return _Scope()


def source_line(file, line):
    try:
        with open(file) as f:
            return f.read().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""
