// Writes a seed corpus for fuzz-command: one valid command per opcode (and a few
// variants), laid out as the fuzzer input (1 byte queue kind, then the slot), with
// device addresses in the small range the target rebases onto real allocations.
#include <neuron/cmd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

neuron_tensor_desc desc(uint64_t addr, int dtype, std::initializer_list<int64_t> sizes)
{
	neuron_tensor_desc d;
	std::memset(&d, 0, sizeof(d));
	d.addr = addr;
	d.dtype = static_cast<uint8_t>(dtype);
	d.ndim = static_cast<uint8_t>(sizes.size());
	int i = 0;
	for (int64_t s : sizes)
		d.sizes[i++] = s;
	int64_t stride = 1;
	for (int k = d.ndim - 1; k >= 0; --k) {
		d.strides[k] = stride;
		stride *= d.sizes[k];
	}
	return d;
}

void write(const std::string &dir, const std::string &name, uint8_t kind, const neuron_cmd &cmd)
{
	FILE *f = std::fopen((dir + "/" + name).c_str(), "wb");
	if (!f)
		return;
	std::fputc(kind, f);
	std::fwrite(&cmd, sizeof(cmd), 1, f);
	std::fclose(f);
}

neuron_cmd make(int op, std::initializer_list<neuron_tensor_desc> operands)
{
	neuron_cmd c;
	std::memset(&c, 0, sizeof(c));
	c.opcode = static_cast<uint16_t>(op);
	for (const auto &d : operands)
		c.operands[c.num_operands++] = d;
	return c;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: fuzz-command-seeds DIR\n");
		return 2;
	}
	const std::string dir = argv[1];
	const uint64_t A = 0, B = 1u << 20; // rebased onto the target's two allocations
	const int F = NEURON_DTYPE_F32;
	write(dir, "nop", 0, make(NEURON_OP_NOP, {}));
	auto fill = make(NEURON_OP_FILL, {desc(A, F, {16, 16})});
	fill.fscalars.f[0] = 2.5;
	write(dir, "fill", 0, fill);
	write(dir, "copy_cast", 0, make(NEURON_OP_COPY, {desc(A, NEURON_DTYPE_BF16, {8, 9}), desc(B, F, {8, 9})}));
	auto h2d = make(NEURON_OP_COPY, {desc(A, NEURON_DTYPE_U8, {4096}), desc(0, NEURON_DTYPE_U8, {4096})});
	h2d.operands[1].mem_space = NEURON_MEM_HOST;
	h2d.operands[1].host_buffer = 1;
	write(dir, "dma_h2d", 1, h2d);
	for (int op : {NEURON_OP_ADD, NEURON_OP_SUB, NEURON_OP_MUL, NEURON_OP_DIV}) {
		// alpha (f[0]) exists for add and sub only

		auto c = make(op, {desc(A, F, {4, 5}), desc(A, F, {4, 5}), desc(B, F, {4, 5})});
		c.operands[2].strides[0] = 0; // broadcast rows
		c.fscalars.f[0] = op == NEURON_OP_ADD || op == NEURON_OP_SUB ? 1.0 : 0.0;
		write(dir, "binary" + std::to_string(op), 0, c);
	}
	for (int op : {NEURON_OP_ADD_SCALAR, NEURON_OP_SUB_SCALAR, NEURON_OP_MUL_SCALAR, NEURON_OP_DIV_SCALAR}) {
		auto c = make(op, {desc(A, F, {33}), desc(B, F, {33})});
		c.fscalars.f[0] = 3.0;
		write(dir, "scalar" + std::to_string(op), 0, c);
	}
	auto mm = make(NEURON_OP_MATMUL, {desc(A, F, {8, 4}), desc(B, F, {8, 16}), desc(B + 4096, F, {16, 4})});
	mm.fscalars.f[0] = 1.0;
	write(dir, "matmul", 0, mm);
	auto bmm = make(NEURON_OP_MATMUL, {desc(A, F, {2, 3, 4}), desc(B, F, {2, 3, 5}), desc(B + 4096, F, {2, 5, 4})});
	bmm.fscalars.f[0] = 1.0;
	write(dir, "bmm", 0, bmm);
	for (int op : {NEURON_OP_SUM, NEURON_OP_MEAN, NEURON_OP_AMAX}) {
		auto c = make(op, {desc(A, F, {6, 1}), desc(B, F, {6, 7})});
		c.iscalars[0] = 2;
		write(dir, "reduce" + std::to_string(op), 0, c);
	}
	for (int op : {NEURON_OP_RELU, NEURON_OP_GELU, NEURON_OP_SILU, NEURON_OP_TANH, NEURON_OP_EXP})
		write(dir, "unary" + std::to_string(op), 0, make(op, {desc(A, F, {10, 3}), desc(B, F, {10, 3})}));
	auto sm = make(NEURON_OP_SOFTMAX, {desc(A, F, {5, 7}), desc(B, F, {5, 7})});
	sm.iscalars[0] = 1;
	write(dir, "softmax", 0, sm);

	// ISA 1.1
	for (int fn = 0; fn < NEURON_UNARY_COUNT_; ++fn) {
		auto c = make(NEURON_OP_UNARY_MATH, {desc(A, F, {6, 5}), desc(B, F, {6, 5})});
		c.iscalars[0] = fn;
		if (fn == NEURON_UNARY_POW)
			c.fscalars.f[0] = 2.0;
		if (fn == NEURON_UNARY_ROUND_DECIMALS)
			c.fscalars.f[0] = 100.0;
		write(dir, "unary_math" + std::to_string(fn), 0, c);
	}
	for (int fn = 0; fn < NEURON_BINARY_COUNT_; ++fn) {
		auto c = make(NEURON_OP_BINARY_MATH, {desc(A, F, {6, 5}), desc(B, F, {6, 5}), desc(B + 4096, F, {6, 5})});
		c.iscalars[0] = fn;
		write(dir, "binary_math" + std::to_string(fn), 0, c);
	}
	const int Bool = NEURON_DTYPE_BOOL, I64 = NEURON_DTYPE_I64;
	auto cmp = make(NEURON_OP_COMPARE, {desc(A, Bool, {4, 4}), desc(B, F, {4, 4}), desc(B + 4096, F, {4, 4})});
	cmp.iscalars[0] = NEURON_CMP_LT;
	write(dir, "compare", 0, cmp);
	auto cmps = make(NEURON_OP_COMPARE_SCALAR, {desc(A, Bool, {4, 4}), desc(B, F, {4, 4})});
	cmps.fscalars.f[0] = 0.5;
	write(dir, "compare_scalar", 0, cmps);
	write(dir, "where", 0,
	      make(NEURON_OP_WHERE, {desc(A, F, {4, 4}), desc(B, Bool, {4, 4}), desc(B + 4096, F, {4, 4}),
				     desc(B + 8192, F, {4, 4})}));
	auto lsm = make(NEURON_OP_LOG_SOFTMAX, {desc(A, F, {5, 7}), desc(B, F, {5, 7})});
	lsm.iscalars[0] = 1;
	write(dir, "log_softmax", 0, lsm);
	write(dir, "index_select", 0,
	      make(NEURON_OP_INDEX_SELECT, {desc(A, F, {3, 4}), desc(B, F, {5, 4}), desc(B + 4096, I64, {3})}));
	write(dir, "index_add", 0,
	      make(NEURON_OP_INDEX_ADD, {desc(A, F, {5, 4}), desc(B, I64, {3}), desc(B + 4096, F, {3, 4})}));
	auto gather = make(NEURON_OP_GATHER, {desc(A, F, {3, 2}), desc(B, F, {3, 4}), desc(B + 4096, I64, {3, 2})});
	gather.iscalars[0] = 1;
	write(dir, "gather", 0, gather);
	auto scatter = make(NEURON_OP_SCATTER_ADD, {desc(A, F, {3, 4}), desc(B, I64, {3, 2}), desc(B + 4096, F, {3, 2})});
	scatter.iscalars[0] = 1;
	write(dir, "scatter_add", 0, scatter);

	// ISA 1.2: param, exp_avg, exp_avg_sq in one allocation, grad and step in the other.
	auto adam = make(NEURON_OP_ADAM_STEP, {desc(A, F, {8, 8}), desc(A + 4096, F, {8, 8}), desc(A + 8192, F, {8, 8}),
					       desc(B, F, {8, 8}), desc(B + 4096, F, {})});
	adam.fscalars.f[0] = 1e-3;
	adam.fscalars.f[1] = 0.9;
	adam.fscalars.f[2] = 0.999;
	adam.fscalars.f[3] = 1e-8;
	adam.iscalars[0] = NEURON_ADAM_DECOUPLED;
	const double wd = 0.01;
	std::memcpy(&adam.iscalars[1], &wd, sizeof(wd));
	write(dir, "adam_step", 0, adam);
	auto argmin = make(NEURON_OP_ARG_REDUCE, {desc(A, I64, {4, 1}), desc(B, F, {4, 9})});
	argmin.iscalars[0] = 1;
	argmin.iscalars[1] = 1;
	write(dir, "arg_reduce", 0, argmin);

	// ISA 1.3
	write(dir, "index_copy", 0,
	      make(NEURON_OP_INDEX_COPY, {desc(A, F, {5, 4}), desc(B, I64, {3}), desc(B + 4096, F, {3, 4})}));
	auto scatter_copy = make(NEURON_OP_SCATTER, {desc(A, F, {3, 4}), desc(B, I64, {3, 2}), desc(B + 4096, F, {3, 2})});
	scatter_copy.iscalars[0] = 1;
	write(dir, "scatter", 0, scatter_copy);

	// ISA 1.4 block 64..71: device RNG, timestamps, AMP grad scaling.
	for (int dist = 0; dist < NEURON_RNG_DIST_COUNT_; ++dist) {
		auto rng = make(NEURON_OP_RNG, {desc(A, dist == NEURON_RNG_INTEGER ? I64 : F, {7, 9})});
		rng.iscalars[0] = dist;
		rng.iscalars[1] = 0x5eed;
		rng.iscalars[2] = 3;
		rng.fscalars.f[0] = dist == NEURON_RNG_BERNOULLI ? 0.5 : 0.0;
		rng.fscalars.f[1] = dist == NEURON_RNG_BERNOULLI ? 0.0 : 1.0;
		if (dist == NEURON_RNG_INTEGER) {
			rng.fscalars.bits[0] = 0;
			rng.fscalars.bits[1] = 10;
		}
		write(dir, "rng" + std::to_string(dist), 0, rng);
	}
	// A zero-sized dimension once divided by zero splitting positions.
	auto rng_empty = make(NEURON_OP_RNG, {desc(A, F, {0, 9})});
	rng_empty.fscalars.f[1] = 1.0;
	write(dir, "rng_empty", 0, rng_empty);
	auto dropout = make(NEURON_OP_DROPOUT, {desc(A, F, {6, 5}), desc(A + 4096, Bool, {6, 5}), desc(B, F, {6, 5})});
	dropout.fscalars.f[0] = 2.0;
	dropout.fscalars.f[1] = 0.5;
	dropout.iscalars[1] = 1;
	write(dir, "dropout", 0, dropout);
	auto randperm = make(NEURON_OP_RANDPERM, {desc(A, I64, {50})});
	randperm.fscalars.bits[2] = 10; // positions 10..29 only
	randperm.fscalars.bits[3] = 30;
	write(dir, "randperm", 0, randperm);
	auto multinomial = make(NEURON_OP_MULTINOMIAL, {desc(A, I64, {3, 2}), desc(B, F, {3, 4})});
	write(dir, "multinomial", 0, multinomial); // zero weights: faults on execution
	write(dir, "timestamp", 0, make(NEURON_OP_TIMESTAMP, {desc(A, I64, {1})}));
	// ISA 1.7: a command stamped by the chip (its last operand, NEURON_CMD_F_STAMP).
	auto stamped = make(NEURON_OP_RELU, {desc(A, F, {16}), desc(B, F, {16}), desc(A + 4096, I64, {2})});
	stamped.flags = NEURON_CMD_F_STAMP;
	write(dir, "stamped_relu", 0, stamped);
	write(dir, "amp_unscale", 0,
	      make(NEURON_OP_AMP_UNSCALE, {desc(A, F, {8, 8}), desc(A + 4096, F, {1}), desc(B, F, {})}));
	auto update = make(NEURON_OP_AMP_UPDATE_SCALE,
			   {desc(A, F, {1}), desc(A + 64, NEURON_DTYPE_I32, {1}), desc(B, F, {1})});
	update.fscalars.f[0] = 2.0;
	update.fscalars.f[1] = 0.5;
	update.iscalars[0] = 2000;
	write(dir, "amp_update_scale", 0, update);
	// ISA 1.4 block 36..63: scans, sorting, attention, linear algebra (zero-sized ones too).
	auto scan = make(NEURON_OP_SCAN, {desc(A, F, {4, 9}), desc(B, F, {4, 9}), desc(B + 4096, F, {4, 1})});
	scan.iscalars[0] = 1;
	scan.iscalars[1] = NEURON_SCAN_LOGSUMEXP;
	write(dir, "scan", 0, scan);
	auto sort = make(NEURON_OP_SORT, {desc(A, F, {4, 9}), desc(A + 4096, I64, {4, 9}), desc(B, F, {4, 9})});
	sort.iscalars[0] = 1;
	write(dir, "sort", 0, sort);
	auto topk = make(NEURON_OP_SORT, {desc(A, F, {2, 9}), desc(A + 4096, I64, {2, 9}), desc(B, F, {4, 9})});
	topk.iscalars[1] = 1; // the top 2 of each column, descending
	write(dir, "topk", 0, topk);
	auto attn = make(NEURON_OP_ATTENTION, {desc(A, F, {2, 5, 4}), desc(A + 4096, F, {2, 5}), desc(B, F, {2, 5, 8}),
					       desc(B + 4096, F, {2, 6, 8}), desc(B + 8192, F, {2, 6, 4}),
					       desc(B + 12288, F, {2, 5, 6})});
	attn.fscalars.f[0] = 0.35;
	attn.iscalars[0] = NEURON_ATTENTION_CAUSAL;
	attn.iscalars[1] = 1;
	write(dir, "attention", 0, attn);
	auto amax = scatter;
	amax.iscalars[1] = NEURON_INDEX_REDUCE_AMAX;
	write(dir, "scatter_amax", 0, amax);
	const int I32 = NEURON_DTYPE_I32;
	write(dir, "lu", 0,
	      make(NEURON_OP_LU, {desc(A, F, {2, 4, 3}), desc(A + 4096, I32, {2, 3}), desc(A + 8192, I32, {2}),
				  desc(B, F, {2, 4, 3})}));
	write(dir, "permutation", 0, make(NEURON_OP_PERMUTATION, {desc(A, I64, {2, 4}), desc(B, I32, {2, 3})}));
	auto chol = make(NEURON_OP_CHOLESKY, {desc(A, F, {3, 3}), desc(A + 4096, I32, {}), desc(B, F, {3, 3})});
	chol.iscalars[0] = 1;
	write(dir, "cholesky", 0, chol);
	auto trsm = make(NEURON_OP_TRIANGULAR_SOLVE, {desc(A, F, {2, 3, 5}), desc(B, F, {2, 3, 3}), desc(B + 4096, F, {2, 3, 5})});
	trsm.iscalars[0] = NEURON_TRSM_LEFT | NEURON_TRSM_UPPER;
	write(dir, "triangular_solve", 0, trsm);
	write(dir, "geqrf", 0, make(NEURON_OP_GEQRF, {desc(A, F, {5, 3}), desc(A + 4096, F, {3}), desc(B, F, {5, 3})}));
	write(dir, "orgqr", 0, make(NEURON_OP_ORGQR, {desc(A, F, {5, 3}), desc(B, F, {5, 3}), desc(B + 4096, F, {3})}));
	write(dir, "eigh", 0, make(NEURON_OP_EIGH, {desc(A, F, {4}), desc(A + 4096, F, {4, 4}), desc(B, F, {4, 4})}));
	write(dir, "svd", 0,
	      make(NEURON_OP_SVD, {desc(A, F, {5, 3}), desc(A + 4096, F, {3}), desc(A + 8192, F, {3, 3}),
				   desc(B, F, {5, 3})}));
	// An attention whose mask is one value broadcast everywhere (read once).
	auto attn_const = attn;
	attn_const.operands[5] = desc(B + 12288, F, {2, 5, 6});
	for (int k = 0; k < 3; ++k)
		attn_const.operands[5].strides[k] = 0;
	write(dir, "attention_constant_mask", 0, attn_const);
	// A POINTWISE chain over a [4, 6] f32 output with a row operand broadcast along
	// its rows (stride 0): (x - m) * 1.5, run by run.
	auto pw = make(NEURON_OP_POINTWISE, {desc(A, F, {4, 6}), desc(B, F, {4, 6}), desc(B + 4096, F, {4, 6})});
	pw.operands[2].strides[0] = 1;
	pw.operands[2].strides[1] = 0;
	pw.iscalars[0] = static_cast<int64_t>(uint64_t(NEURON_PW_SUB | 0 << 6 | 1 << 11) |
					      uint64_t(NEURON_PW_MUL | 5 << 6 | 21 << 11) << 16);
	pw.fscalars.f[0] = 1.5;
	write(dir, "pointwise_broadcast", 0, pw);
	// LAYER_NORM over rows of 6 with weight and bias, and its backward, both along
	// dim 1 of [4, 6]; the statistics [4, 1].
	auto ln = make(NEURON_OP_LAYER_NORM, {desc(A, F, {4, 6}), desc(A + 4096, F, {4, 1}), desc(A + 8192, F, {4, 1}),
					      desc(B, F, {4, 6}), desc(B + 4096, F, {6}), desc(B + 8192, F, {6})});
	ln.iscalars[0] = 1;
	ln.fscalars.f[0] = 1e-5;
	write(dir, "layer_norm", 0, ln);
	auto lnb = make(NEURON_OP_LAYER_NORM_BACKWARD, {desc(A, F, {4, 6}), desc(B, F, {4, 6}), desc(B + 4096, F, {4, 6}),
							desc(B + 8192, F, {4, 1}), desc(B + 12288, F, {4, 1}),
							desc(B + 16384, F, {6})});
	lnb.iscalars[0] = 1;
	write(dir, "layer_norm_backward", 0, lnb);
	auto lnp = make(NEURON_OP_LAYER_NORM_PARAM_GRAD, {desc(A, F, {6}), desc(A + 4096, F, {6}), desc(B, F, {4, 6}),
							  desc(B + 4096, F, {4, 6}), desc(B + 8192, F, {4, 1}),
							  desc(B + 12288, F, {4, 1})});
	lnp.iscalars[0] = 1;
	write(dir, "layer_norm_param_grad", 0, lnp);
	// Zero-sized dimensions (rows, row length, keys, matrices) walk nothing.
	auto scan_empty = make(NEURON_OP_SCAN, {desc(A, F, {0, 9}), desc(B, F, {0, 9}), desc(B + 4096, F, {0, 1})});
	scan_empty.iscalars[0] = 1;
	write(dir, "scan_empty", 0, scan_empty);
	auto sort_empty = make(NEURON_OP_SORT, {desc(A, F, {4, 0}), desc(A + 4096, I64, {4, 0}), desc(B, F, {4, 0})});
	sort_empty.iscalars[0] = 1;
	write(dir, "sort_empty", 0, sort_empty);
	auto attn_empty = make(NEURON_OP_ATTENTION, {desc(A, F, {2, 5, 4}), desc(A + 4096, F, {2, 5}),
						     desc(B, F, {2, 5, 8}), desc(B + 4096, F, {2, 0, 8}),
						     desc(B + 8192, F, {2, 0, 4}), desc(B + 12288, F, {2, 5, 0})});
	attn_empty.fscalars.f[0] = 0.35;
	write(dir, "attention_no_keys", 0, attn_empty);
	write(dir, "lu_empty", 0,
	      make(NEURON_OP_LU, {desc(A, F, {0, 3, 3}), desc(A + 4096, I32, {0, 3}), desc(A + 8192, I32, {0}),
				  desc(B, F, {0, 3, 3})}));
	// Empty matrices in a non-empty batch: their operands may have no memory at all.
	write(dir, "lu_empty_rows", 0,
	      make(NEURON_OP_LU, {desc(A, F, {2, 0, 3}), desc(A + 4096, I32, {2, 0}), desc(A + 8192, I32, {2}),
				  desc(B, F, {2, 0, 3})}));
	write(dir, "orgqr_empty_rows", 0,
	      make(NEURON_OP_ORGQR, {desc(A, F, {2, 0, 0}), desc(B, F, {2, 0, 3}), desc(B + 4096, F, {2, 0})}));
	write(dir, "svd_empty", 0,
	      make(NEURON_OP_SVD, {desc(A, F, {2, 0, 0}), desc(A + 4096, F, {2, 0}), desc(A + 8192, F, {2, 0, 3}),
				   desc(B, F, {2, 0, 3})}));
	return 0;
}
