"""The CPU simulation of a tile program (NKI's simulator): the same wire form
neurond runs, decoded and interpreted with NumPy, for debugging a kernel
without a device. Like neurond's engines it computes in float32, accumulates
matmuls in float32, and fills fresh on-chip memory with NaN; unlike neurond it
trusts the program (neurond validates; run a kernel on `neuron` tensors to see
its refusals).
"""

import struct

import numpy as np

from . import _format as F

_NP = {F.F32: np.float32, F.F16: np.float16, F.I32: np.int32}


def _unpack_affine(vals):
    return vals[0], vals[1:5]


def decode(image):
    """(argument sizes, instruction dicts) from the wire form."""
    magic, version, nargs, ninsns, _ = F.HEADER.unpack_from(image, 0)
    assert magic == F.MAGIC and version == F.VERSION
    at = F.HEADER.size
    arg_bytes = list(struct.unpack_from(f"<{nargs}Q", image, at))
    at += 8 * nargs
    insns = []
    for _ in range(ninsns):
        h = F.INSN_HEAD.unpack_from(image, at)
        insn = dict(op=h[0], n=h[1], flags=h[2], fn=h[3], line=h[4], f=h[6:8], i=h[8:12],
                    base=_unpack_affine(h[12:17]), masks=[], operands=[])
        p = at + F.INSN_HEAD.size
        for _ in range(F.MAX_MASKS):
            m = F.MASK.unpack_from(image, p)
            if m[6]:
                insn["masks"].append(dict(start=_unpack_affine(m[0:5]), limit=m[5], dim=m[7]))
            p += F.MASK.size
        for k in range(F.MAX_OPERANDS):
            a = F.AP.unpack_from(image, p)
            if k < insn["n"]:
                nd = a[2]
                insn["operands"].append(dict(space=a[0], dtype=a[1], arg=a[4], partition=a[5],
                                             offset=_unpack_affine(a[7:12]), sizes=a[12:12 + nd],
                                             strides=a[16:16 + nd]))
            p += F.AP.size
        insns.append(insn)
        at += F.INSN_SIZE
    return arg_bytes, insns


def _eval(affine, iv):
    base, steps = affine
    return base + sum(s * v for s, v in zip(steps, iv))


def _bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(f):
    u = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


class _Memory:
    """SBUF/PSUM as partitions x bytes, and the HBM arguments as byte arrays."""

    def __init__(self, args, partition_bytes=(224 * 1024, 16 * 1024)):
        self.mem = {F.SBUF: np.full((128, partition_bytes[0]), 0xFF, np.uint8),
                    F.PSUM: np.full((128, partition_bytes[1]), 0xFF, np.uint8)}
        self.args = args

    def _index(self, ap, iv):
        """Flat byte index of every element of ap (its shape), and the byte array."""
        es = F.DTYPE_BYTES[ap["dtype"]]
        off = _eval(ap["offset"], iv)
        sizes, strides = ap["sizes"], ap["strides"]
        if ap["space"] == F.HBM:
            idx = np.full(sizes, off, np.int64)
            for d, (n, s) in enumerate(zip(sizes, strides)):
                shape = [1] * len(sizes)
                shape[d] = n
                idx = idx + (np.arange(n) * s).reshape(shape)
            return self.args[ap["arg"]], idx * es
        buf = self.mem[ap["space"]]
        width = buf.shape[1]
        idx = np.full(sizes, (ap["partition"]) * width + off, np.int64)
        for d, (n, s) in enumerate(zip(sizes, strides)):
            shape = [1] * len(sizes)
            shape[d] = n
            step = width if d == 0 else s * es
            idx = idx + (np.arange(n) * step).reshape(shape)
        return buf.reshape(-1), idx

    def read(self, ap, iv, box):
        buf, idx = self._index(ap, iv)
        idx = idx[box]
        es = F.DTYPE_BYTES[ap["dtype"]]
        raw = np.stack([buf[idx + b] for b in range(es)], axis=-1).copy()
        if ap["dtype"] == F.BF16:
            return _bf16_to_f32(raw.view(np.uint16)[..., 0])
        return raw.view(_NP[ap["dtype"]])[..., 0]

    def read_f32(self, ap, iv, box):
        return self.read(ap, iv, box).astype(np.float32)

    def write(self, ap, iv, box, values):
        buf, idx = self._index(ap, iv)
        idx = idx[box]
        dt = ap["dtype"]
        if dt == F.BF16:
            raw = _f32_to_bf16(np.asarray(values, np.float32)).view(np.uint8)
        else:
            raw = np.ascontiguousarray(np.asarray(values).astype(_NP[dt])).view(np.uint8)
        es = F.DTYPE_BYTES[dt]
        raw = raw.reshape(idx.shape + (es,))
        for b in range(es):
            buf[idx + b] = raw[..., b]


def _box(insn, shape, iv):
    box = [slice(0, n) for n in shape]
    for m in insn["masks"]:
        count = m["limit"] - _eval(m["start"], iv)
        d = m["dim"]
        box[d] = slice(0, max(0, min(box[d].stop, count)))
    return tuple(box)


def _bshape(ap, box):
    """An input's box: its broadcast (size 1) dims stay whole."""
    return tuple(slice(0, 1) if n == 1 else b for n, b in zip(ap["sizes"], box))


def _pw(fn, a, b=None):
    n = {v: k for k, v in F.PW.items()}[fn]
    with np.errstate(all="ignore"):
        return {
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "maximum": lambda: np.maximum(a, b), "minimum": lambda: np.minimum(a, b), "pow": lambda: a ** b,
            "relu": lambda: np.maximum(a, 0), "silu": lambda: a / (1 + np.exp(-a)), "tanh": lambda: np.tanh(a),
            "exp": lambda: np.exp(a), "log": lambda: np.log(a), "sqrt": lambda: np.sqrt(a),
            "rsqrt": lambda: 1 / np.sqrt(a), "abs": lambda: np.abs(a), "sigmoid": lambda: 1 / (1 + np.exp(-a)),
            "reciprocal": lambda: 1 / a, "neg": lambda: -a,
            "gelu": lambda: 0.5 * a * (1 + _erf(a / np.sqrt(2))),
            "gelu_tanh": lambda: 0.5 * a * (1 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3))),
            "erf": lambda: _erf(a),
        }[n]().astype(np.float32)


def _erf(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.float32)


def _cmp(fn, a, b):
    return {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b}[fn].astype(np.float32)


def _step(m, insn, iv):
    op, ops = insn["op"], insn["operands"]
    if op == F.OP_DMA:
        box = _box(insn, ops[0]["sizes"], iv)
        buf, idx = m._index(ops[1], iv)
        obuf, oidx = m._index(ops[0], iv)
        es = F.DTYPE_BYTES[ops[0]["dtype"]]
        for b in range(es):
            obuf[oidx[box] + b] = buf[idx[box] + b]
        return
    if op == F.OP_MATMUL:
        st, mv = m.read_f32(ops[1], iv, ()), m.read_f32(ops[2], iv, ())
        r = st.T.astype(np.float32) @ mv
        if insn["flags"] & F.ACCUMULATE:
            r = m.read_f32(ops[0], iv, ()) + r
        m.write(ops[0], iv, (), r)
        return
    if op == F.OP_TRANSPOSE:
        m.write(ops[0], iv, (), m.read_f32(ops[1], iv, ()).T)
        return
    if op == F.OP_REDUCE:
        box = _box(insn, ops[1]["sizes"], iv)
        x = m.read_f32(ops[1], iv, box).astype(np.float64)
        axes = tuple(range(1, x.ndim))
        red = {1: np.sum, 5: np.max, 6: np.min}[insn["fn"]]
        init = {1: 0.0, 5: -np.inf, 6: np.inf}[insn["fn"]]
        r = red(x, axis=axes, keepdims=True, initial=init).astype(np.float32)
        obox = (box[0],) + tuple(slice(0, 1) for _ in axes)
        if insn["flags"] & F.ACCUMULATE:
            old = m.read_f32(ops[0], iv, obox)
            r = {1: old + r, 5: np.maximum(old, r), 6: np.minimum(old, r)}[insn["fn"]]
        m.write(ops[0], iv, obox, r)
        return
    box = _box(insn, ops[0]["sizes"], iv)
    shape = tuple(b.stop for b in box)
    rd = lambda k: np.broadcast_to(m.read_f32(ops[k], iv, _bshape(ops[k], box)), shape)
    f0, f1 = np.float32(insn["f"][0]), np.float32(insn["f"][1])
    if op == F.OP_MEMSET:
        r = np.full(shape, f0, np.float32)
    elif op == F.OP_TENSOR_COPY:
        r = m.read(ops[1], iv, box)
    elif op == F.OP_ACTIVATION:
        x = rd(1) * f0 + (rd(2) if len(ops) > 2 else np.float32(0)) + f1
        r = _pw(insn["fn"], x) if insn["fn"] else x
    elif op == F.OP_ACTIVATION_REDUCE:  # (out, sum, in [, bias]): the f32 results summed per partition
        x = rd(2) * f0 + (rd(3) if len(ops) > 3 else np.float32(0)) + f1
        r = np.asarray(_pw(insn["fn"], x) if insn["fn"] else x, np.float32)
        axes = tuple(range(1, r.ndim))
        total = r.astype(np.float64).sum(axis=axes, keepdims=True).astype(np.float32)
        m.write(ops[1], iv, (box[0],) + tuple(slice(0, 1) for _ in axes), total)
    elif op == F.OP_TENSOR_TENSOR:
        r = _pw(insn["fn"], rd(1), rd(2))
    elif op == F.OP_TENSOR_SCALAR:
        a, s = rd(1), np.full(shape, f0, np.float32)
        r = _pw(insn["fn"], s, a) if insn["flags"] & F.REVERSE else _pw(insn["fn"], a, s)
    elif op == F.OP_COMPARE:
        r = _cmp(insn["fn"], rd(1), rd(2) if len(ops) > 2 else f0)
    elif op == F.OP_SELECT:
        r = np.where(rd(1) != 0, rd(2), rd(3) if len(ops) > 3 else f0)
    elif op == F.OP_IOTA:
        idx = np.indices(shape, dtype=np.int64)
        mult = (insn["i"][0],) + tuple(insn["i"][1:])
        r = _eval(insn["base"], iv) + sum(idx[d] * mult[d] for d in range(len(shape)))
        if ops[0]["dtype"] != F.I32:
            r = r.astype(np.float32)
    else:
        raise ValueError(f"unknown op {op}")
    m.write(ops[0], iv, box, r)


def run(image, args):
    """Runs the wire-form program over `args` (NumPy uint8 arrays, one per
    argument, written in place)."""
    arg_bytes, insns = decode(image)
    for k, (a, n) in enumerate(zip(args, arg_bytes)):
        assert a.nbytes == n, f"argument {k} has {a.nbytes} bytes; the kernel declares {n}"
    m = _Memory(args)
    match, stack = {}, []
    for k, insn in enumerate(insns):
        if insn["op"] == F.OP_LOOP_BEGIN:
            stack.append(k)
        elif insn["op"] == F.OP_LOOP_END:
            b = stack.pop()
            match[k], match[b] = b, k
    iv, pc = [], 0
    while pc < len(insns):
        insn = insns[pc]
        if insn["op"] == F.OP_LOOP_BEGIN:
            iv.append(0)
        elif insn["op"] == F.OP_LOOP_END:
            iv[-1] += 1
            if iv[-1] < insns[match[pc]]["i"][0]:
                pc = match[pc] + 1
                continue
            iv.pop()
        else:
            _step(m, insn, iv + [0] * (F.MAX_LOOPS - len(iv)))
        pc += 1
