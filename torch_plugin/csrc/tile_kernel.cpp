// Tile kernels (torch_neuron/kernels): a traced tile program registered with
// neurond as a program of one TILE_KERNEL node (<neuron/tile.h>, cmd.h ISA 1.6),
// then run on the current stream with one EXEC_PROGRAM per call, binding the
// tensors' storages as the kernel's HBM arguments (outputs first). While
// torch.compile captures a graph, the run is also recorded as a TILE_KERNEL
// command with the kernel's image (graph_capture.h): in the graph's program the
// kernel is one node, between the commands of the ops around it.
//
// The registry maps handles to programs; its mutex is held only inside each call.
#include "graph_capture.h"
#include "memory.h"
#include "runtime.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <neuron/tile.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

struct TileKernel {
	uint64_t id = 0; // neurond's program id
	int device = 0;
	int64_t outputs = 0;
	std::vector<uint64_t> arg_bytes;
	std::shared_ptr<const std::vector<uint8_t>> image; // for the graphs that capture it
};

std::mutex g_mu;
std::map<int64_t, TileKernel> g_kernels;
int64_t g_next = 1;

// The argument sizes from the image's header ("" or what is wrong).
std::string arg_sizes(const at::Tensor &image, std::vector<uint64_t> *out)
{
	neuron_tile_program_header h;
	if (image.scalar_type() != at::kByte || image.device().type() != c10::DeviceType::CPU ||
	    !image.is_contiguous() || static_cast<size_t>(image.numel()) < sizeof(h))
		return "the tile program must be a contiguous CPU uint8 tensor holding its wire form";
	std::memcpy(&h, image.data_ptr(), sizeof(h));
	if (h.num_args > NEURON_TILE_MAX_ARGS || sizeof(h) + h.num_args * 8ull > static_cast<size_t>(image.numel()))
		return "the tile program's header declares " + std::to_string(h.num_args) + " arguments";
	out->resize(h.num_args);
	std::memcpy(out->data(), static_cast<const uint8_t *>(image.data_ptr()) + sizeof(h), h.num_args * 8ull);
	return {};
}

// (handle, "") or (0, neurond's refusal).
std::tuple<int64_t, std::string> op_register(const at::Tensor &image, int64_t outputs, int64_t device)
{
	check_device(static_cast<int>(device));
	TileKernel k;
	k.device = static_cast<int>(device);
	k.outputs = outputs;
	if (auto why = arg_sizes(image, &k.arg_bytes); !why.empty())
		return {0, why};
	neuron_program_node node{};
	neuron_cmd &c = node.cmd;
	c.opcode = NEURON_OP_TILE_KERNEL;
	c.num_operands = static_cast<uint8_t>(k.arg_bytes.size());
	for (size_t a = 0; a < k.arg_bytes.size(); ++a) {
		neuron_tensor_desc &d = c.operands[a];
		d.mem_space = NEURON_MEM_PROGRAM_ARG;
		d.host_buffer = static_cast<uint32_t>(a);
		d.dtype = NEURON_DTYPE_U8;
		d.ndim = 1;
		d.sizes[0] = static_cast<int64_t>(k.arg_bytes[a]);
		d.strides[0] = 1;
	}
	c.iscalars[1] = outputs;
	node.label = "tile kernel";
	neuron_program_desc desc{};
	desc.device = static_cast<uint32_t>(device);
	desc.arg_count = static_cast<uint32_t>(k.arg_bytes.size());
	desc.arg_bytes = k.arg_bytes.data();
	desc.node_count = 1;
	desc.nodes = &node;
	const neuron_tile_image tile{image.data_ptr(), static_cast<uint64_t>(image.numel())};
	if (neuron_program_register_kernels(client(), &desc, &tile, 1, &k.id) != NEURON_OK)
		return {0, neuron_last_error()};
	const auto *bytes = static_cast<const uint8_t *>(image.data_ptr());
	k.image = std::make_shared<const std::vector<uint8_t>>(bytes, bytes + image.numel());
	std::lock_guard lock(g_mu);
	const int64_t handle = g_next++;
	g_kernels[handle] = std::move(k);
	return {handle, ""};
}

// One EXEC_PROGRAM on the current stream of the kernel's device.
void op_run(int64_t handle, const std::vector<at::Tensor> &args)
{
	TileKernel k;
	{
		std::lock_guard lock(g_mu);
		auto it = g_kernels.find(handle);
		TORCH_CHECK(it != g_kernels.end(), "neuron: tile kernel ", handle, " does not exist");
		k = it->second;
	}
	TORCH_CHECK(args.size() == k.arg_bytes.size(), "neuron: the tile kernel takes ", k.arg_bytes.size(),
		    " tensors, got ", args.size());
	std::vector<uint64_t> bindings(args.size());
	for (size_t a = 0; a < args.size(); ++a) {
		const at::Tensor &t = args[a];
		TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == k.device,
			    "neuron: tile kernel argument ", a, " is on ", t.device(), ", not neuron:", k.device);
		TORCH_CHECK(t.is_contiguous() && static_cast<uint64_t>(t.nbytes()) == k.arg_bytes[a],
			    "neuron: tile kernel argument ", a, " must be contiguous with ", k.arg_bytes[a], " bytes");
		bindings[a] = dev_addr(t.data_ptr());
	}
	const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(k.device));
	c10::DeviceGuard guard(device);
	if (capture_active()) [[unlikely]] {
		neuron_cmd c{};
		c.opcode = NEURON_OP_TILE_KERNEL;
		c.num_operands = static_cast<uint8_t>(args.size());
		for (size_t a = 0; a < args.size(); ++a) {
			neuron_tensor_desc &d = c.operands[a];
			d.mem_space = NEURON_MEM_DEVICE;
			d.addr = bindings[a];
			d.dtype = NEURON_DTYPE_U8;
			d.ndim = 1;
			d.sizes[0] = static_cast<int64_t>(k.arg_bytes[a]);
			d.strides[0] = 1;
		}
		c.iscalars[1] = k.outputs;
		capture_tile_kernel(current_queues(k.device), c, handle, k.image);
	}
	submit_program(current_queues(k.device), k.id, bindings.data(), static_cast<uint32_t>(bindings.size()));
}

} // namespace

TORCH_LIBRARY_FRAGMENT(neuron, m)
{
	m.def("_tile_kernel_register(Tensor image, int outputs, int device) -> (int, str)", &op_register);
	m.def("_tile_kernel_run(int handle, Tensor[] args) -> ()", &op_run);
}

} // namespace torch_neuron
