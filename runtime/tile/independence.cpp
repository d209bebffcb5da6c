// Which affine loops of a validated tile program may run their iterations on
// several host threads at once (execution.h: lanes, each with its own copy of the
// core's on-chip memory) and still leave the bits of the in-order run.
//
// NKI's affine_range promises no loop-carried dependency, but neurond does not take
// a program's word for it: a program built without the Python tracer (whose write
// check is torch_neuron/kernels/_writes.py) may break the promise, and PSUM
// accumulation across iterations, which NKI allows in an affine loop, is such a
// dependency. So a loop runs in parallel only when this file proves, for every
// execution of the loop:
//  - on chip: every byte an iteration reads was written earlier in the same
//    iteration by a *fixed* write (the same dense box of bytes in every iteration:
//    offset and masks independent of the loop variables), or is written by no
//    instruction of the loop (every lane's copy holds the value from before the
//    loop); and every byte the loop writes is written by a fixed write, so the lane
//    that ran the last iteration holds the on-chip state the in-order run leaves;
//  - in HBM: each argument the loop writes is reached (read or written) by the
//    iterations at disjoint places: every access moves with the loop by the same
//    stride s bytes and one iteration's accesses span at most |s| bytes;
//  - no on-chip offset moves with an enclosing loop (kept simple: conservative).
// Arguments that alias each other in HBM are the executor's check at run time.
// Anything else runs in order, as a sequential_range: correct, only not parallel.
#include "program.h"

#include <interval_set.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace neuron::tile {

namespace {

using i128 = __int128;

// A loop must do at least this much work (elements touched, multiply-adds) for the
// copies of the on-chip memory and the threads' hand-off to pay.
constexpr uint64_t kMinWork = 1ull << 22;

// Bytes [lo, hi) of partitions [p0, p1) of SBUF or PSUM.
struct Box {
	uint8_t space;
	uint32_t p0, p1;
	i128 lo, hi;
};

// A union of boxes, kept as disjoint byte intervals per (space, partition range).
class Bytes {
public:
	void add(const Box &b) { sets_[{b.space, b.p0, b.p1}].add(b.lo, b.hi); }
	// Some one partition range holding b's has all of b's bytes (conservative:
	// bytes spread over two partition ranges do not count).
	bool covers(const Box &b) const
	{
		for (const auto &[key, set] : sets_) {
			const auto &[space, p0, p1] = key;
			if (space == b.space && p0 <= b.p0 && b.p1 <= p1 && set.contains(b.lo, b.hi))
				return true;
		}
		return false;
	}
	bool meets(const Box &b) const
	{
		for (const auto &[key, set] : sets_) {
			const auto &[space, p0, p1] = key;
			if (space == b.space && p0 < b.p1 && b.p0 < p1 && set.meets(b.lo, b.hi))
				return true;
		}
		return false;
	}

private:
	std::map<std::tuple<uint8_t, uint32_t, uint32_t>, kernels::IntervalSet<i128>> sets_;
};

// Where one instruction of the loop reaches an HBM argument: the byte stride of
// each loop variable up to the loop's own (the enclosing ones cancel out only when
// every access of the argument has the same), and the bytes it reaches in one
// iteration of the loop relative to the loop's term.
struct Reach {
	uint32_t arg;
	bool write;
	i128 stride[NEURON_TILE_MAX_LOOPS];
	i128 lo, hi;
};

bool on_chip(const neuron_tile_ap &a) { return a.space == NEURON_TILE_SBUF || a.space == NEURON_TILE_PSUM; }

class Loop {
public:
	Loop(const TileProgram &p, size_t begin, int depth) : p_(p), begin_(begin), depth_(depth) {}
	bool independent();

private:
	const TileProgram &p_;
	size_t begin_;
	int depth_;                             // the loop's variable: iv[depth_]
	int64_t trips_[NEURON_TILE_MAX_LOOPS] = {}; // of the loops open inside it (depth_ and deeper)
	int open_ = 0;                          // loops open at the instruction walked
	struct Access {
		enum Kind { Read, Write, Defines } kind;
		Box box;
	};
	std::vector<Access> chip_;
	std::vector<Reach> hbm_;

	// base + the range of sum step[l] iv[l] over the open loops from `from` on.
	void span(const neuron_tile_affine &a, int from, i128 *lo, i128 *hi) const
	{
		*lo = *hi = a.base;
		for (int l = from; l < open_; ++l) {
			const i128 s = i128(a.step[l]) * (trips_[l] - 1);
			(s < 0 ? *lo : *hi) += s;
		}
	}
	bool chip_box(const neuron_tile_ap &a, Box *b) const;
	bool fixed_write(const neuron_tile_insn &in, int j, Box *b) const;
	void hbm_reach(const neuron_tile_insn &in, const neuron_tile_ap &a, bool write);
	bool collect(const neuron_tile_insn &in);
	bool chip_ok() const;
	bool hbm_ok() const;
};

// Every byte operand a may touch in any iteration; false if it moves with a loop
// enclosing this one.
bool Loop::chip_box(const neuron_tile_ap &a, Box *b) const
{
	for (int l = 0; l < depth_; ++l)
		if (a.offset.step[l])
			return false;
	i128 lo, hi, last = 0;
	span(a.offset, depth_, &lo, &hi);
	for (int d = 1; d < a.ndim; ++d)
		last += i128(a.sizes[d] - 1) * a.strides[d];
	*b = {a.space, a.partition, a.partition + static_cast<uint32_t>(a.sizes[0]), lo,
	      hi + (last + 1) * i128(dtype_bytes(a.dtype))};
	return true;
}

// The bytes the instruction's output surely writes in every iteration, when they
// are the same dense box in each (offset and masks constant).
bool Loop::fixed_write(const neuron_tile_insn &in, int j, Box *b) const
{
	const neuron_tile_ap &o = in.operands[j];
	if (!on_chip(o))
		return false;
	for (int64_t s : o.offset.step)
		if (s)
			return false;
	// one element per active partition: a reduce's out, an activation_reduce's sum
	const bool reduce = in.op == NEURON_TILE_OP_REDUCE || j == 1;
	const neuron_tile_ap &it = in.operands[in.op == NEURON_TILE_OP_REDUCE ? 1 : 0];
	int64_t cut[NEURON_TILE_MAX_DIMS];
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d)
		cut[d] = d < it.ndim ? it.sizes[d] : 1;
	for (const neuron_tile_mask &m : in.masks) {
		if (!m.enabled)
			continue;
		for (int64_t s : m.start.step)
			if (s)
				return false;
		cut[m.dim] = std::clamp<int64_t>(m.limit - m.start.base, 0, cut[m.dim]);
	}
	if (cut[0] == 0 || (!reduce && std::find(cut, cut + it.ndim, 0) != cut + it.ndim))
		return false; // writes nothing (a reduce writes its active partitions' results)
	// Dense: the written elements (cut sizes; a reduce writes one per partition)
	// lie row-major without gaps.
	int64_t count = 1;
	for (int d = o.ndim - 1; d >= 1; --d) {
		const int64_t n = reduce ? 1 : cut[d];
		if (n == 1)
			continue;
		if (o.strides[d] != count)
			return false;
		count *= n;
	}
	*b = {o.space, o.partition, o.partition + static_cast<uint32_t>(cut[0]), o.offset.base,
	      o.offset.base + i128(count) * i128(dtype_bytes(o.dtype))};
	return true;
}

// Records where an HBM operand reaches its argument. The highest byte: as the
// validator's masked_last, over the loops inside this one, with the masks whose
// start moves only with those loops (a mask moving with this loop or an enclosing
// one is left out: the whole dim, an upper bound).
void Loop::hbm_reach(const neuron_tile_insn &in, const neuron_tile_ap &a, bool write)
{
	const i128 es = i128(dtype_bytes(a.dtype));
	Reach r{a.arg, write, {}, 0, 0};
	for (int l = 0; l <= depth_; ++l)
		r.stride[l] = i128(a.offset.step[l]) * es;
	struct Term {
		i128 base;
		i128 step[NEURON_TILE_MAX_LOOPS];
	};
	std::vector<Term> choices[NEURON_TILE_MAX_DIMS];
	for (int d = 0; d < a.ndim; ++d) {
		choices[d].push_back({i128(a.sizes[d] - 1) * a.strides[d], {}});
		for (const neuron_tile_mask &m : in.masks) {
			if (!m.enabled || m.dim != d || a.sizes[d] != in.operands[0].sizes[d] ||
			    !std::all_of(m.start.step, m.start.step + depth_ + 1, [](int64_t s) { return s == 0; }))
				continue;
			Term t{(i128(m.limit) - m.start.base - 1) * a.strides[d], {}};
			for (int l = depth_ + 1; l < NEURON_TILE_MAX_LOOPS; ++l)
				t.step[l] = -i128(m.start.step[l]) * a.strides[d];
			choices[d].push_back(t);
		}
	}
	i128 lo, hi, best = 0;
	span(a.offset, depth_ + 1, &lo, &hi);
	bool first = true;
	int pick[NEURON_TILE_MAX_DIMS] = {};
	for (;;) {
		Term sum{a.offset.base, {}};
		for (int l = depth_ + 1; l < NEURON_TILE_MAX_LOOPS; ++l)
			sum.step[l] = a.offset.step[l];
		for (int d = 0; d < a.ndim; ++d) {
			const Term &t = choices[d][pick[d]];
			sum.base += t.base;
			for (int l = depth_ + 1; l < NEURON_TILE_MAX_LOOPS; ++l)
				sum.step[l] += t.step[l];
		}
		i128 top = sum.base;
		for (int l = depth_ + 1; l < open_; ++l)
			top += std::max<i128>(0, sum.step[l] * (trips_[l] - 1));
		best = first ? top : std::min(best, top);
		first = false;
		int d = 0;
		while (d < a.ndim && ++pick[d] == int(choices[d].size()))
			pick[d++] = 0;
		if (d == a.ndim)
			break;
	}
	r.lo = lo * es;
	r.hi = (best + 1) * es;
	if (r.hi > r.lo) // else it reaches nothing (a mask cuts it away)
		hbm_.push_back(r);
}

// The accesses of one instruction, in the order the engine makes them (its inputs,
// then its output); false if the loop cannot be parallel.
bool Loop::collect(const neuron_tile_insn &in)
{
	const bool accumulate = (in.op == NEURON_TILE_OP_MATMUL || in.op == NEURON_TILE_OP_REDUCE) &&
				(in.flags & NEURON_TILE_ACCUMULATE);
	const int outputs = in.op == NEURON_TILE_OP_ACTIVATION_REDUCE ? 2 : 1; // (out, sum, ...)
	for (int j = accumulate ? 0 : outputs; j < in.num_operands; ++j) {
		const neuron_tile_ap &a = in.operands[j];
		Box b;
		if (a.space == NEURON_TILE_HBM)
			hbm_reach(in, a, false);
		else if (!chip_box(a, &b))
			return false;
		else
			chip_.push_back({Access::Read, b});
	}
	for (int j = 0; j < outputs; ++j) {
		const neuron_tile_ap &o = in.operands[j];
		Box b;
		if (o.space == NEURON_TILE_HBM) {
			hbm_reach(in, o, true);
			continue;
		}
		if (!chip_box(o, &b))
			return false;
		chip_.push_back({Access::Write, b});
		if (fixed_write(in, j, &b))
			chip_.push_back({Access::Defines, b});
	}
	return true;
}

bool Loop::chip_ok() const
{
	Bytes written, defined;
	for (const Access &a : chip_)
		if (a.kind == Access::Write)
			written.add(a.box);
	for (const Access &a : chip_) {
		if (a.kind == Access::Defines)
			defined.add(a.box);
		else if (a.kind == Access::Read && !defined.covers(a.box) && written.meets(a.box))
			return false; // reads what an earlier iteration wrote
	}
	for (const Access &a : chip_)
		if (a.kind == Access::Write && !defined.covers(a.box))
			return false; // the last iteration might not leave the in-order state
	return true;
}

// Floor and ceiling of a / b for b > 0.
i128 floor_div(i128 a, i128 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
i128 ceil_div(i128 a, i128 b) { return -floor_div(-a, b); }

// Written bytes of one iteration meet no bytes another iteration reaches: for a
// write w and an access r of its argument (both moving by s per iteration),
// iterations x != y collide iff w.lo - r.hi < s (y - x) < w.hi - r.lo for some
// 0 < |y - x| < trip. (Stacked outputs such as dk/dv [2, BH, S, D] pass: their
// slabs lie a whole BH strides apart.)
bool Loop::hbm_ok() const
{
	constexpr size_t kMostPairs = 1 << 22; // beyond, the loop runs in order (bounded validation)
	size_t pairs = 0;
	const i128 far = i128(trips_[depth_]) - 1;
	for (const Reach &w : hbm_) {
		if (!w.write)
			continue;
		for (const Reach &r : hbm_) {
			if (r.arg != w.arg)
				continue;
			if (++pairs > kMostPairs || !std::equal(r.stride, r.stride + depth_ + 1, w.stride))
				return false;
			i128 s = w.stride[depth_], lo = w.lo - r.hi, hi = w.hi - r.lo; // s * d in (lo, hi)
			if (s == 0)
				return false;
			s = s < 0 ? -s : s; // y - x ranges over both signs alike
			const i128 d0 = std::max(floor_div(lo, s) + 1, -far), d1 = std::min(ceil_div(hi, s) - 1, far);
			if (d0 <= d1 && (d0 != 0 || d1 != 0))
				return false;
		}
	}
	return true;
}

bool Loop::independent()
{
	const neuron_tile_insn &head = p_.insns[begin_];
	if ((head.flags & NEURON_TILE_SEQUENTIAL) || head.i[0] < 2)
		return false;
	trips_[depth_] = head.i[0];
	open_ = depth_ + 1;
	i128 mult = head.i[0], work = 0;
	const size_t end = p_.match[begin_];
	for (size_t k = begin_ + 1; k < end; ++k) {
		const neuron_tile_insn &in = p_.insns[k];
		if (in.op == NEURON_TILE_OP_LOOP_BEGIN) {
			trips_[open_++] = in.i[0];
			mult *= in.i[0];
		} else if (in.op == NEURON_TILE_OP_LOOP_END) {
			mult /= trips_[--open_];
		} else {
			const neuron_tile_ap &it = in.operands[in.op == NEURON_TILE_OP_REDUCE ? 1 : 0];
			i128 elements = in.op == NEURON_TILE_OP_MATMUL ? in.operands[1].sizes[0] : 1;
			for (int d = 0; d < it.ndim; ++d)
				elements *= it.sizes[d];
			work += mult * elements;
			if (!collect(in))
				return false;
		}
	}
	return work >= i128(kMinWork) && chip_ok() && hbm_ok();
}

} // namespace

void find_parallel_loops(TileProgram *p)
{
	p->parallel.assign(p->insns.size(), 0);
	int depth = 0;
	for (size_t k = 0; k < p->insns.size(); ++k) {
		const uint16_t op = p->insns[k].op;
		if (op == NEURON_TILE_OP_LOOP_BEGIN) {
			if (Loop(*p, k, depth).independent()) {
				p->parallel[k] = 1;
				k = p->match[k]; // its inner loops run in order inside each iteration
				continue;
			}
			++depth;
		} else if (op == NEURON_TILE_OP_LOOP_END) {
			--depth;
		}
	}
}

} // namespace neuron::tile
