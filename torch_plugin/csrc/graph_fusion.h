// Fusion of a recording (graph_capture.h) before it is lowered to a program:
//  - a chain of f32 elementwise commands, each reading the one before's result
//    and that result dying right after, becomes one POINTWISE command (cmd.h,
//    ISA 1.5): up to 16 steps over up to 5 inputs, no intermediate stored;
//  - a MATMUL whose result only gets a bias added (and an activation applied)
//    becomes one MATMUL_EPILOGUE (a linear layer).
// Each fused function computes what the unfused opcode computes in f32, so the
// results are the unfused commands' bits. Intermediates that no command touches
// any more leave the recording (the memory plan does not place them).
#pragma once

#include "graph_capture.h"

namespace torch_neuron {

struct FusionCounts {
	size_t pointwise_chains = 0, pointwise_ops = 0; // chains made, commands they replaced
	size_t epilogues = 0;                           // MATMUL + bias (+ activation)
};

FusionCounts fuse(Recording &rec);

} // namespace torch_neuron
