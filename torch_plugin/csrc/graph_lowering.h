// A recording (graph_capture.h) lowered to a program description
// (<neuron/program.h>): the storages of the graph's inputs, then those of its
// outputs, then the device constants it read, are the program's arguments; every other allocation the capture made
// is an intermediate placed by a memory plan in the program's one buffer, where
// intermediates whose lifetimes do not overlap share bytes; each recorded
// command is a node that follows the one before it.
#pragma once

#include "graph_capture.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_neuron {

// What a replay's input must look like (the capture's layout), and its argument.
struct InputSpec {
	int arg = -1; // -1: not in device memory (a host tensor), bound to nothing
	c10::Device device{c10::kCPU};
	c10::ScalarType dtype = c10::kFloat;
	std::vector<int64_t> sizes, strides;
	int64_t storage_offset = 0;
};

// A replay's output: a view of the storage bound to argument `arg` (an input's
// storage when arg < input_args, else one the replay allocates; -1: an empty
// tensor, with no memory).
struct OutputSpec {
	int arg = 0;
	c10::ScalarType dtype = c10::kFloat;
	std::vector<int64_t> sizes, strides;
	int64_t storage_offset = 0;
};

struct LoweredProgram {
	int device = 0;
	std::vector<uint64_t> arg_bytes; // the inputs' storages first, then the outputs', then the constants'
	size_t input_args = 0;
	size_t output_args_end = 0;      // the constants' arguments follow
	std::vector<at::Tensor> constants; // bound to arguments output_args_end.. at every replay
	std::vector<InputSpec> inputs;
	std::vector<OutputSpec> outputs;
	uint64_t buffer_bytes = 0;       // the memory plan's size (0: no buffer)
	uint64_t intermediate_bytes = 0; // the intermediates' sizes summed (without the plan's reuse)
	std::vector<neuron_cmd> nodes;
	std::vector<std::string> labels;
	std::vector<std::shared_ptr<const std::vector<uint8_t>>> tile_images; // of its TILE_KERNEL nodes
};

// Fills each recorded operand's owner: the allocation alive at that command that
// holds its bytes (before fusion changes the commands' numbering: an address the
// caching allocator reused names one allocation at each time).
void resolve_owners(Recording &rec);

// "" and *out, or why the recording cannot be a program.
std::string lower(const Recording &rec, int device, const std::vector<at::Tensor> &inputs,
		  const std::vector<at::Tensor> &outputs, LoweredProgram *out);

// Whether inputs have the layout the program was captured with ("" if so).
std::string input_mismatch(const LoweredProgram &p, const std::vector<at::Tensor> &inputs);

} // namespace torch_neuron
