// What a command's operands may point at, as the gate (admit.h) asks it: the
// tenant's own allocations and host buffers (backend/tenant_memory.h, for the
// scheduler's engines), or the BOs a driver job declared (kmd/kmd_engine.cpp).
// An implementation answers where the bytes are, or why they may not be touched,
// in the gate's wording (gate::hex for addresses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace neuron::gate {

// Where an operand's first byte lies: a host address an in-process engine can
// read and write (null when there is none here), and the backend's handle of the
// buffer that holds it with the byte's offset inside (0, 0 when there is none).
struct Placement {
	std::byte *data = nullptr;
	uint32_t handle = 0;
	uint64_t handle_offset = 0;
	// Where the bytes sit in one address space per MemorySpace, for the overlap
	// rules (device memory and host buffers never share it).
	uint64_t key = 0;
};

class MemorySpace {
public:
	virtual ~MemorySpace() = default;
	// Device memory [address, address + bytes) (bytes > 0), written by the command
	// if `write`. False with *why ("bytes [0x.., +N) ... are not inside ...").
	virtual bool place_device(uint64_t address, uint64_t bytes, bool write, Placement *out, std::string *why) const = 0;
	// Bytes [offset, offset + bytes) of host buffer `handle` (DMA queues only).
	virtual bool place_host(uint32_t handle, uint64_t offset, uint64_t bytes, bool write, Placement *out,
				std::string *why) const = 0;
};

} // namespace neuron::gate
