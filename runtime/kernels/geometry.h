// Geometry of tensor descriptors: what memory and how much work a descriptor or
// command reaches. Shared by every backend's validation (runtime/chip/operands.cpp,
// runtime/kmd/kmd_engine.cpp) and by tiling, so that all apply the same rules.
#pragma once

#include "fault.h"

#include <neuron/cmd.h>

#include <cstdint>
#include <optional>
#include <span>

namespace neuron::kernels {

// Commands above these are refused, so no single command occupies an engine for
// much more than a second (a broadcast input with stride 0 is small in memory but
// not in work).
inline constexpr uint64_t kMaxElementsPerOperand = 1ull << 32;
inline constexpr uint64_t kMaxCommandWork = 1ull << 37; // a 4096^3 matmul is 2^36

// Bytes from the first to one past the last element the descriptor reaches; 0 for
// an empty tensor; nullopt past 2^62 bytes.
std::optional<uint64_t> byte_extent(const neuron_tensor_desc &d);
// Element count (saturates at UINT64_MAX).
uint64_t numel(const neuron_tensor_desc &d);
// Element operations a command costs: its largest operand's element count, times
// K for a matmul.
uint64_t command_work(const neuron_cmd &cmd);
// True if two distinct index tuples of the descriptor name one element.
bool self_overlapping(const neuron_tensor_desc &d);
// Same memory, dtype, shape and strides.
bool same_view(const neuron_tensor_desc &a, const neuron_tensor_desc &b);

// The bytes one operand reaches, [start, start + length), in whatever single
// address space the caller resolved operands into (length 0: nothing).
struct ByteRange {
	uint64_t start = 0;
	uint64_t length = 0;
};
// How many leading operands a command writes (1 for all but multi-output ops).
int written_operands(uint16_t opcode);
// The same for a whole command: TILE_KERNEL says in i[1] how many it writes.
int written_operands(const neuron_cmd &cmd);
// True if the command's written operands are a function of its inputs alone:
// every element it writes is overwritten, never read first (false for ops that
// read or accumulate into what they write, or that write only part of it from a
// state that itself changes). Restart survival (backend/queue_keep.h, program
// replays) needs no copy of what such a command writes.
bool overwrites_outputs(const neuron_cmd &cmd);
// The output rules every backend applies once operands are resolved: operand 0
// must not overlap itself, nor any input except as the exact in-place view of
// an op whose output may alias its inputs. ranges[k] belongs to cmd.operands[k]
// (cmd.num_operands entries). Ops with several outputs get no aliasing at all:
// every written operand must be disjoint from every other operand. OVERLAP fault,
// or nullopt.
std::optional<Fault> check_output_overlap(const neuron_cmd &cmd, std::span<const ByteRange> ranges);

} // namespace neuron::kernels
