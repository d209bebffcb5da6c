"""The tile program wire form (contracts/include/neuron/tile.h), in Python.

Mirrors the C header's numbers and struct layouts; `pack` turns a traced kernel
into the bytes neurond validates. A change to tile.h changes this file too
(tests/torch/test_kernels.py checks the sizes against the header).
"""

import struct

MAGIC = 0x4C49544E  # "NTIL"
VERSION = 1
MAX_DIMS = 4
MAX_LOOPS = 4
MAX_OPERANDS = 4
MAX_MASKS = 2
MAX_ARGS = 6

# enum neuron_tile_space
HBM, SBUF, PSUM = 1, 2, 3

# enum neuron_tile_op
(OP_LOOP_BEGIN, OP_LOOP_END, OP_DMA, OP_MATMUL, OP_TRANSPOSE, OP_TENSOR_COPY, OP_ACTIVATION,
 OP_TENSOR_TENSOR, OP_TENSOR_SCALAR, OP_COMPARE, OP_SELECT, OP_REDUCE, OP_IOTA, OP_MEMSET,
 OP_ACTIVATION_REDUCE) = range(1, 16)
OP_NAMES = {1: "loop_begin", 2: "loop_end", 3: "dma", 4: "matmul", 5: "transpose", 6: "tensor_copy",
            7: "activation", 8: "tensor_tensor", 9: "tensor_scalar", 10: "compare", 11: "select",
            12: "reduce", 13: "iota", 14: "memset", 15: "activation_reduce"}

ACCUMULATE, REVERSE, SEQUENTIAL = 1, 2, 4

# enum neuron_dtype (cmd.h), the ones tiles take
F32, BF16, F16, I32 = 1, 2, 3, 4
DTYPE_BYTES = {F32: 4, BF16: 2, F16: 2, I32: 4}

# enum neuron_pw_fn (cmd.h)
PW = dict(add=1, sub=2, mul=3, div=4, maximum=5, minimum=6, pow=7, relu=8, gelu=9, gelu_tanh=10, silu=11,
          tanh=12, exp=13, log=14, sqrt=15, rsqrt=16, abs=17, sigmoid=18, erf=19, reciprocal=20, neg=21)
# enum neuron_compare_fn
CMP = dict(eq=0, ne=1, lt=2, le=3, gt=4, ge=5)

AFFINE = struct.Struct("<q4q")
MASK = struct.Struct("<q4qqBB6x")
AP = struct.Struct("<BBBBIII" + "q4q" + "4q4q")
INSN_HEAD = struct.Struct("<HBBIII2d4q" + "q4q")
HEADER = struct.Struct("<IHHII")
INSN_SIZE = INSN_HEAD.size + MAX_MASKS * MASK.size + MAX_OPERANDS * AP.size
assert AFFINE.size == 40 and MASK.size == 56 and AP.size == 120 and INSN_SIZE == 696 and HEADER.size == 16


def _affine(a):
    base, steps = a
    return (base, *steps)


def pack_ap(ap):
    if ap is None:
        return bytes(AP.size)
    sizes = list(ap["sizes"]) + [0] * (MAX_DIMS - len(ap["sizes"]))
    strides = list(ap["strides"]) + [0] * (MAX_DIMS - len(ap["strides"]))
    return AP.pack(ap["space"], ap["dtype"], len(ap["sizes"]), 0, ap.get("arg", 0), ap.get("partition", 0), 0,
                   *_affine(ap["offset"]), *sizes, *strides)


def pack_mask(m):
    if m is None:
        return bytes(MASK.size)
    return MASK.pack(*_affine(m["start"]), m["limit"], 1, m["dim"])


def pack_insn(insn):
    ops = insn.get("operands", [])
    masks = insn.get("masks", [])
    f = list(insn.get("f", ())) + [0.0] * (2 - len(insn.get("f", ())))
    i = list(insn.get("i", ())) + [0] * (4 - len(insn.get("i", ())))
    out = INSN_HEAD.pack(insn["op"], len(ops), insn.get("flags", 0), insn.get("fn", 0), insn.get("line", 0), 0,
                         *f, *i, *_affine(insn.get("base", (0, (0,) * MAX_LOOPS))))
    out += b"".join(pack_mask(masks[k] if k < len(masks) else None) for k in range(MAX_MASKS))
    out += b"".join(pack_ap(ops[k] if k < len(ops) else None) for k in range(MAX_OPERANDS))
    return out


def pack(arg_bytes, insns):
    """The wire form: header, argument sizes, instructions."""
    head = HEADER.pack(MAGIC, VERSION, len(arg_bytes), len(insns), 0)
    return head + struct.pack(f"<{len(arg_bytes)}Q", *arg_bytes) + b"".join(pack_insn(i) for i in insns)
