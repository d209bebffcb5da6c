// Resolving a command's tensor descriptors against what its tenant owns.
//
// This is the check that keeps tenants apart: every byte an operand can reach must
// lie inside one of the tenant's own allocations (or host buffers, on DMA queues),
// and an output must not overlap an input or itself except in the exact in-place
// form the op allows. It runs on a private copy of the command.
#pragma once

#include "queue.h"

#include <kernels.h>

#include <array>
#include <optional>

namespace neuron::chip {

class Device;
class TenantMemory;

using OperandViews = std::array<kernels::View, NEURON_MAX_OPERANDS>;

// The work limits (kernels::kMaxCommandWork, kernels::kMaxElementsPerOperand in
// <geometry.h>) are enforced here too.
// Called with memory.mutex held (shared or exclusive). Fills views[0..num_operands).
// The command must already have passed kernels::check_semantics.
std::optional<kernels::Fault> resolve_operands(const neuron_cmd &cmd, QueueKind kind, Device &device,
					       const TenantMemory &memory, OperandViews &views);

} // namespace neuron::chip
