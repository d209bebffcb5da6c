// Lowering of a recording to a program description (graph_lowering.h).
#include "graph_lowering.h"

#include "memory.h"

#include <algorithm>
#include <map>

namespace torch_neuron {

namespace {

constexpr uint64_t kPlanAlign = 512; // as the caching allocator's blocks

uint64_t dtype_bytes(uint8_t dtype)
{
	switch (dtype) {
	case NEURON_DTYPE_I64: return 8;
	case NEURON_DTYPE_F32:
	case NEURON_DTYPE_I32: return 4;
	case NEURON_DTYPE_BF16:
	case NEURON_DTYPE_F16: return 2;
	default: return 1;
	}
}

// Bytes [lo, hi) a descriptor touches; false if it touches none (a zero size).
bool extent(const neuron_tensor_desc &d, uint64_t *lo, uint64_t *hi)
{
	int64_t first = 0, last = 0;
	for (int i = 0; i < d.ndim; ++i) {
		if (d.sizes[i] == 0)
			return false;
		const int64_t span = (d.sizes[i] - 1) * d.strides[i];
		(span < 0 ? first : last) += span;
	}
	const int64_t es = static_cast<int64_t>(dtype_bytes(d.dtype));
	*lo = d.addr + static_cast<uint64_t>(first * es);
	*hi = d.addr + static_cast<uint64_t>((last + 1) * es);
	return true;
}

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// First fit by lifetime: each intermediate gets the lowest offset that no
// intermediate alive at the same time holds. Returns the plan's size.
uint64_t plan_intermediates(const std::vector<CapturedAlloc> &allocs, const std::vector<size_t> &which,
			    size_t end, std::vector<uint64_t> *offset)
{
	struct Placed {
		uint64_t off, bytes;
		size_t died;
	};
	std::vector<size_t> order = which;
	std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return allocs[a].born < allocs[b].born; });
	std::vector<Placed> active;
	uint64_t peak = 0;
	for (size_t i : order) {
		const CapturedAlloc &a = allocs[i];
		std::erase_if(active, [&](const Placed &p) { return p.died <= a.born; });
		std::sort(active.begin(), active.end(), [](const Placed &x, const Placed &y) { return x.off < y.off; });
		const uint64_t bytes = round_up(std::max<uint64_t>(a.bytes, 1), kPlanAlign);
		uint64_t at = 0;
		for (const Placed &p : active) {
			if (at + bytes <= p.off)
				break;
			at = std::max(at, p.off + p.bytes);
		}
		(*offset)[i] = at;
		active.push_back({at, bytes, a.died == kAlive ? end : a.died});
		peak = std::max(peak, at + bytes);
	}
	return peak;
}

uint64_t storage_base(const at::Tensor &t) { return dev_addr(t.storage().data()); }

InputSpec spec_of(const at::Tensor &t)
{
	InputSpec s;
	s.device = t.device();
	s.dtype = t.scalar_type();
	s.sizes = t.sizes().vec();
	s.strides = t.strides().vec();
	s.storage_offset = t.storage_offset();
	return s;
}

struct Region {
	uint64_t bytes;
	int arg;
};

// Finds the region holding [lo, hi) in a map keyed by start address.
template <class Map, class Size> auto containing(const Map &m, uint64_t lo, uint64_t hi, Size size_of)
{
	auto it = m.upper_bound(lo);
	if (it == m.begin())
		return m.end();
	--it;
	return hi <= it->first + size_of(it->second) ? it : m.end();
}

// The nodes: each recorded command with its operands named by argument or by
// the plan's offset.
std::string lower_nodes(const Recording &rec, const std::map<uint64_t, Region> &args,
			const std::map<uint64_t, int> &output_allocs, const std::vector<uint64_t> &offset,
			LoweredProgram *out)
{
	for (size_t k = 0; k < rec.cmds.size(); ++k) {
		neuron_cmd cmd = rec.cmds[k].cmd;
		for (int j = 0; j < cmd.num_operands; ++j) {
			neuron_tensor_desc &d = cmd.operands[j];
			const std::string who = "'" + rec.cmds[k].label + "' operand " + std::to_string(j);
			if (d.mem_space != NEURON_MEM_DEVICE)
				return who + " is in host memory";
			uint64_t lo = 0, hi = 0;
			if (!extent(d, &lo, &hi)) {
				if (out->arg_bytes.empty())
					return who + " is empty and the program has no argument to name";
				d.mem_space = NEURON_MEM_PROGRAM_ARG;
				d.host_buffer = 0;
				d.addr = 0;
				continue;
			}
			const int32_t owner = rec.cmds[k].owner[j];
			if (owner >= 0) {
				const CapturedAlloc &a = rec.allocs[static_cast<size_t>(owner)];
				if (auto o = output_allocs.find(static_cast<uint64_t>(owner)); o != output_allocs.end()) {
					d.mem_space = NEURON_MEM_PROGRAM_ARG;
					d.host_buffer = static_cast<uint32_t>(o->second);
					d.addr -= a.addr;
				} else {
					d.mem_space = NEURON_MEM_PROGRAM_BUFFER;
					d.host_buffer = 0;
					d.addr = d.addr - a.addr + offset[static_cast<size_t>(owner)];
				}
				continue;
			}
			auto a = containing(args, lo, hi, [](const Region &r) { return r.bytes; });
			if (a == args.end())
				return who + " names memory that is neither an input of the graph nor allocated by it (a "
					     "tensor from outside the graph)";
			d.mem_space = NEURON_MEM_PROGRAM_ARG;
			d.host_buffer = static_cast<uint32_t>(a->second.arg);
			d.addr -= a->first;
		}
		out->nodes.push_back(cmd);
		out->labels.push_back(rec.cmds[k].label.substr(0, NEURON_PROGRAM_LABEL_LEN - 1));
	}
	return {};
}

} // namespace

void resolve_owners(Recording &rec)
{
	std::vector<size_t> by_death(rec.allocs.size());
	for (size_t i = 0; i < by_death.size(); ++i)
		by_death[i] = i;
	std::stable_sort(by_death.begin(), by_death.end(),
			 [&](size_t a, size_t b) { return rec.allocs[a].died < rec.allocs[b].died; });
	std::map<uint64_t, size_t> live; // address -> allocation alive at the command
	size_t next_born = 0, next_dead = 0;
	for (size_t k = 0; k < rec.cmds.size(); ++k) {
		for (; next_dead < by_death.size() && rec.allocs[by_death[next_dead]].died <= k; ++next_dead) {
			auto it = live.find(rec.allocs[by_death[next_dead]].addr);
			if (it != live.end() && it->second == by_death[next_dead])
				live.erase(it);
		}
		for (; next_born < rec.allocs.size() && rec.allocs[next_born].born <= k; ++next_born)
			if (rec.allocs[next_born].died > k)
				live[rec.allocs[next_born].addr] = next_born;
		RecordedCmd &c = rec.cmds[k];
		for (int j = 0; j < c.cmd.num_operands; ++j) {
			uint64_t lo = 0, hi = 0;
			if (c.cmd.operands[j].mem_space != NEURON_MEM_DEVICE || !extent(c.cmd.operands[j], &lo, &hi))
				continue;
			auto l = containing(live, lo, hi, [&](size_t i) { return rec.allocs[i].bytes; });
			c.owner[j] = l == live.end() ? -1 : static_cast<int32_t>(l->second);
		}
	}
}

std::string lower(const Recording &rec, int device, const std::vector<at::Tensor> &inputs,
		  const std::vector<at::Tensor> &outputs, LoweredProgram *out)
{
	if (!rec.taint.empty())
		return rec.taint;
	if (rec.cmds.empty())
		return "the graph submitted no device command";
	out->device = device;
	out->tile_images = rec.tile_images;
	std::map<uint64_t, Region> args; // storage base -> its argument
	for (const at::Tensor &t : inputs) {
		InputSpec s = spec_of(t);
		if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && t.storage().nbytes() > 0) {
			if (t.device().index() != device)
				return "an input is on neuron:" + std::to_string(t.device().index()) + ", the graph ran on neuron:" +
				       std::to_string(device);
			auto [it, fresh] = args.try_emplace(storage_base(t), Region{t.storage().nbytes(), 0});
			if (fresh) {
				it->second.arg = static_cast<int>(out->arg_bytes.size());
				out->arg_bytes.push_back(t.storage().nbytes());
			}
			s.arg = it->second.arg;
		}
		out->inputs.push_back(std::move(s));
	}
	out->input_args = out->arg_bytes.size();
	std::map<uint64_t, int> output_allocs; // index in rec.allocs -> argument (keys are indices)
	for (size_t i = 0; i < outputs.size(); ++i) {
		const at::Tensor &t = outputs[i];
		if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1)
			return "output " + std::to_string(i) + " is not a neuron tensor";
		const InputSpec s = spec_of(t);
		if (t.storage().nbytes() == 0) { // an empty tensor: no memory to bind
			out->outputs.push_back({-1, s.dtype, s.sizes, s.strides, s.storage_offset});
			continue;
		}
		const uint64_t base = storage_base(t);
		if (auto in = args.find(base); in != args.end()) {
			// A view of an input (a saved transpose of a weight): the replay makes
			// the same view of what the call binds there.
			out->outputs.push_back({in->second.arg, s.dtype, s.sizes, s.strides, s.storage_offset});
			continue;
		}
		size_t found = kAlive;
		for (size_t a = 0; a < rec.allocs.size(); ++a)
			if (rec.allocs[a].addr == base && rec.allocs[a].died == kAlive)
				found = a;
		if (found == kAlive)
			return "output " + std::to_string(i) + " is memory the graph did not allocate";
		auto [it, fresh] = output_allocs.try_emplace(found, static_cast<int>(out->arg_bytes.size()));
		if (fresh)
			out->arg_bytes.push_back(t.storage().nbytes());
		out->outputs.push_back({it->second, s.dtype, s.sizes, s.strides, s.storage_offset});
	}
	out->output_args_end = out->arg_bytes.size();
	for (const at::Tensor &c : rec.constants) {
		if (c.device().index() != device)
			return "a device constant the graph reads is on neuron:" + std::to_string(c.device().index());
		auto [it, fresh] = args.try_emplace(storage_base(c), Region{c.storage().nbytes(), 0});
		if (fresh) {
			it->second.arg = static_cast<int>(out->arg_bytes.size());
			out->arg_bytes.push_back(c.storage().nbytes());
			out->constants.push_back(c);
		}
	}
	std::vector<size_t> intermediates;
	for (size_t a = 0; a < rec.allocs.size(); ++a)
		if (!output_allocs.count(a)) {
			intermediates.push_back(a);
			out->intermediate_bytes += rec.allocs[a].bytes;
		}
	std::vector<uint64_t> offset(rec.allocs.size(), 0);
	out->buffer_bytes = plan_intermediates(rec.allocs, intermediates, rec.cmds.size(), &offset);
	return lower_nodes(rec, args, output_allocs, offset, out);
}

} // namespace torch_neuron

namespace torch_neuron {

std::string input_mismatch(const LoweredProgram &p, const std::vector<at::Tensor> &inputs)
{
	if (inputs.size() != p.inputs.size())
		return std::to_string(inputs.size()) + " inputs, captured with " + std::to_string(p.inputs.size());
	std::vector<uint64_t> bound(p.input_args, 0);
	for (size_t i = 0; i < inputs.size(); ++i) {
		const at::Tensor &t = inputs[i];
		const InputSpec &s = p.inputs[i];
		const std::string who = "input " + std::to_string(i);
		if (!t.defined() || t.device() != s.device || t.scalar_type() != s.dtype || t.sizes() != s.sizes ||
		    t.strides() != s.strides || t.storage_offset() != s.storage_offset)
			return who + " has another device, dtype, shape or layout";
		if (s.arg < 0)
			continue;
		const uint64_t base = dev_addr(t.storage().data());
		if (t.storage().nbytes() < p.arg_bytes[s.arg])
			return who + "'s storage is smaller";
		if (bound[s.arg] != 0 && bound[s.arg] != base)
			return who + " no longer shares its storage with an earlier input";
		bound[s.arg] = base;
	}
	return {};
}

} // namespace torch_neuron
