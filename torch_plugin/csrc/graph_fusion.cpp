// Fusion of a recording (graph_fusion.h).
#include "graph_fusion.h"

#include <cstring>
#include <optional>

namespace torch_neuron {

namespace {

bool same_desc(const neuron_tensor_desc &a, const neuron_tensor_desc &b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

bool same_sizes(const neuron_tensor_desc &a, const neuron_tensor_desc &b)
{
	if (a.ndim != b.ndim)
		return false;
	for (int i = 0; i < a.ndim; ++i)
		if (a.sizes[i] != b.sizes[i])
			return false;
	return true;
}

// Every operand f32 with out's sizes (inputs may broadcast with stride 0).
bool f32_same_shape(const neuron_cmd &c)
{
	for (int k = 0; k < c.num_operands; ++k)
		if (c.operands[k].dtype != NEURON_DTYPE_F32 || c.operands[k].mem_space != NEURON_MEM_DEVICE ||
		    !same_sizes(c.operands[k], c.operands[0]))
			return false;
	return true;
}

bool scalars_zero(const neuron_cmd &c, int from_f, int from_i)
{
	for (int k = from_f; k < NEURON_MAX_SCALARS; ++k)
		if (c.fscalars.bits[k])
			return false;
	for (int k = from_i; k < NEURON_MAX_SCALARS; ++k)
		if (c.iscalars[k])
			return false;
	return true;
}

// A POINTWISE command being built: its inputs, constants and steps.
struct Chain {
	neuron_tensor_desc out{};
	int32_t out_owner = -1;
	std::vector<neuron_tensor_desc> inputs;
	std::vector<int32_t> input_owner;
	std::vector<uint64_t> consts;
	std::vector<uint16_t> steps;
	int last = -1; // value id of the last step's result

	std::optional<uint8_t> input(const neuron_tensor_desc &d, int32_t owner)
	{
		if (last >= 0 && same_desc(d, out))
			return static_cast<uint8_t>(last);
		for (size_t i = 0; i < inputs.size(); ++i)
			if (same_desc(inputs[i], d))
				return static_cast<uint8_t>(i);
		if (inputs.size() == NEURON_PW_MAX_INPUTS)
			return std::nullopt;
		inputs.push_back(d);
		input_owner.push_back(owner);
		return static_cast<uint8_t>(inputs.size() - 1);
	}
	std::optional<uint8_t> constant(double v)
	{
		uint64_t bits;
		std::memcpy(&bits, &v, sizeof(bits));
		for (size_t i = 0; i < consts.size(); ++i)
			if (consts[i] == bits)
				return static_cast<uint8_t>(NEURON_PW_VALUE_CONST0 + i);
		if (consts.size() == NEURON_MAX_SCALARS)
			return std::nullopt;
		consts.push_back(bits);
		return static_cast<uint8_t>(NEURON_PW_VALUE_CONST0 + consts.size() - 1);
	}
	bool step(uint8_t fn, std::optional<uint8_t> a, std::optional<uint8_t> b = uint8_t{0})
	{
		if (!a || !b || steps.size() == NEURON_PW_MAX_STEPS)
			return false;
		steps.push_back(static_cast<uint16_t>(fn | (*a << 6) | (*b << 11)));
		last = static_cast<int>(NEURON_PW_VALUE_STEP0 + steps.size() - 1);
		return true;
	}
};

uint8_t unary_fn(const neuron_cmd &c)
{
	switch (c.opcode) {
	case NEURON_OP_RELU: return NEURON_PW_RELU;
	case NEURON_OP_SILU: return NEURON_PW_SILU;
	case NEURON_OP_TANH: return NEURON_PW_TANH;
	case NEURON_OP_EXP: return NEURON_PW_EXP;
	case NEURON_OP_GELU: return c.iscalars[0] == 0 ? NEURON_PW_GELU : c.iscalars[0] == 1 ? NEURON_PW_GELU_TANH : 0;
	case NEURON_OP_UNARY_MATH:
		switch (c.iscalars[0]) {
		case NEURON_UNARY_LOG: return NEURON_PW_LOG;
		case NEURON_UNARY_SQRT: return NEURON_PW_SQRT;
		case NEURON_UNARY_RSQRT: return NEURON_PW_RSQRT;
		case NEURON_UNARY_ABS: return NEURON_PW_ABS;
		case NEURON_UNARY_SIGMOID: return NEURON_PW_SIGMOID;
		case NEURON_UNARY_ERF: return NEURON_PW_ERF;
		case NEURON_UNARY_RECIPROCAL: return NEURON_PW_RECIPROCAL;
		case NEURON_UNARY_NEG: return NEURON_PW_NEG;
		default: return 0;
		}
	default: return 0;
	}
}

// A POINTWISE command (the plugin's own, e.g. a layer norm's) joins a chain as its
// steps, its value ids renumbered into the chain's: its inputs (resolved before
// any of its steps, so the previous command's output is the chain's value so far),
// its constants and its earlier steps.
template <class Input> bool append_pointwise(Chain &ch, const neuron_cmd &c, Input &&in)
{
	const int inputs = c.num_operands - 1;
	std::optional<uint8_t> input_id[NEURON_PW_MAX_INPUTS];
	for (int i = 0; i < inputs && i < NEURON_PW_MAX_INPUTS; ++i)
		input_id[i] = in(1 + i);
	std::vector<uint8_t> step_id;
	auto value = [&](uint8_t v) -> std::optional<uint8_t> {
		if (v < NEURON_PW_VALUE_STEP0)
			return v < inputs ? input_id[v] : std::nullopt;
		if (v < NEURON_PW_VALUE_CONST0)
			return v - NEURON_PW_VALUE_STEP0 < static_cast<int>(step_id.size())
				       ? std::optional<uint8_t>(step_id[v - NEURON_PW_VALUE_STEP0])
				       : std::nullopt;
		return v - NEURON_PW_VALUE_CONST0 < NEURON_MAX_SCALARS ? ch.constant(c.fscalars.f[v - NEURON_PW_VALUE_CONST0])
								       : std::nullopt;
	};
	for (int s = 0; s < NEURON_PW_MAX_STEPS; ++s) {
		const auto field = static_cast<uint16_t>(static_cast<uint64_t>(c.iscalars[s / 4]) >> (16 * (s % 4)));
		const uint8_t fn = field & 63, a = (field >> 6) & 31, b = (field >> 11) & 31;
		if (fn == NEURON_PW_END)
			break;
		if (fn >= NEURON_PW_FN_COUNT_ || !ch.step(fn, value(a), NEURON_PW_FN_IS_BINARY(fn) ? value(b) : uint8_t{0}))
			return false;
		step_id.push_back(static_cast<uint8_t>(ch.last));
	}
	return !step_id.empty();
}

// Appends c's computation to the chain; false if c is not a fusable op (the
// chain may then hold a partial step: the caller drops it).
bool append(Chain &ch, const RecordedCmd &rc)
{
	const neuron_cmd &c = rc.cmd;
	if (!f32_same_shape(c))
		return false;
	auto in = [&](int k) { return ch.input(c.operands[k], rc.owner[k]); };
	switch (c.opcode) {
	case NEURON_OP_ADD:
	case NEURON_OP_SUB: {
		if (c.num_operands != 3 || !scalars_zero(c, 1, 0))
			return false;
		const uint8_t fn = c.opcode == NEURON_OP_ADD ? NEURON_PW_ADD : NEURON_PW_SUB;
		auto a = in(1), b = in(2);
		if (c.fscalars.f[0] == 1.0)
			return ch.step(fn, a, b);
		return ch.step(NEURON_PW_MUL, b, ch.constant(c.fscalars.f[0])) &&
		       ch.step(fn, a, static_cast<uint8_t>(ch.last));
	}
	case NEURON_OP_MUL:
	case NEURON_OP_DIV:
		if (c.num_operands != 3 || !scalars_zero(c, 0, 0))
			return false;
		return ch.step(c.opcode == NEURON_OP_MUL ? NEURON_PW_MUL : NEURON_PW_DIV, in(1), in(2));
	case NEURON_OP_ADD_SCALAR:
	case NEURON_OP_SUB_SCALAR:
	case NEURON_OP_MUL_SCALAR:
	case NEURON_OP_DIV_SCALAR: {
		if (c.num_operands != 2 || !scalars_zero(c, 1, 1) || (c.iscalars[0] != 0 && c.iscalars[0] != 1))
			return false;
		const uint8_t fn = NEURON_PW_ADD + (c.opcode - NEURON_OP_ADD_SCALAR);
		auto a = in(1), s = ch.constant(c.fscalars.f[0]);
		return c.iscalars[0] ? ch.step(fn, s, a) : ch.step(fn, a, s);
	}
	case NEURON_OP_BINARY_MATH: {
		if (c.num_operands != 3 || !scalars_zero(c, 0, 1))
			return false;
		const int64_t f = c.iscalars[0];
		if (f != NEURON_BINARY_MAXIMUM && f != NEURON_BINARY_MINIMUM && f != NEURON_BINARY_POW)
			return false;
		const uint8_t fn = f == NEURON_BINARY_MAXIMUM ? NEURON_PW_MAXIMUM
				   : f == NEURON_BINARY_MINIMUM ? NEURON_PW_MINIMUM
								: NEURON_PW_POW;
		return ch.step(fn, in(1), in(2));
	}
	case NEURON_OP_POINTWISE:
		return append_pointwise(ch, c, in);
	default: {
		const uint8_t fn = unary_fn(c);
		if (!fn || c.num_operands != 2 || !scalars_zero(c, 0, 1) ||
		    (c.opcode != NEURON_OP_GELU && c.opcode != NEURON_OP_UNARY_MATH && c.iscalars[0] != 0))
			return false;
		return ch.step(fn, in(1));
	}
	}
}

RecordedCmd to_command(const Chain &ch, const std::string &label)
{
	RecordedCmd r;
	r.label = label;
	r.owner[0] = ch.out_owner;
	for (size_t i = 0; i < ch.inputs.size(); ++i)
		r.owner[1 + i] = ch.input_owner[i];
	neuron_cmd &c = r.cmd;
	c.opcode = NEURON_OP_POINTWISE;
	c.num_operands = static_cast<uint8_t>(1 + ch.inputs.size());
	c.operands[0] = ch.out;
	for (size_t i = 0; i < ch.inputs.size(); ++i)
		c.operands[1 + i] = ch.inputs[i];
	for (size_t s = 0; s < ch.steps.size(); ++s)
		c.iscalars[s / 4] = static_cast<int64_t>(static_cast<uint64_t>(c.iscalars[s / 4]) |
							 (uint64_t{ch.steps[s]} << (16 * (s % 4))));
	for (size_t i = 0; i < ch.consts.size(); ++i)
		c.fscalars.bits[i] = ch.consts[i];
	return r;
}

// The allocation command k's output lies in, if it was born at command `born`
// (so no command before touched it) and dies right after command k + 1 (the
// next command is its only reader).
std::optional<size_t> dies_after_next(const Recording &rec, size_t born, size_t k)
{
	const int32_t o = rec.cmds[k].owner[0];
	if (o < 0)
		return std::nullopt;
	const CapturedAlloc &a = rec.allocs[static_cast<size_t>(o)];
	if (a.born != born || a.died != k + 2)
		return std::nullopt;
	return static_cast<size_t>(o);
}

} // namespace

FusionCounts fuse(Recording &rec)
{
	FusionCounts counts;
	const size_t n = rec.cmds.size();
	std::vector<RecordedCmd> out;
	std::vector<size_t> newpos(n + 1); // old command -> the new command that holds it
	std::vector<bool> gone(rec.allocs.size()); // intermediates fused away
	for (size_t k = 0; k < n;) {
		newpos[k] = out.size();
		const neuron_cmd &c = rec.cmds[k].cmd;
		// A linear layer: COPY(out <- bias) + MATMUL(out += a @ b), or the eager
		// MATMUL_EPILOGUE addmm sends (no activation); then an activation on its
		// result if the result dies there.
		std::optional<RecordedCmd> linear;
		size_t used = 0;
		if (k + 1 < n && c.opcode == NEURON_OP_COPY && f32_same_shape(c) && scalars_zero(c, 0, 0)) {
			const neuron_cmd &m = rec.cmds[k + 1].cmd;
			if (m.opcode == NEURON_OP_MATMUL && m.num_operands == 3 && same_desc(m.operands[0], c.operands[0]) &&
			    m.fscalars.f[1] != 0.0 && m.operands[1].dtype == NEURON_DTYPE_F32 && scalars_zero(m, 2, 0)) {
				linear = rec.cmds[k + 1];
				neuron_cmd &e = linear->cmd;
				e.opcode = NEURON_OP_MATMUL_EPILOGUE;
				e.num_operands = 4;
				e.operands[3] = c.operands[1];
				linear->owner[3] = rec.cmds[k].owner[1];
				used = 2;
			}
		} else if (c.opcode == NEURON_OP_MATMUL_EPILOGUE && c.num_operands == 4 && c.iscalars[0] == NEURON_ACT_NONE &&
			   c.iscalars[1] == 0) {
			linear = rec.cmds[k];
			used = 1;
		}
		if (linear) {
			neuron_cmd &e = linear->cmd;
			const auto mid = k + used < n ? dies_after_next(rec, k, k + used - 1) : std::nullopt;
			if (mid) {
				const neuron_cmd &act = rec.cmds[k + used].cmd;
				const int64_t a = act.opcode == NEURON_OP_RELU ? NEURON_ACT_RELU
						  : act.opcode == NEURON_OP_SILU ? NEURON_ACT_SILU
						  : act.opcode == NEURON_OP_TANH ? NEURON_ACT_TANH
						  : act.opcode == NEURON_OP_GELU && act.iscalars[0] == 0 ? NEURON_ACT_GELU
						  : act.opcode == NEURON_OP_GELU && act.iscalars[0] == 1 ? NEURON_ACT_GELU_TANH
												   : NEURON_ACT_NONE;
				if (a != NEURON_ACT_NONE && act.num_operands == 2 && f32_same_shape(act) &&
				    same_desc(act.operands[1], e.operands[0]) && scalars_zero(act, 0, 1)) {
					e.operands[0] = act.operands[0];
					linear->owner[0] = rec.cmds[k + used].owner[0];
					e.iscalars[0] = a;
					++used;
					gone[*mid] = true;
				}
			}
			for (size_t j = k + 1; j < k + used; ++j)
				newpos[j] = out.size();
			linear->label = rec.cmds[k + used - 1].label;
			out.push_back(std::move(*linear));
			++counts.epilogues;
			k += used;
			continue;
		}
		// A chain of elementwise commands, each result read only by the next.
		Chain ch;
		size_t end = k;
		Chain trial;
		if (append(trial, rec.cmds[k])) {
			ch = trial;
			ch.out = c.operands[0];
			ch.out_owner = rec.cmds[k].owner[0];
			end = k + 1;
			while (end < n) {
				const auto mid = dies_after_next(rec, end - 1, end - 1);
				if (!mid)
					break;
				Chain next = ch;
				const neuron_cmd &d = rec.cmds[end].cmd;
				bool reads = false;
				for (int j = 1; j < d.num_operands; ++j)
					reads = reads || same_desc(d.operands[j], ch.out);
				if (!reads || !append(next, rec.cmds[end]))
					break;
				next.out = d.operands[0];
				next.out_owner = rec.cmds[end].owner[0];
				ch = next;
				gone[*mid] = true;
				++end;
			}
		}
		if (end - k >= 2) {
			for (size_t j = k + 1; j < end; ++j)
				newpos[j] = out.size();
			out.push_back(to_command(ch, rec.cmds[end - 1].label));
			++counts.pointwise_chains;
			counts.pointwise_ops += end - k;
			k = end;
			continue;
		}
		out.push_back(rec.cmds[k]);
		++k;
	}
	newpos[n] = out.size();
	if (out.size() == n)
		return counts;
	// Lifetimes in the new numbering; allocations no command touches any more go.
	std::vector<CapturedAlloc> allocs;
	std::vector<int32_t> renumber(rec.allocs.size(), -1);
	for (size_t i = 0; i < rec.allocs.size(); ++i) {
		if (gone[i])
			continue;
		renumber[i] = static_cast<int32_t>(allocs.size());
		const CapturedAlloc &a = rec.allocs[i];
		CapturedAlloc b = a;
		b.born = newpos[std::min(a.born, n)];
		if (a.died != kAlive) {
			const size_t d = std::min(a.died, n);
			// Dying inside a fused command (after a command of it read it): it
			// lives through that command.
			b.died = d > 0 && d < n && newpos[d] == newpos[d - 1] ? newpos[d] + 1 : newpos[d];
		}
		allocs.push_back(b);
	}
	for (RecordedCmd &r : out)
		for (int32_t &o : r.owner)
			o = o < 0 ? -1 : renumber[static_cast<size_t>(o)];
	rec.cmds = std::move(out);
	rec.allocs = std::move(allocs);
	return counts;
}

} // namespace torch_neuron
