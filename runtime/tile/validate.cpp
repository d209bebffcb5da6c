// Validation of a tile program (program.h): everything is static (shapes, loop
// trip counts, affine offsets), so every access of every loop iteration is
// checked here, once, and the interpreter (execution.h) runs without checks.
// Offsets are ranged over the open loops' iterations in 128-bit arithmetic.
#include "program.h"

#include <pointwise_steps.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace neuron::tile {

namespace {

using i128 = __int128;

// Magnitudes a program may use; with trips <= 2^20 and 4 loops, every sum below
// stays far inside 128 bits.
constexpr int64_t kMaxMagnitude = 1ll << 48;

struct OpInfo {
	const char *name;
	int min_operands, max_operands;
	bool masks;    // takes masks
	int iteration; // operand whose shape is the iteration space
	uint8_t flags; // flags it accepts
};

constexpr OpInfo kOps[NEURON_TILE_OP_COUNT_] = {
	{"invalid", 0, 0, false, 0, 0},
	{"loop_begin", 0, 0, false, 0, NEURON_TILE_SEQUENTIAL},
	{"loop_end", 0, 0, false, 0, 0},
	{"dma", 2, 2, true, 0, 0},
	{"matmul", 3, 3, false, 0, NEURON_TILE_ACCUMULATE},
	{"transpose", 2, 2, false, 0, 0},
	{"tensor_copy", 2, 2, true, 0, 0},
	{"activation", 2, 3, true, 0, 0},
	{"tensor_tensor", 3, 3, true, 0, 0},
	{"tensor_scalar", 2, 2, true, 0, NEURON_TILE_REVERSE},
	{"compare", 2, 3, true, 0, 0},
	{"select", 3, 4, true, 0, 0},
	{"reduce", 2, 2, true, 1, NEURON_TILE_ACCUMULATE},
	{"iota", 1, 1, true, 0, 0},
	{"memset", 1, 1, true, 0, 0},
	{"activation_reduce", 3, 4, true, 0, 0},
};

template <class T> bool all_zero(const T &v)
{
	static const T zero{};
	return std::memcmp(&v, &zero, sizeof(T)) == 0;
}

std::string str(i128 v) { return std::to_string(static_cast<long long>(v)); }

const char *space_name(uint8_t s)
{
	switch (s) {
	case NEURON_TILE_HBM: return "HBM";
	case NEURON_TILE_SBUF: return "SBUF";
	case NEURON_TILE_PSUM: return "PSUM";
	default: return "no memory";
	}
}

struct Range {
	i128 lo = 0, hi = 0;
};

// What check_ap learnt of an operand.
struct Place {
	Range bytes;         // on chip: bytes touched inside each partition; HBM: of the argument
	uint32_t p0 = 0, p1 = 0; // on chip: partitions [p0, p1)
	uint64_t elements = 1;
};

struct Validator {
	const chip::OnChip &oc;
	std::span<const uint64_t> args;
	std::span<const neuron_tile_insn> insns;
	TileProgram *out;
	std::vector<int64_t> trips; // of the open loops, outermost first
	i128 mult = 1;              // iterations of the instruction: product of trips
	std::vector<uint64_t> once; // work of one execution of each instruction

	std::string where(size_t k) const
	{
		std::string s = "instruction " + std::to_string(k) + " (" +
				(insns[k].op < NEURON_TILE_OP_COUNT_ ? kOps[insns[k].op].name : "unknown");
		if (insns[k].line)
			s += ", line " + std::to_string(insns[k].line);
		return s + ")";
	}
	i128 masked_last(const neuron_tile_insn &in, const neuron_tile_ap &a) const;
	std::string affine(size_t k, const std::string &what, const neuron_tile_affine &a, Range *r) const;
	std::string ap(size_t k, int j, Place *p);
	std::string masks(size_t k, const neuron_tile_ap &it) const;
	std::string loop(size_t k);
	std::string insn(size_t k);
	std::string shapes(size_t k, const Place *pl) const;
	std::string overlap(size_t k, const Place *pl) const;
	std::string steps();
};

// The range of an affine value over every iteration of the open loops.
std::string Validator::affine(size_t k, const std::string &what, const neuron_tile_affine &a, Range *r) const
{
	if (a.base > kMaxMagnitude || a.base < -kMaxMagnitude)
		return where(k) + ": " + what + " base " + std::to_string(a.base) + " is beyond +-2^48";
	r->lo = r->hi = a.base;
	for (size_t l = 0; l < NEURON_TILE_MAX_LOOPS; ++l) {
		const int64_t s = a.step[l];
		if (s == 0)
			continue;
		if (l >= trips.size())
			return where(k) + ": " + what + " steps with loop " + std::to_string(l) + ", but only " +
			       std::to_string(trips.size()) + " loops are open here";
		if (s > kMaxMagnitude || s < -kMaxMagnitude)
			return where(k) + ": " + what + " step " + std::to_string(s) + " is beyond +-2^48";
		const i128 span = i128(s) * (trips[l] - 1);
		(span < 0 ? r->lo : r->hi) += span;
	}
	return {};
}

// The highest element an HBM operand reaches in any iteration, with its masks:
// along a masked dim the last index is min(size, limit - start(iv)) - 1, so the
// bound is the max over iterations of offset(iv) + sum_d last_d(iv) * stride_d.
// Each choice of one term of every min makes that affine in iv; the smallest of
// their maxima bounds it (exact for the usual tail mask, whose start moves with
// the offset).
i128 Validator::masked_last(const neuron_tile_insn &in, const neuron_tile_ap &a) const
{
	const neuron_tile_ap &it = in.operands[kOps[in.op].iteration];
	struct Term {
		i128 base;
		i128 step[NEURON_TILE_MAX_LOOPS];
	};
	std::vector<Term> choices[NEURON_TILE_MAX_DIMS];
	for (int d = 0; d < a.ndim; ++d) {
		choices[d].push_back({i128(a.sizes[d] - 1) * a.strides[d], {}});
		for (const neuron_tile_mask &m : in.masks) {
			if (!m.enabled || m.dim != d || a.sizes[d] != it.sizes[d])
				continue; // a broadcast dim (size 1) is not cut
			Term t{(i128(m.limit) - m.start.base - 1) * a.strides[d], {}};
			for (int l = 0; l < NEURON_TILE_MAX_LOOPS; ++l)
				t.step[l] = -i128(m.start.step[l]) * a.strides[d];
			choices[d].push_back(t);
		}
	}
	i128 best = -1;
	bool first = true;
	int pick[NEURON_TILE_MAX_DIMS] = {};
	for (;;) {
		Term sum{a.offset.base, {}};
		for (int l = 0; l < NEURON_TILE_MAX_LOOPS; ++l)
			sum.step[l] = a.offset.step[l];
		for (int d = 0; d < a.ndim; ++d) {
			const Term &t = choices[d][pick[d]];
			sum.base += t.base;
			for (int l = 0; l < NEURON_TILE_MAX_LOOPS; ++l)
				sum.step[l] += t.step[l];
		}
		i128 top = sum.base;
		for (size_t l = 0; l < trips.size(); ++l)
			top += std::max<i128>(0, sum.step[l] * (trips[l] - 1));
		best = first ? top : std::min(best, top);
		first = false;
		int d = 0;
		while (d < a.ndim && ++pick[d] == int(choices[d].size()))
			pick[d++] = 0;
		if (d == a.ndim)
			return best;
	}
}

std::string Validator::loop(size_t k)
{
	const neuron_tile_insn &in = insns[k];
	if (in.num_operands != 0 || in.fn != 0 || !all_zero(in.masks) || !all_zero(in.base) || in.f[0] != 0 ||
	    in.f[1] != 0 || in.i[1] != 0 || in.i[2] != 0 || in.i[3] != 0 || (in.op == NEURON_TILE_OP_LOOP_END && in.i[0]))
		return where(k) + ": a loop marker takes only its trip count (i[0], on loop_begin) and flags";
	if (in.op == NEURON_TILE_OP_LOOP_BEGIN) {
		if (trips.size() == NEURON_TILE_MAX_LOOPS)
			return where(k) + ": loops nest at most " + std::to_string(NEURON_TILE_MAX_LOOPS) + " deep";
		if (in.i[0] < 1 || in.i[0] > NEURON_TILE_MAX_TRIP)
			return where(k) + ": trip count " + std::to_string(in.i[0]) + "; loops run 1.." +
			       std::to_string(NEURON_TILE_MAX_TRIP) + " times (static bounds)";
		trips.push_back(in.i[0]);
		mult *= in.i[0];
		return {};
	}
	if (trips.empty())
		return where(k) + ": loop_end without an open loop";
	// The iteration boundary itself counts as one unit of work, so that empty
	// loops are bounded too.
	once[k] = 1;
	out->steps += static_cast<uint64_t>(std::min<i128>(mult, NEURON_TILE_MAX_WORK + 1));
	mult /= trips.back();
	trips.pop_back();
	return {};
}

// Operand j of instruction k: well formed, inside its memory for every iteration.
std::string Validator::ap(size_t k, int j, Place *p)
{
	const neuron_tile_ap &a = insns[k].operands[j];
	const std::string who = where(k) + ": operand " + std::to_string(j);
	if (a.space < NEURON_TILE_HBM || a.space > NEURON_TILE_PSUM)
		return who + ": memory space " + std::to_string(a.space) + " is not HBM (1), SBUF (2) or PSUM (3)";
	const size_t es = dtype_bytes(a.dtype);
	if (es == 0)
		return who + ": dtype " + std::to_string(a.dtype) + "; tiles take f32, bf16, f16 or i32";
	const bool chip = a.space != NEURON_TILE_HBM;
	if (a.ndim < (chip ? 2 : 1) || a.ndim > NEURON_TILE_MAX_DIMS)
		return who + ": " + std::to_string(a.ndim) + " dims; " + space_name(a.space) + " operands take " +
		       (chip ? "2" : "1") + ".." + std::to_string(NEURON_TILE_MAX_DIMS) +
		       (chip ? " (dim 0 the partitions)" : "");
	if (a.reserved0 || a.reserved1)
		return who + ": reserved fields must be zero";
	i128 last = 0; // the last element's distance from the offset, in elements (free dims on chip)
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d) {
		const bool used = d < a.ndim;
		if (!used && (a.sizes[d] || a.strides[d]))
			return who + ": sizes and strides past dim " + std::to_string(a.ndim - 1) + " must be zero";
		if (used && (a.sizes[d] < 1 || a.sizes[d] > kMaxMagnitude || a.strides[d] < 0 ||
			     a.strides[d] > kMaxMagnitude))
			return who + ": dim " + std::to_string(d) + " has size " + std::to_string(a.sizes[d]) + ", stride " +
			       std::to_string(a.strides[d]) + " (sizes 1..2^48, strides 0..2^48)";
		if (used) {
			p->elements *= static_cast<uint64_t>(a.sizes[d]);
			if (!chip || d > 0)
				last += i128(a.sizes[d] - 1) * a.strides[d];
		}
	}
	Range off;
	if (auto why = affine(k, "operand " + std::to_string(j) + " offset", a.offset, &off); !why.empty())
		return why;
	if (!chip) {
		if (a.arg >= args.size() || a.partition)
			return who + ": names HBM argument " + std::to_string(a.arg) + (a.partition ? " with a partition" : "") +
			       "; the kernel has " + std::to_string(args.size()) +
			       " arguments (and HBM operands take no partition)";
		p->bytes = {off.lo * i128(es), (masked_last(insns[k], a) + 1) * i128(es)};
		if (off.lo < 0 || p->bytes.hi > i128(args[a.arg]))
			return who + ": reaches bytes [" + str(p->bytes.lo) + ", " + str(p->bytes.hi) + ") of argument " +
			       std::to_string(a.arg) + ", which has " + std::to_string(args[a.arg]) +
			       " bytes (err_tensor_access_out_of_bound)";
		return {};
	}
	if (a.arg)
		return who + ": " + space_name(a.space) + " operands name no argument (arg must be 0)";
	if (a.strides[0] != 1)
		return who + ": dim 0 is the partition dim and steps one partition (stride 1, not " +
		       std::to_string(a.strides[0]) + "): partition strides are not allowed";
	const int64_t parts = a.sizes[0];
	if (parts > oc.partitions || a.partition > oc.partitions - parts)
		return who + ": partitions [" + std::to_string(a.partition) + ", " + std::to_string(a.partition + parts) +
		       ") exceed the " + std::to_string(oc.partitions) + " partitions (err_num_partition_exceed_arch_limit)";
	// Where an access may start depends on its size (NKI architecture guide).
	const uint32_t align = parts > 64 ? 128 : parts > 32 ? 64 : 32;
	if (a.partition % align)
		return who + ": an access of " + std::to_string(parts) + " partitions starts at partition " +
		       std::to_string(align == 128 ? 0 : align) + "-aligned positions" +
		       (align == 128 ? " (0 only)" : "") + ", not " + std::to_string(a.partition);
	if (a.space == NEURON_TILE_PSUM && a.dtype != NEURON_DTYPE_F32)
		return who + ": PSUM holds f32 (accumulations), not dtype " + std::to_string(a.dtype);
	const uint64_t cap = a.space == NEURON_TILE_SBUF ? oc.sbuf_partition_bytes : oc.psum_partition_bytes;
	p->bytes = {off.lo, off.hi + (last + 1) * i128(es)};
	if (off.lo < 0 || p->bytes.hi > i128(cap))
		return who + ": reaches bytes [" + str(p->bytes.lo) + ", " + str(p->bytes.hi) + ") of each " +
		       space_name(a.space) + " partition, which has " + std::to_string(cap) + " bytes";
	p->p0 = a.partition;
	p->p1 = a.partition + static_cast<uint32_t>(parts);
	uint64_t &used = a.space == NEURON_TILE_SBUF ? out->sbuf_bytes_used : out->psum_bytes_used;
	used = std::max(used, static_cast<uint64_t>(p->bytes.hi));
	return {};
}

std::string Validator::masks(size_t k, const neuron_tile_ap &it) const
{
	const neuron_tile_insn &in = insns[k];
	for (int m = 0; m < NEURON_TILE_MAX_MASKS; ++m) {
		const neuron_tile_mask &mk = in.masks[m];
		const std::string who = where(k) + ": mask " + std::to_string(m);
		if (!mk.enabled) {
			if (!all_zero(mk))
				return who + " is not enabled, so every field of it must be zero";
			continue;
		}
		if (!kOps[in.op].masks)
			return who + ": " + kOps[in.op].name + " takes no mask (zero-fill the tile's tail instead)";
		if (mk.enabled != 1 || mk.dim >= it.ndim || mk.dim >= NEURON_TILE_MAX_DIMS || !all_zero(mk.reserved))
			return who + ": enabled must be 0 or 1, dim below " + std::to_string(it.ndim) + ", reserved zero";
		if (mk.limit > kMaxMagnitude || mk.limit < -kMaxMagnitude)
			return who + ": limit " + std::to_string(mk.limit) + " is beyond +-2^48";
		Range r;
		if (auto why = affine(k, "mask " + std::to_string(m) + " start", mk.start, &r); !why.empty())
			return why;
	}
	return {};
}

bool is_unary(uint32_t fn) { return fn > NEURON_PW_END && fn < NEURON_PW_FN_COUNT_ && !kernels::pw_binary(uint8_t(fn)); }
bool is_binary(uint32_t fn) { return fn < NEURON_PW_FN_COUNT_ && kernels::pw_binary(uint8_t(fn)); }
bool on_chip(const neuron_tile_ap &a) { return a.space == NEURON_TILE_SBUF || a.space == NEURON_TILE_PSUM; }
bool same_shape(const neuron_tile_ap &a, const neuron_tile_ap &b)
{
	return a.ndim == b.ndim && std::memcmp(a.sizes, b.sizes, sizeof(a.sizes)) == 0;
}
// An input of an elementwise op: out's shape, or 1 along free dims it broadcasts
// (never along the partitions: the engines have one lane per partition).
bool broadcasts_to(const neuron_tile_ap &in, const neuron_tile_ap &out)
{
	if (in.ndim != out.ndim || in.sizes[0] != out.sizes[0])
		return false;
	for (int d = 1; d < in.ndim; ++d)
		if (in.sizes[d] != out.sizes[d] && in.sizes[d] != 1)
			return false;
	return true;
}
std::string shape(const neuron_tile_ap &a)
{
	std::string s = "[";
	for (int d = 0; d < a.ndim && d < NEURON_TILE_MAX_DIMS; ++d)
		s += (d ? ", " : "") + std::to_string(a.sizes[d]);
	return s + "]";
}

// The op's rules on spaces, dtypes, shapes and functions (operands already
// checked one by one).
std::string Validator::shapes(size_t k, const Place *pl) const
{
	const neuron_tile_insn &in = insns[k];
	const neuron_tile_ap *o = in.operands;
	const int n = in.num_operands;
	const std::string who = where(k) + ": ";
	if (in.op != NEURON_TILE_OP_DMA)
		for (int j = 0; j < n; ++j)
			if (!on_chip(o[j]))
				return who + "operand " + std::to_string(j) + " is in HBM; only dma reaches HBM (load it into SBUF)";
	switch (in.op) {
	case NEURON_TILE_OP_DMA:
		if (o[0].space == NEURON_TILE_PSUM || o[1].space == NEURON_TILE_PSUM)
			return who + "the DMA engines do not reach PSUM (tensor_copy it to SBUF first)";
		if (o[0].space == NEURON_TILE_HBM && o[1].space == NEURON_TILE_HBM)
			return who + "HBM to HBM: one side of a kernel's dma is SBUF";
		if (o[0].dtype != o[1].dtype || !same_shape(o[0], o[1]))
			return who + "copies " + shape(o[1]) + " into " + shape(o[0]) +
			       "; dma takes one shape and one dtype (tensor_copy casts)";
		return {};
	case NEURON_TILE_OP_MATMUL: {
		if (o[0].space != NEURON_TILE_PSUM || o[1].space != NEURON_TILE_SBUF || o[2].space != NEURON_TILE_SBUF)
			return who + "matmul reads stationary and moving from SBUF and writes PSUM";
		if (o[1].dtype != o[2].dtype || o[1].dtype == NEURON_DTYPE_I32)
			return who + "stationary and moving take one floating dtype (bf16, f16, or f32 with f32)";
		if (o[0].ndim != 2 || o[1].ndim != 2 || o[2].ndim != 2)
			return who + "matmul operands are 2-D";
		const int64_t K = o[1].sizes[0], M = o[1].sizes[1], N = o[2].sizes[1];
		if (o[2].sizes[0] != K || o[0].sizes[0] != M || o[0].sizes[1] != N)
			return who + "out " + shape(o[0]) + " = stationary " + shape(o[1]) + "^T @ moving " + shape(o[2]) +
			       ": wants stationary [K, M], moving [K, N], out [M, N] (err_num_partition_mismatch)";
		if (M > oc.matmul_stationary_max || N > oc.matmul_moving_max)
			return who + "M = " + std::to_string(M) + ", N = " + std::to_string(N) + "; the tensor engine takes M <= " +
			       std::to_string(oc.matmul_stationary_max) + " (stationary free size), N <= " +
			       std::to_string(oc.matmul_moving_max) + " (moving free size)";
		const uint64_t bank = oc.psum_bank_bytes, row = uint64_t(N) * 4;
		bool aligned = o[0].strides[1] == 1;
		for (int64_t s : o[0].offset.step)
			aligned = aligned && s % int64_t(bank) == 0;
		const uint64_t at = uint64_t(o[0].offset.base) % bank;
		if (!aligned || (row <= bank ? at + row > bank : at != 0))
			return who + "the output's " + std::to_string(row) + " bytes per partition must stay inside one " +
			       std::to_string(bank) + "-byte PSUM bank in every iteration (contiguous, loop steps whole banks)";
		return {};
	}
	case NEURON_TILE_OP_TRANSPOSE:
		if (o[0].space != NEURON_TILE_PSUM || o[1].space != NEURON_TILE_SBUF || o[0].ndim != 2 || o[1].ndim != 2)
			return who + "transpose reads a 2-D SBUF tile and writes a 2-D PSUM tile";
		if (o[0].sizes[0] != o[1].sizes[1] || o[0].sizes[1] != o[1].sizes[0])
			return who + "transposes " + shape(o[1]) + " into " + shape(o[0]);
		return {};
	case NEURON_TILE_OP_TENSOR_COPY:
		if (!same_shape(o[0], o[1]))
			return who + "copies " + shape(o[1]) + " into " + shape(o[0]);
		return {};
	case NEURON_TILE_OP_ACTIVATION:
	case NEURON_TILE_OP_TENSOR_TENSOR:
	case NEURON_TILE_OP_TENSOR_SCALAR:
	case NEURON_TILE_OP_COMPARE:
	case NEURON_TILE_OP_SELECT: {
		const uint32_t fn = in.fn;
		if (in.op == NEURON_TILE_OP_ACTIVATION && fn != 0 && !is_unary(fn))
			return who + "function " + std::to_string(fn) + " is not a unary neuron_pw_fn (or 0, identity)";
		if ((in.op == NEURON_TILE_OP_TENSOR_TENSOR || in.op == NEURON_TILE_OP_TENSOR_SCALAR) && !is_binary(fn))
			return who + "function " + std::to_string(fn) + " is not a binary neuron_pw_fn";
		if (in.op == NEURON_TILE_OP_COMPARE && fn >= NEURON_CMP_COUNT_)
			return who + "comparison " + std::to_string(fn) + " is unknown (0.." + std::to_string(NEURON_CMP_COUNT_ - 1) + ")";
		if (in.op == NEURON_TILE_OP_SELECT && fn != 0)
			return who + "select takes no function (fn 0)";
		if (!std::isfinite(in.f[0]) && in.op == NEURON_TILE_OP_ACTIVATION)
			return who + "scale f[0] must be finite";
		for (int j = 1; j < n; ++j)
			if (!broadcasts_to(o[j], o[0]))
				return who + "operand " + std::to_string(j) + " " + shape(o[j]) + " does not fit out " + shape(o[0]) +
				       " (same partitions; free dims equal or 1)";
		return {};
	}
	case NEURON_TILE_OP_ACTIVATION_REDUCE: {
		// (out, sum, in [, bias]): the activation's rules on out, in, bias; sum [P, 1...]
		if (in.fn != 0 && !is_unary(in.fn))
			return who + "function " + std::to_string(in.fn) + " is not a unary neuron_pw_fn (or 0, identity)";
		if (!std::isfinite(in.f[0]))
			return who + "scale f[0] must be finite";
		for (int j = 2; j < n; ++j)
			if (!broadcasts_to(o[j], o[0]))
				return who + "operand " + std::to_string(j) + " " + shape(o[j]) + " does not fit out " + shape(o[0]) +
				       " (same partitions; free dims equal or 1)";
		bool column = o[1].ndim == o[0].ndim && o[1].sizes[0] == o[0].sizes[0];
		for (int d = 1; d < o[1].ndim; ++d)
			column = column && o[1].sizes[d] == 1;
		if (!column)
			return who + "sum " + shape(o[1]) + " must have out " + shape(o[0]) +
			       "'s partitions and be 1 along every free dim (err_num_partition_mismatch)";
		return {};
	}
	case NEURON_TILE_OP_REDUCE:
		if (in.fn != NEURON_PW_ADD && in.fn != NEURON_PW_MAXIMUM && in.fn != NEURON_PW_MINIMUM)
			return who + "reduce takes fn add (1), maximum (5) or minimum (6), not " + std::to_string(in.fn);
		if (o[0].ndim != o[1].ndim || o[0].sizes[0] != o[1].sizes[0])
			return who + "reduces " + shape(o[1]) + " into " + shape(o[0]) + "; out keeps the partitions";
		for (int d = 1; d < o[0].ndim; ++d)
			if (o[0].sizes[d] != 1)
				return who + "out " + shape(o[0]) + " must be 1 along every free dim (the reduced ones)";
		return {};
	default: // IOTA, MEMSET: any on-chip tile
		(void)pl;
		return {};
	}
}

// An output that shares bytes with an input must be that very input (in place,
// element by element); any other overlap would make the result depend on the
// order the engine walks the elements.
std::string Validator::overlap(size_t k, const Place *pl) const
{
	const neuron_tile_insn &in = insns[k];
	const neuron_tile_ap &o = in.operands[0];
	if (!on_chip(o))
		return {};
	for (int j = 1; j < in.num_operands; ++j) {
		const neuron_tile_ap &a = in.operands[j];
		if (a.space != o.space || pl[j].p1 <= pl[0].p0 || pl[0].p1 <= pl[j].p0 || pl[j].bytes.hi <= pl[0].bytes.lo ||
		    pl[0].bytes.hi <= pl[j].bytes.lo)
			continue;
		if (std::memcmp(&a, &o, sizeof(a)) == 0 && in.op != NEURON_TILE_OP_REDUCE)
			continue;
		return where(k) + ": out overlaps operand " + std::to_string(j) +
		       " without being the same tile (in place is allowed only as the identical access)";
	}
	if (in.op == NEURON_TILE_OP_ACTIVATION_REDUCE) // its second output, the sum: no sharing at all
		for (int j = 0; j < in.num_operands; ++j) {
			const neuron_tile_ap &a = in.operands[j], &s = in.operands[1];
			if (j == 1 || a.space != s.space || pl[j].p1 <= pl[1].p0 || pl[1].p1 <= pl[j].p0 ||
			    pl[j].bytes.hi <= pl[1].bytes.lo || pl[1].bytes.hi <= pl[j].bytes.lo)
				continue;
			return where(k) + ": sum (operand 1) overlaps operand " + std::to_string(j);
		}
	return {};
}

std::string Validator::insn(size_t k)
{
	const neuron_tile_insn &in = insns[k];
	if (in.op == NEURON_TILE_OP_INVALID || in.op >= NEURON_TILE_OP_COUNT_)
		return where(k) + ": op " + std::to_string(in.op) + " is unknown (1.." + std::to_string(NEURON_TILE_OP_COUNT_ - 1) + ")";
	const OpInfo &info = kOps[in.op];
	if (in.reserved || (in.flags & ~info.flags))
		return where(k) + ": flags " + std::to_string(in.flags) + " or reserved fields are not allowed here";
	if (in.op == NEURON_TILE_OP_LOOP_BEGIN || in.op == NEURON_TILE_OP_LOOP_END)
		return loop(k);
	if (in.num_operands < info.min_operands || in.num_operands > info.max_operands)
		return where(k) + ": " + std::to_string(in.num_operands) + " operands; " + info.name + " takes " +
		       std::to_string(info.min_operands) + ".." + std::to_string(info.max_operands);
	for (int j = in.num_operands; j < NEURON_TILE_MAX_OPERANDS; ++j)
		if (!all_zero(in.operands[j]))
			return where(k) + ": operand " + std::to_string(j) + " is past num_operands and must be zero";
	if (in.op != NEURON_TILE_OP_IOTA && !all_zero(in.base))
		return where(k) + ": base is IOTA's; zero here";
	Range r;
	if (auto why = affine(k, "base", in.base, &r); !why.empty())
		return why;
	// Masks first: the HBM operands' bounds depend on them.
	if (auto why = masks(k, in.operands[info.iteration]); !why.empty())
		return why;
	Place pl[NEURON_TILE_MAX_OPERANDS];
	for (int j = 0; j < in.num_operands; ++j)
		if (auto why = ap(k, j, &pl[j]); !why.empty())
			return why;
	if (auto why = shapes(k, pl); !why.empty())
		return why;
	if (auto why = overlap(k, pl); !why.empty())
		return why;
	const uint64_t elements = pl[info.iteration].elements;
	once[k] = in.op == NEURON_TILE_OP_MATMUL ? elements * uint64_t(in.operands[1].sizes[0]) : elements; // MACs: M N K
	if (in.operands[0].space == NEURON_TILE_HBM)
		out->arg_written[in.operands[0].arg] = 1;
	return {};
}

// The most work the core does between two loop-iteration boundaries: from the
// start, from after each loop_end (a loop left) and from each loop's first body
// instruction (a loop taken again), up to the next loop_end in the text.
std::string Validator::steps()
{
	const size_t n = insns.size();
	std::vector<uint64_t> upto(n + 1, 0); // work from k to the next loop_end (exclusive)
	for (size_t k = n; k-- > 0;)
		upto[k] = insns[k].op == NEURON_TILE_OP_LOOP_END ? 0 : std::min<uint64_t>(upto[k + 1] + once[k], NEURON_TILE_MAX_STEP_WORK + 1);
	uint64_t most = upto[0];
	size_t worst = 0;
	for (size_t k = 0; k < n; ++k)
		if ((insns[k].op == NEURON_TILE_OP_LOOP_END || insns[k].op == NEURON_TILE_OP_LOOP_BEGIN) && upto[k + 1] > most) {
			most = upto[k + 1];
			worst = k + 1;
		}
	out->max_step_work = most;
	if (most > NEURON_TILE_MAX_STEP_WORK)
		return "the instructions from " + std::to_string(worst) + " to the next loop boundary do " +
		       std::to_string(most) + "+ units of work; at most " + std::to_string(NEURON_TILE_MAX_STEP_WORK) +
		       " run without a loop boundary (the core must be able to switch tenants): put them in a loop";
	return {};
}

} // namespace

std::string validate(const chip::OnChip &onchip, std::span<const uint64_t> arg_bytes,
		     std::span<const neuron_tile_insn> insns, TileProgram *out)
{
	*out = TileProgram{};
	if (insns.empty() || insns.size() > NEURON_TILE_MAX_INSNS)
		return "a tile program has 1.." + std::to_string(NEURON_TILE_MAX_INSNS) + " instructions, not " +
		       std::to_string(insns.size());
	if (arg_bytes.size() > NEURON_TILE_MAX_ARGS)
		return "a kernel takes at most " + std::to_string(NEURON_TILE_MAX_ARGS) + " HBM arguments, not " +
		       std::to_string(arg_bytes.size());
	out->onchip = onchip;
	out->arg_written.assign(arg_bytes.size(), 0);
	Validator v{onchip, arg_bytes, insns, out, {}, 1, std::vector<uint64_t>(insns.size(), 0)};
	std::vector<uint32_t> open;
	out->match.assign(insns.size(), 0);
	i128 work = 0;
	for (size_t k = 0; k < insns.size(); ++k) {
		const i128 mult = v.mult; // the iterations of this instruction (before a loop_end pops)
		if (auto why = v.insn(k); !why.empty())
			return why;
		work += mult * v.once[k];
		if (work > NEURON_TILE_MAX_WORK)
			return v.where(k) + ": the kernel's work passes " + std::to_string(NEURON_TILE_MAX_WORK) +
			       " units (elements touched, multiply-adds) here; split it into several kernels";
		if (insns[k].op == NEURON_TILE_OP_LOOP_BEGIN)
			open.push_back(static_cast<uint32_t>(k));
		if (insns[k].op == NEURON_TILE_OP_LOOP_END) {
			out->match[k] = open.back();
			out->match[open.back()] = static_cast<uint32_t>(k);
			open.pop_back();
		}
	}
	if (!open.empty())
		return v.where(open.back()) + ": the loop is never closed (loop_end missing)";
	out->work = static_cast<uint64_t>(work);
	// A step ends at every loop_end and at the program's end: a program that
	// ends with a loop_end has no step after it (Execution::step agrees).
	if (insns.back().op == NEURON_TILE_OP_LOOP_END)
		--out->steps;
	if (auto why = v.steps(); !why.empty())
		return why;
	out->arg_bytes.assign(arg_bytes.begin(), arg_bytes.end());
	out->insns.assign(insns.begin(), insns.end());
	find_parallel_loops(out);
	return {};
}

std::string parse(std::span<const std::byte> bytes, std::vector<uint64_t> *arg_bytes,
		  std::vector<neuron_tile_insn> *insns)
{
	neuron_tile_program_header h;
	if (bytes.size() < sizeof(h))
		return "a tile program starts with a " + std::to_string(sizeof(h)) + "-byte header; got " +
		       std::to_string(bytes.size()) + " bytes";
	std::memcpy(&h, bytes.data(), sizeof(h));
	if (h.magic != NEURON_TILE_MAGIC || h.version != NEURON_TILE_VERSION || h.reserved)
		return "not a tile program of version " + std::to_string(NEURON_TILE_VERSION) + " (magic " +
		       std::to_string(h.magic) + ", version " + std::to_string(h.version) + ", reserved must be zero)";
	if (h.num_args > NEURON_TILE_MAX_ARGS || h.num_insns == 0 || h.num_insns > NEURON_TILE_MAX_INSNS)
		return "the header declares " + std::to_string(h.num_args) + " arguments and " + std::to_string(h.num_insns) +
		       " instructions; the limits are " + std::to_string(NEURON_TILE_MAX_ARGS) + " and 1.." +
		       std::to_string(NEURON_TILE_MAX_INSNS);
	const size_t want = sizeof(h) + h.num_args * sizeof(uint64_t) + size_t(h.num_insns) * sizeof(neuron_tile_insn);
	if (bytes.size() != want)
		return "the header declares " + std::to_string(want) + " bytes; the program has " + std::to_string(bytes.size());
	arg_bytes->resize(h.num_args);
	insns->resize(h.num_insns);
	std::memcpy(arg_bytes->data(), bytes.data() + sizeof(h), h.num_args * sizeof(uint64_t));
	std::memcpy(insns->data(), bytes.data() + sizeof(h) + h.num_args * sizeof(uint64_t),
		    h.num_insns * sizeof(neuron_tile_insn));
	return {};
}

std::vector<std::byte> serialize(std::span<const uint64_t> arg_bytes, std::span<const neuron_tile_insn> insns)
{
	neuron_tile_program_header h{NEURON_TILE_MAGIC, NEURON_TILE_VERSION, static_cast<uint16_t>(arg_bytes.size()),
				     static_cast<uint32_t>(insns.size()), 0};
	std::vector<std::byte> out(sizeof(h) + arg_bytes.size_bytes() + insns.size_bytes());
	std::memcpy(out.data(), &h, sizeof(h));
	std::memcpy(out.data() + sizeof(h), arg_bytes.data(), arg_bytes.size_bytes());
	std::memcpy(out.data() + sizeof(h) + arg_bytes.size_bytes(), insns.data(), insns.size_bytes());
	return out;
}

size_t dtype_bytes(uint8_t dtype)
{
	switch (dtype) {
	case NEURON_DTYPE_F32:
	case NEURON_DTYPE_I32: return 4;
	case NEURON_DTYPE_BF16:
	case NEURON_DTYPE_F16: return 2;
	default: return 0;
	}
}

const char *op_name(uint16_t op) { return op < NEURON_TILE_OP_COUNT_ ? kOps[op].name : "unknown"; }

} // namespace neuron::tile
