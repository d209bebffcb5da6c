#include "validate.h"

#include "rerun_reads.h"

#include <gate/admit.h>

#include <geometry.h>
#include <kernels.h>

#include <algorithm>
#include <queue>

namespace neuron::program {

namespace {

// Where a region's bytes sit while nodes are checked: every argument and buffer
// gets a space of its own, so the gate's checks (alignment, overlap) apply as
// they will to the bound addresses.
constexpr uint64_t kSyntheticBase = 1ull << 44;
uint64_t synthetic(uint64_t region) { return kSyntheticBase + (region << 40); }

using Access = RegionAccess;

struct Checker {
	const Description &d;
	Program *out;
	std::vector<std::vector<Access>> accesses; // per region: args, then buffers

	uint64_t regions() const { return d.arg_bytes.size() + d.buffer_bytes.size(); }
	std::string region_name(uint64_t r) const
	{
		return r < d.arg_bytes.size() ? "argument " + std::to_string(r)
					      : "buffer " + std::to_string(r - d.arg_bytes.size());
	}
	uint64_t region_size(uint64_t r) const
	{
		return r < d.arg_bytes.size() ? d.arg_bytes[r] : d.buffer_bytes[r - d.arg_bytes.size()];
	}
	std::string node_label(uint32_t i) const
	{
		std::string s = "node " + std::to_string(i) + " (" + kernels::op_name(d.nodes[i].cmd.opcode);
		if (!d.nodes[i].label.empty())
			s += " '" + d.nodes[i].label + "'";
		return s + ")";
	}

	std::string sizes() const;
	std::string tile_programs();
	std::string tile_kernel(const neuron_cmd &cmd, Node *n) const;
	std::string node(uint32_t i, uint32_t pos, Node *n);
	std::string order(std::vector<uint32_t> *topo) const;
	std::string cycle(const std::vector<uint32_t> &indegree) const;
	std::string hazards(const std::vector<uint32_t> &topo) const;
};

std::string Checker::sizes() const
{
	if (d.nodes.empty())
		return "a program needs at least one node";
	if (d.nodes.size() > NEURON_PROGRAM_MAX_NODES)
		return "the program has " + std::to_string(d.nodes.size()) + " nodes; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_NODES) + " (split it into several programs)";
	if (d.arg_bytes.size() > NEURON_PROGRAM_MAX_ARGS)
		return "the program has " + std::to_string(d.arg_bytes.size()) + " arguments; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_ARGS);
	if (d.buffer_bytes.size() > NEURON_PROGRAM_MAX_BUFFERS)
		return "the program has " + std::to_string(d.buffer_bytes.size()) + " buffers; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_BUFFERS) + " (plan them into fewer)";
	uint64_t deps = 0;
	for (const NodeSpec &n : d.nodes)
		deps += n.deps.size();
	if (deps > NEURON_PROGRAM_MAX_DEPS)
		return "the program has " + std::to_string(deps) + " dependency edges; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_DEPS);
	for (uint64_t r = 0; r < regions(); ++r)
		if (region_size(r) == 0 || region_size(r) > kMaxRegionBytes)
			return region_name(r) + " is " + std::to_string(region_size(r)) +
			       " bytes; arguments and buffers take 1 byte to 2^40 bytes";
	return {};
}

// Every tile program, validated for the device's on-chip memories.
std::string Checker::tile_programs()
{
	if (d.tile_images.size() > NEURON_PROGRAM_MAX_TILE_PROGRAMS)
		return "the program has " + std::to_string(d.tile_images.size()) + " tile programs; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_TILE_PROGRAMS);
	for (size_t t = 0; t < d.tile_images.size(); ++t) {
		std::vector<uint64_t> arg_bytes;
		std::vector<neuron_tile_insn> insns;
		auto tp = std::make_shared<tile::TileProgram>();
		std::string why = tile::parse(d.tile_images[t], &arg_bytes, &insns);
		if (why.empty())
			why = tile::validate(d.onchip, arg_bytes, insns, tp.get());
		if (!why.empty())
			return "tile program " + std::to_string(t) + ": " + why;
		out->tiles.push_back(std::move(tp));
	}
	return {};
}

// A TILE_KERNEL node against the tile program it names: one operand per kernel
// argument of exactly its size, and every argument the kernel writes among the
// node's outputs. The node keeps the kernel's step count (its tiles) in i[2].
std::string Checker::tile_kernel(const neuron_cmd &cmd, Node *n) const
{
	const uint64_t t = static_cast<uint64_t>(cmd.iscalars[0]);
	if (t >= out->tiles.size())
		return "names tile program " + std::to_string(t) + "; the program has " + std::to_string(out->tiles.size());
	const tile::TileProgram &tp = *out->tiles[t];
	if (size_t(cmd.num_operands) != tp.arg_bytes.size())
		return std::to_string(cmd.num_operands) + " operands for tile program " + std::to_string(t) + ", which takes " +
		       std::to_string(tp.arg_bytes.size()) + " arguments";
	for (int k = 0; k < cmd.num_operands; ++k) {
		if (uint64_t(cmd.operands[k].sizes[0]) != tp.arg_bytes[k])
			return "operand " + std::to_string(k) + " has " + std::to_string(cmd.operands[k].sizes[0]) +
			       " bytes; tile program " + std::to_string(t) + " declares " + std::to_string(tp.arg_bytes[k]) +
			       " for its argument " + std::to_string(k);
		if (tp.arg_written[k] && k >= cmd.iscalars[1])
			return "tile program " + std::to_string(t) + " writes its argument " + std::to_string(k) +
			       ", which the node passes as an input (i[1] = " + std::to_string(cmd.iscalars[1]) +
			       " outputs come first)";
	}
	if (cmd.iscalars[2] != 0)
		return "i[2] must be zero (neurond keeps the kernel's step count there)";
	n->cmd.iscalars[2] = static_cast<int64_t>(tp.steps);
	return {};
}

// Node i (at execution position pos): its operands in place, the gate's checks,
// its accesses recorded.
std::string Checker::node(uint32_t i, uint32_t pos, Node *n)
{
	const NodeSpec &spec = d.nodes[i];
	const neuron_cmd &cmd = spec.cmd;
	const std::string who = node_label(i);
	if (spec.label.size() >= NEURON_PROGRAM_LABEL_LEN)
		return "node " + std::to_string(i) + ": label of " + std::to_string(spec.label.size()) +
		       " bytes; at most " + std::to_string(NEURON_PROGRAM_LABEL_LEN - 1);
	if (cmd.opcode == NEURON_OP_EXEC_PROGRAM)
		return who + ": a program cannot run a program";
	if (cmd.wait.queue_id != 0 || cmd.wait.value != 0)
		return who + ": nodes cannot wait on queues; order them with dependencies";
	if (cmd.num_operands > NEURON_MAX_OPERANDS)
		return who + ": num_operands=" + std::to_string(cmd.num_operands) + " exceeds " +
		       std::to_string(NEURON_MAX_OPERANDS);
	neuron_cmd placed = cmd;
	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{};
	std::array<uint64_t, NEURON_MAX_OPERANDS> region{};
	for (int k = 0; k < cmd.num_operands; ++k) {
		neuron_tensor_desc &t = placed.operands[k];
		const std::string op = who + ": " + gate::operand_name(cmd, k);
		uint64_t r;
		if (t.mem_space == NEURON_MEM_PROGRAM_ARG && t.host_buffer < d.arg_bytes.size())
			r = t.host_buffer;
		else if (t.mem_space == NEURON_MEM_PROGRAM_BUFFER && t.host_buffer < d.buffer_bytes.size())
			r = d.arg_bytes.size() + t.host_buffer;
		else if (t.mem_space == NEURON_MEM_PROGRAM_ARG || t.mem_space == NEURON_MEM_PROGRAM_BUFFER)
			return op + " names " + (t.mem_space == NEURON_MEM_PROGRAM_ARG ? "argument " : "buffer ") +
			       std::to_string(t.host_buffer) + ", which the program does not have";
		else
			return op + ": mem_space " + std::to_string(t.mem_space) +
			       " is not allowed in a program (name memory as an argument or a program buffer)";
		if (t.addr > kMaxRegionBytes)
			return op + ": offset " + std::to_string(t.addr) + " is past the end of " + region_name(r);
		region[k] = r;
		t.addr += synthetic(r);
		t.mem_space = NEURON_MEM_DEVICE;
		t.host_buffer = 0;
	}
	if (auto f = gate::check_command(placed))
		return who + ": " + f->message;
	for (int k = 0; k < cmd.num_operands; ++k) {
		const uint64_t offset = cmd.operands[k].addr;
		const uint64_t extent = kernels::byte_extent(cmd.operands[k]).value_or(~0ull);
		const uint64_t size = region_size(region[k]);
		if (extent > size || offset > size - extent)
			return who + ": " + gate::operand_name(cmd, k) + " reaches bytes [" + std::to_string(offset) + ", +" +
			       std::to_string(extent) + ") of " + region_name(region[k]) + ", which has " +
			       std::to_string(size) + " bytes";
		ranges[k] = {placed.operands[k].addr, extent};
		const bool write = k < kernels::written_operands(cmd);
		// A written operand is read too unless the op overwrites its outputs; it
		// covers its bytes only if it has no gaps (a strided view writes only its
		// elements).
		const bool overwrites = write && kernels::overwrites_outputs(cmd);
		const bool dense = kernels::numel(cmd.operands[k]) * kernels::dtype_size(cmd.operands[k].dtype) == extent;
		if (extent > 0)
			accesses[region[k]].push_back({offset, offset + extent, pos, write, !overwrites, overwrites && dense});
		if (write && region[k] < d.arg_bytes.size())
			out->arg_written[region[k]] = 1;
	}
	if (auto f = kernels::check_output_overlap(placed, std::span(ranges.data(), size_t(cmd.num_operands))))
		return who + ": " + f->message;
	n->cmd = cmd;
	if (cmd.opcode == NEURON_OP_TILE_KERNEL)
		if (auto why = tile_kernel(cmd, n); !why.empty())
			return who + ": " + why;
	n->label = spec.label;
	n->index = i;
	n->random = is_random(cmd.opcode);
	return {};
}

// A topological order of the dependency edges, the lowest index first among the
// nodes that are ready (so nodes listed in order run as listed).
std::string Checker::order(std::vector<uint32_t> *topo) const
{
	const uint32_t n = static_cast<uint32_t>(d.nodes.size());
	std::vector<uint32_t> indegree(n, 0);
	std::vector<std::vector<uint32_t>> users(n);
	for (uint32_t i = 0; i < n; ++i)
		for (uint32_t dep : d.nodes[i].deps) {
			if (dep >= n)
				return node_label(i) + " depends on node " + std::to_string(dep) + ", which does not exist (" +
				       std::to_string(n) + " nodes)";
			if (dep == i)
				return node_label(i) + " depends on itself";
			users[dep].push_back(i);
			++indegree[i];
		}
	std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
	for (uint32_t i = 0; i < n; ++i)
		if (indegree[i] == 0)
			ready.push(i);
	std::vector<uint32_t> left = indegree;
	while (!ready.empty()) {
		const uint32_t v = ready.top();
		ready.pop();
		topo->push_back(v);
		for (uint32_t u : users[v])
			if (--left[u] == 0)
				ready.push(u);
	}
	if (topo->size() != n)
		return cycle(left);
	return {};
}

// The nodes left with unmet dependencies hold a cycle: walk dependencies from
// one of them until a node repeats, and name the loop.
std::string Checker::cycle(const std::vector<uint32_t> &left) const
{
	uint32_t v = 0;
	while (left[v] == 0)
		++v;
	std::vector<int64_t> seen(d.nodes.size(), -1);
	std::vector<uint32_t> path;
	while (seen[v] < 0) {
		seen[v] = static_cast<int64_t>(path.size());
		path.push_back(v);
		for (uint32_t dep : d.nodes[v].deps)
			if (left[dep] != 0) {
				v = dep;
				break;
			}
	}
	std::string s = "the dependencies form a cycle: ";
	for (size_t k = static_cast<size_t>(seen[v]); k < path.size(); ++k)
		s += "node " + std::to_string(path[k]) + " needs ";
	return s + "node " + std::to_string(v);
}

// Every two nodes that touch the same bytes of an argument or buffer, one of
// them writing, must be ordered by the edges: otherwise the result depends on
// which runs first, and a memory plan could hand bytes to a new value while an
// old one is still read.
std::string Checker::hazards(const std::vector<uint32_t> &topo) const
{
	const size_t n = topo.size(), words = (n + 63) / 64;
	std::vector<uint32_t> pos_of(n);
	for (size_t p = 0; p < n; ++p)
		pos_of[topo[p]] = static_cast<uint32_t>(p);
	// before[p]: the positions of every node that must finish before position p.
	std::vector<uint64_t> before(n * words, 0);
	for (size_t p = 0; p < n; ++p) {
		uint64_t *row = &before[p * words];
		for (uint32_t dep : d.nodes[topo[p]].deps) {
			const uint32_t q = pos_of[dep];
			const uint64_t *src = &before[q * words];
			for (size_t w = 0; w < words; ++w)
				row[w] |= src[w];
			row[q / 64] |= 1ull << (q % 64);
		}
	}
	auto ordered = [&](uint32_t a, uint32_t b) { // a < b in execution order
		return (before[b * words + a / 64] >> (a % 64)) & 1;
	};
	uint64_t checks = 0;
	for (uint64_t r = 0; r < accesses.size(); ++r) {
		std::vector<Access> acc = accesses[r];
		std::sort(acc.begin(), acc.end(), [](const Access &x, const Access &y) { return x.lo < y.lo; });
		std::vector<const Access *> open;
		for (const Access &a : acc) {
			std::erase_if(open, [&](const Access *o) { return o->hi <= a.lo; });
			for (const Access *o : open) {
				if (++checks > kMaxHazardChecks)
					return "the program has too many overlapping accesses to validate (over " +
					       std::to_string(kMaxHazardChecks) + " pairs): split it or give its values more buffers";
				if (!a.write && !o->write)
					continue;
				const uint32_t x = std::min(a.pos, o->pos), y = std::max(a.pos, o->pos);
				if (x == y || ordered(x, y))
					continue;
				const Access &w = a.write ? a : *o, &other = a.write ? *o : a;
				const uint64_t lo = std::max(a.lo, o->lo), hi = std::min(a.hi, o->hi);
				return node_label(topo[w.pos]) + " writes bytes [" + std::to_string(lo) + ", " + std::to_string(hi) +
				       ") of " + region_name(r) + " that " + node_label(topo[other.pos]) +
				       (other.write ? " also writes" : " reads") +
				       ", and no dependency orders the two (a memory plan may reuse bytes only after their "
				       "last use)";
			}
			open.push_back(&a);
		}
	}
	return {};
}

} // namespace

std::string validate(const Description &d, Program *out)
{
	Checker c{d, out, {}};
	if (auto why = c.sizes(); !why.empty())
		return why;
	std::vector<uint32_t> topo;
	if (auto why = c.order(&topo); !why.empty())
		return why;
	if (auto why = c.tile_programs(); !why.empty())
		return why;
	out->device = d.device;
	out->arg_bytes = d.arg_bytes;
	out->arg_written.assign(d.arg_bytes.size(), 0);
	out->buffer_bytes = d.buffer_bytes;
	out->nodes.assign(topo.size(), Node{});
	c.accesses.assign(c.regions(), {});
	for (uint32_t p = 0; p < topo.size(); ++p)
		if (auto why = c.node(topo[p], p, &out->nodes[p]); !why.empty())
			return why;
	if (auto why = c.hazards(topo); !why.empty())
		return why;
	out->restore_on_rerun = read_before_written(c.accesses);
	return {};
}

} // namespace neuron::program
