// The programs of torch.compile's graphs (torch_neuron/compiler.py): capture ->
// lower -> register with neurond once; replay = allocate the outputs, bind the
// inputs' and outputs' storages and the device constants the graph read, one
// EXEC_PROGRAM submission on the stream.
//
// The registry maps the backend's handles to programs; its mutex is held only
// inside each call (a replay copies what it needs first).
#include "graph_capture.h"
#include "graph_fusion.h"
#include "graph_lowering.h"
#include "memory.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

struct GraphProgram {
	uint64_t id = 0; // neurond's program id
	// The stream it was captured on, and replays on: its buffer holds one
	// replay's intermediates at a time, which one stream's order guarantees.
	const StreamQueues *stream = nullptr;
	LoweredProgram plan;
	FusionCounts fused;
};

std::mutex g_registry_mu;
std::map<int64_t, std::shared_ptr<const GraphProgram>> g_registry;
int64_t g_next_handle = 1;

std::shared_ptr<const GraphProgram> find_program(int64_t handle)
{
	std::lock_guard lock(g_registry_mu);
	auto it = g_registry.find(handle);
	TORCH_CHECK(it != g_registry.end(), "neuron: graph program ", handle, " does not exist (released?)");
	return it->second;
}

// neurond validates the program; its refusal comes back as the reason.
std::string register_program(const LoweredProgram &p, uint64_t *id)
{
	std::vector<neuron_program_node> nodes(p.nodes.size());
	std::vector<uint32_t> deps(p.nodes.size());
	for (size_t k = 0; k < p.nodes.size(); ++k) {
		nodes[k].cmd = p.nodes[k];
		deps[k] = static_cast<uint32_t>(k) - 1;
		nodes[k].deps = k ? &deps[k] : nullptr; // the order they were submitted in
		nodes[k].dep_count = k ? 1 : 0;
		nodes[k].label = p.labels[k].c_str();
	}
	const uint64_t buffers[1] = {p.buffer_bytes};
	neuron_program_desc desc{};
	desc.device = static_cast<uint32_t>(p.device);
	desc.arg_count = static_cast<uint32_t>(p.arg_bytes.size());
	desc.arg_bytes = p.arg_bytes.data();
	desc.buffer_count = p.buffer_bytes ? 1 : 0;
	desc.buffer_bytes = buffers;
	desc.node_count = static_cast<uint32_t>(nodes.size());
	desc.nodes = nodes.data();
	std::vector<neuron_tile_image> tiles;
	for (const auto &image : p.tile_images)
		tiles.push_back({image->data(), image->size()});
	const neuron_status s = tiles.empty() ? neuron_program_register(client(), &desc, id)
					      : neuron_program_register_kernels(client(), &desc, tiles.data(),
										static_cast<uint32_t>(tiles.size()), id);
	if (s != NEURON_OK)
		return neuron_last_error();
	return {};
}

void op_capture_begin(int64_t device)
{
	check_device(static_cast<int>(device));
	capture_begin(static_cast<int>(device), current_queues(static_cast<int>(device)));
}

void op_capture_label(const std::string &label) { capture_label(label); }

void op_capture_abort() { (void)capture_finish(); }

// (handle, "") once registered, or (0, why the graph stays op by op).
std::tuple<int64_t, std::string> op_capture_end(const std::vector<at::Tensor> &inputs,
						const std::vector<at::Tensor> &outputs, int64_t device, bool fusion)
{
	Recording rec = capture_finish();
	auto g = std::make_shared<GraphProgram>();
	g->stream = &current_queues(static_cast<int>(device));
	if (rec.taint.empty()) {
		resolve_owners(rec);
		if (fusion)
			g->fused = fuse(rec);
	}
	if (auto why = lower(rec, static_cast<int>(device), inputs, outputs, &g->plan); !why.empty())
		return {0, why};
	if (auto why = register_program(g->plan, &g->id); !why.empty())
		return {0, "neurond refused the program: " + why};
	std::lock_guard lock(g_registry_mu);
	const int64_t handle = g_next_handle++;
	g_registry[handle] = std::move(g);
	return {handle, ""};
}

// (true, outputs) after one submission; (false, []) if the inputs' layout is not
// the captured one or the current stream is another (the caller runs the graph
// op by op).
std::tuple<bool, std::vector<at::Tensor>> op_program_run(int64_t handle, const std::vector<at::Tensor> &inputs)
{
	const std::shared_ptr<const GraphProgram> g = find_program(handle);
	const LoweredProgram &p = g->plan;
	if (!input_mismatch(p, inputs).empty() || &current_queues(p.device) != g->stream)
		return {false, {}};
	std::vector<uint64_t> bindings(p.arg_bytes.size(), 0);
	std::vector<c10::Storage> storages(p.arg_bytes.size());
	for (size_t i = 0; i < inputs.size(); ++i)
		if (p.inputs[i].arg >= 0) {
			bindings[p.inputs[i].arg] = dev_addr(inputs[i].storage().data());
			storages[p.inputs[i].arg] = inputs[i].storage();
		}
	const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(p.device));
	c10::DeviceGuard guard(device);
	for (size_t i = 0; i < p.constants.size(); ++i)
		bindings[p.output_args_end + i] = dev_addr(p.constants[i].storage().data());
	for (size_t a = p.input_args; a < p.output_args_end; ++a) {
		c10::Allocator *alloc = device_allocator();
		// Resizable, as any tensor's storage (set_ requires it).
		storages[a] = c10::Storage(c10::Storage::use_byte_size_t(), p.arg_bytes[a], alloc->allocate(p.arg_bytes[a]),
					   alloc, true);
		bindings[a] = dev_addr(storages[a].data());
	}
	std::vector<at::Tensor> outs;
	for (const OutputSpec &o : p.outputs) {
		const auto options = at::TensorOptions().dtype(o.dtype).device(device);
		if (o.arg < 0) {
			outs.push_back(at::empty_strided(o.sizes, o.strides, options));
			continue;
		}
		at::Tensor t = at::empty({0}, options);
		t.set_(storages[o.arg], o.storage_offset, o.sizes, o.strides);
		outs.push_back(std::move(t));
	}
	submit_program(current_queues(p.device), g->id, bindings.data(), static_cast<uint32_t>(bindings.size()));
	return {true, std::move(outs)};
}

// Why inputs would not replay ("" if they would): for the backend's messages.
std::string op_program_mismatch(int64_t handle, const std::vector<at::Tensor> &inputs)
{
	return input_mismatch(find_program(handle)->plan, inputs);
}

// [program id, nodes, arguments, buffer bytes, intermediate bytes before the plan,
//  pointwise chains, the commands they replaced, matmul epilogues, tile kernels]
std::vector<int64_t> op_program_info(int64_t handle)
{
	const std::shared_ptr<const GraphProgram> g = find_program(handle);
	const LoweredProgram &p = g->plan;
	return {static_cast<int64_t>(g->id), static_cast<int64_t>(p.nodes.size()), static_cast<int64_t>(p.arg_bytes.size()),
		static_cast<int64_t>(p.buffer_bytes), static_cast<int64_t>(p.intermediate_bytes),
		static_cast<int64_t>(g->fused.pointwise_chains), static_cast<int64_t>(g->fused.pointwise_ops),
		static_cast<int64_t>(g->fused.epilogues), static_cast<int64_t>(p.tile_images.size())};
}

// The program goes (neurond frees its buffer once replays already submitted end).
void op_program_release(int64_t handle)
{
	std::shared_ptr<const GraphProgram> g;
	{
		std::lock_guard lock(g_registry_mu);
		auto it = g_registry.find(handle);
		if (it == g_registry.end())
			return;
		g = std::move(it->second);
		g_registry.erase(it);
	}
	if (!connected())
		return;
	// A replay submitted on the stream may not have been admitted yet, and
	// neurond faults an EXEC_PROGRAM that names a deregistered program (only
	// admitted ones finish): let the stream drain first. (If the stream faulted,
	// the report surfaces here, in the graph's release, and the stream has been
	// reset; the release goes on.)
	try {
		sync_stream(*const_cast<StreamQueues *>(g->stream));
	} catch (const std::exception &) {
	}
	(void)neuron_program_release(client(), g->id);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(neuron, m)
{
	m.def("_capture_begin(int device) -> ()", &op_capture_begin);
	m.def("_capture_label(str label) -> ()", &op_capture_label);
	m.def("_capture_abort() -> ()", &op_capture_abort);
	m.def("_capture_end(Tensor[] inputs, Tensor[] outputs, int device, bool fusion) -> (int, str)", &op_capture_end);
	m.def("_program_run(int handle, Tensor[] inputs) -> (bool, Tensor[])", &op_program_run);
	m.def("_program_mismatch(int handle, Tensor[] inputs) -> str", &op_program_mismatch);
	m.def("_program_info(int handle) -> int[]", &op_program_info);
	m.def("_program_release(int handle) -> ()", &op_program_release);
}

} // namespace torch_neuron
