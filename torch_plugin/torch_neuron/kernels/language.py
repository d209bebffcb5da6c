"""The tile language: on-chip tiles and the operations of the NeuronCore's
engines (NKI-style, shared/notes/kernels.md). Every operation appends one
instruction of the tile program being traced (contracts/include/neuron/tile.h).

Tiles are 2-D and up; dim 0 is the partition dim (<= 128). Tiles live in SBUF
(`sbuf`, the default) or PSUM (`psum`, f32, where matmuls accumulate).
"""

from . import _format as F
from ._trace import Affine, HBMView, KernelError, _tracer

sbuf, psum = F.SBUF, F.PSUM
float32, bfloat16, float16, int32 = F.F32, F.BF16, F.F16, F.I32


def _code(dtype):
    if isinstance(dtype, int):
        return dtype
    from ._trace import dtype_code
    return dtype_code(dtype)


class Tile:
    """A tile of on-chip memory: partitions [partition, +shape[0]), bytes from
    `offset` in each, free dims row-major."""

    def __init__(self, buffer, shape, dtype, partition=0, offset=None, strides=None):
        shape = tuple(int(s) for s in shape)
        if len(shape) < 2 or len(shape) > F.MAX_DIMS:
            raise KernelError(f"a tile has 2..{F.MAX_DIMS} dims (dim 0: partitions), not shape {shape}")
        if shape[0] > 128:
            raise KernelError(f"a tile has at most 128 partitions (dim 0), not {shape[0]} "
                              f"(err_num_partition_exceed_arch_limit)")
        if buffer == F.PSUM and dtype != F.F32:
            raise KernelError("PSUM tiles are float32")
        self.buffer, self.shape, self.dtype, self.partition = buffer, shape, dtype, partition
        if strides is None:
            strides, acc = [1], 1
            for n in reversed(shape[1:]):
                strides.insert(1, acc)
                acc *= n
            self.per_partition = acc * F.DTYPE_BYTES[dtype]
        self.strides = list(strides)
        self.offset = _tracer().alloc(buffer, self.per_partition) if offset is None else offset

    def ap(self):
        return dict(space=self.buffer, dtype=self.dtype, partition=self.partition, offset=Affine.of(self.offset).wire(),
                    sizes=list(self.shape), strides=self.strides)

    def __getitem__(self, key):
        """A sub-tile: t[a:b, c:d] (partition slices static, following the start-partition
        rules). Along a free dim the start may be a loop expression with a static size,
        t[:, j * 128:j * 128 + 128]: a tile loaded once before the loop read piece by
        piece inside it; it must lie inside the dim in every iteration."""
        if not isinstance(key, tuple):
            key = (key,)
        shape, offset, partition = list(self.shape), Affine.of(self.offset), self.partition
        es = F.DTYPE_BYTES[self.dtype]
        for d, k in enumerate(key):
            if not isinstance(k, slice) or k.step not in (None, 1):
                raise KernelError("tiles are sliced with slices of step 1")
            start = Affine.of(0 if k.start is None else k.start)
            if d > 0 and start.constant() is None:
                size = (Affine.of(self.shape[d] if k.stop is None else k.stop) - start).constant()
                lo, hi = start.range(_tracer().trips)
                if size is None or size < 1 or lo < 0 or hi + size > self.shape[d]:
                    raise KernelError(f"slice [{start!r}, {start!r} + {size}) of a tile dim of {self.shape[d]}: "
                                      f"a static size >= 1, inside the dim in every iteration (starts {lo}..{hi})")
                offset = offset + start * (self.strides[d] * es)
                shape[d] = size
                continue
            stop = None if k.stop is None else Affine.of(k.stop).constant()
            if k.stop is not None and stop is None or d == 0 and start.constant() is None:
                raise KernelError(f"slice {k} of a tile: static bounds (a free dim's start may move with a loop, "
                                  f"its size may not)")
            lo, hi, _ = slice(start.constant(), stop).indices(self.shape[d])
            if hi <= lo:
                raise KernelError(f"empty slice {k} of a tile dim of {self.shape[d]}")
            if d == 0:
                partition += lo
            else:
                offset = offset + lo * self.strides[d] * es
            shape[d] = hi - lo
        return Tile(self.buffer, shape, self.dtype, partition, offset.constant() if offset.constant() is not None
                    else offset, self.strides)

    # arithmetic: the vector engine
    def _binary(self, other, fn, reverse=False):
        if isinstance(other, Tile):
            a, b = (other, self) if reverse else (self, other)
            return tensor_tensor(fn, a, b)
        return tensor_scalar(fn, self, float(other), reverse)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "sub")
    def __rsub__(self, o): return self._binary(o, "sub", True)
    def __mul__(self, o): return self._binary(o, "mul")
    def __rmul__(self, o): return self._binary(o, "mul", True)
    def __truediv__(self, o): return self._binary(o, "div")
    def __rtruediv__(self, o): return self._binary(o, "div", True)
    def __pow__(self, o): return self._binary(o, "pow")
    def __neg__(self): return activation("neg", self)
    def __lt__(self, o): return _compare("lt", self, o)
    def __le__(self, o): return _compare("le", self, o)
    def __gt__(self, o): return _compare("gt", self, o)
    def __ge__(self, o): return _compare("ge", self, o)
    def __eq__(self, o): return _compare("eq", self, o)
    def __ne__(self, o): return _compare("ne", self, o)
    __hash__ = object.__hash__

    def to(self, dtype):
        return copy(self, dtype)


def _emit(op, operands, fn=0, flags=0, f=(), i=(), masks=(), base=None):
    insn = dict(op=op, operands=operands, fn=fn, flags=flags, f=f, i=i, masks=list(masks))
    if base is not None:
        insn["base"] = base
    _tracer().emit(insn)


def _out_like(t, dtype=None, buffer=F.SBUF):
    return Tile(buffer, t.shape, t.dtype if dtype is None else _code(dtype))


# ---------------------------------------------------------------- memories

def zeros(shape, dtype=float32, buffer=sbuf):
    return full(shape, 0.0, dtype, buffer)


def full(shape, value, dtype=float32, buffer=sbuf):
    t = Tile(buffer, shape, _code(dtype))
    _emit(F.OP_MEMSET, [t.ap()], f=(float(value),))
    return t


def load(view, fill=None, out=None):
    """An HBM view into a new SBUF tile (the DMA engines), or into `out` (an SBUF
    tile or a slice of one, of the view's shape and dtype: several loads filling
    one tile). Rows or columns past the tensor's end are masked: they keep `fill`
    if given, else whatever the tile held (NaN for a fresh tile)."""
    if not isinstance(view, HBMView):
        raise KernelError("load() takes a view of a kernel argument (x[a:b, c:d])")
    ap, masks = view.access()
    if len(view.sizes) < 2:
        raise KernelError("load a 2-D view (dim 0 goes on the partitions); a 1-D one: x.broadcast(rows) or x[None]")
    if out is not None:
        if not isinstance(out, Tile) or out.buffer != F.SBUF or out.shape != tuple(view.sizes) or \
                out.dtype != view.dtype:
            raise KernelError(f"load(out=) takes an SBUF tile of the view's shape {tuple(view.sizes)} and dtype")
    t = Tile(F.SBUF, view.sizes, view.dtype) if out is None else out
    if fill is not None and masks:
        _emit(F.OP_MEMSET, [t.ap()], f=(float(fill),))
    _emit(F.OP_DMA, [t.ap(), ap], masks=[dict(m) for m in masks])
    return t


def store(view, tile):
    """A tile into an HBM view; the part past the tensor's end is not written.
    PSUM or another dtype goes through an SBUF copy first."""
    if not isinstance(view, HBMView):
        raise KernelError("store() takes a view of a kernel argument (out[a:b, c:d])")
    if tuple(view.sizes) != tile.shape:
        raise KernelError(f"store of a tile {tile.shape} into a view {tuple(view.sizes)}")
    if tile.buffer == F.PSUM or tile.dtype != view.dtype:
        tile = copy(tile, view.dtype)
    ap, masks = view.access()
    _emit(F.OP_DMA, [ap, tile.ap()], masks=masks)
    _tracer().record_store(view)


def copy(tile, dtype=None):
    """tensor_copy into a new SBUF tile (PSUM -> SBUF, casts)."""
    out = _out_like(tile, dtype)
    _emit(F.OP_TENSOR_COPY, [out.ap(), tile.ap()])
    return out


def assign(dst, src):
    """dst <- src in place (tensor_copy, with a cast): the state a sequential_range
    carries from one iteration to the next (a running max, a running sum)."""
    if not isinstance(dst, Tile) or not isinstance(src, Tile):
        raise KernelError("assign(dst, src) takes two tiles")
    if dst.shape != src.shape:
        raise KernelError(f"assign of a tile {src.shape} to a tile {dst.shape}")
    if dst.buffer == F.PSUM and dst.dtype != F.F32:
        raise KernelError("PSUM tiles are float32")
    _emit(F.OP_TENSOR_COPY, [dst.ap(), src.ap()])
    return dst


# ---------------------------------------------------------------- tensor engine

def nc_matmul(stationary, moving, acc=None):
    """acc[M, N] (+)= stationary[K, M].T @ moving[K, N] on the tensor engine, in
    PSUM (f32). Without acc: a new PSUM tile (overwritten). K <= 128 partitions,
    M <= 128, N <= 512."""
    K, M = stationary.shape
    N = moving.shape[1]
    if acc is None:
        acc = Tile(F.PSUM, (M, N), F.F32)
        flags = 0
    else:
        flags = F.ACCUMULATE
    _emit(F.OP_MATMUL, [acc.ap(), stationary.ap(), moving.ap()], flags=flags)
    return acc


def transpose(tile):
    """tile[P, F].T into a new PSUM tile [F, P] (the tensor engine)."""
    out = Tile(F.PSUM, (tile.shape[1], tile.shape[0]), F.F32)
    _emit(F.OP_TRANSPOSE, [out.ap(), tile.ap()])
    return out


# ---------------------------------------------------------------- vector and scalar engines

def activation(fn, x, scale=1.0, bias=None, dtype=None):
    """fn(x * scale + bias) on the scalar engine; bias a [P, 1] tile or a number;
    fn a name (exp, silu, rsqrt, ...) or None for the identity."""
    code = 0 if fn is None else F.PW[fn]
    out = _out_like(x, dtype if dtype is not None else (F.F32 if x.buffer == F.PSUM else None))
    ops = [out.ap(), x.ap()]
    b = 0.0
    if isinstance(bias, Tile):
        ops.append(bias.ap())
    elif bias is not None:
        b = float(bias)
    _emit(F.OP_ACTIVATION, ops, fn=code, f=(float(scale), b))
    return out


def activation_reduce(fn, x, scale=1.0, bias=None, dtype=None, reduce="add"):
    """(fn(x * scale + bias), its sum along the free dims) in one pass of the scalar
    engine (NKI's activation_reduce): the sum is a new [P, 1] f32 tile, of the results
    as computed in f32 (before a cast to `dtype`). An online softmax's exp and row sum:
    `p, rowsum = activation_reduce("exp", s, bias=neg_max)`. reduce: "add" only."""
    if reduce != "add":
        raise KernelError(f"activation_reduce reduces with add only, not {reduce!r}")
    code = 0 if fn is None else F.PW[fn]
    out = _out_like(x, dtype if dtype is not None else (F.F32 if x.buffer == F.PSUM else None))
    total = Tile(F.SBUF, (x.shape[0],) + (1,) * (len(x.shape) - 1), F.F32)
    ops = [out.ap(), total.ap(), x.ap()]
    b = 0.0
    if isinstance(bias, Tile):
        ops.append(bias.ap())
    elif bias is not None:
        b = float(bias)
    _emit(F.OP_ACTIVATION_REDUCE, ops, fn=code, f=(float(scale), b))
    return out, total


def _unary(name):
    def op(x, dtype=None):
        return activation(name, x, dtype=dtype)
    op.__name__ = name
    op.__doc__ = f"{name}(x), elementwise (the scalar engine)."
    return op


exp, log, sqrt, rsqrt, relu, gelu, silu, tanh, sigmoid, erf, reciprocal = (
    _unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "relu", "gelu", "silu", "tanh", "sigmoid", "erf",
                        "reciprocal"))
abs = _unary("abs")


def tensor_tensor(fn, a, b, dtype=None):
    out = _out_like(a, dtype if dtype is not None else (F.F32 if a.buffer == F.PSUM else None))
    _emit(F.OP_TENSOR_TENSOR, [out.ap(), a.ap(), b.ap()], fn=F.PW[fn])
    return out


def tensor_scalar(fn, a, value, reverse=False, dtype=None):
    out = _out_like(a, dtype if dtype is not None else (F.F32 if a.buffer == F.PSUM else None))
    _emit(F.OP_TENSOR_SCALAR, [out.ap(), a.ap()], fn=F.PW[fn], flags=F.REVERSE if reverse else 0,
          f=(float(value),))
    return out


def maximum(a, b):
    return a._binary(b, "maximum")


def minimum(a, b):
    return a._binary(b, "minimum")


def _compare(fn, a, b):
    out = Tile(F.SBUF, a.shape, F.F32)
    if isinstance(b, Tile):
        _emit(F.OP_COMPARE, [out.ap(), a.ap(), b.ap()], fn=F.CMP[fn])
    else:
        _emit(F.OP_COMPARE, [out.ap(), a.ap()], fn=F.CMP[fn], f=(float(b),))
    return out


def where(cond, a, b):
    """a where cond != 0, else b (a tile or a number)."""
    out = _out_like(a, F.F32 if a.buffer == F.PSUM else None)
    if isinstance(b, Tile):
        _emit(F.OP_SELECT, [out.ap(), cond.ap(), a.ap(), b.ap()])
    else:
        _emit(F.OP_SELECT, [out.ap(), cond.ap(), a.ap()], f=(float(b),))
    return out


def _reduce(fn, x, accumulate_into=None):
    out = accumulate_into if accumulate_into is not None else Tile(F.SBUF, (x.shape[0],) + (1,) * (len(x.shape) - 1),
                                                                   F.F32)
    _emit(F.OP_REDUCE, [out.ap(), x.ap()], fn=F.PW[fn], flags=F.ACCUMULATE if accumulate_into is not None else 0)
    return out


def sum(x, axis=-1, out=None):
    """Sum over the free dims into a [P, 1] f32 tile (with out=: added to it)."""
    return _reduce("add", x, out)


def max(x, axis=-1, out=None):
    return _reduce("maximum", x, out)


def min(x, axis=-1, out=None):
    return _reduce("minimum", x, out)


def iota(shape, base=0, partition_step=0, steps=(1,), dtype=float32):
    """t[p, a, ...] = base + partition_step * p + steps[0] * a + ...; base may
    depend on loop variables (a tile's global index)."""
    t = Tile(F.SBUF, shape, _code(dtype))
    steps = tuple(steps) + (0,) * (3 - len(steps))
    _emit(F.OP_IOTA, [t.ap()], i=(int(partition_step),) + steps[:3], base=Affine.of(base).wire())
    return t
