// The generic half of check_semantics() (semantics.cpp): what every opcode's
// check is built from. Each family of opcodes derives its checks from CheckBase
// (semantics.cpp: ISA 1.0-1.3; semantics_isa14.cpp: ISA 1.4's block 64..71).
// Internal to the kernels library.
#pragma once

#include "dtype.h"
#include "kernels.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>

namespace neuron::kernels::semantics {

// The largest stride (elements) a descriptor may give: times the largest element
// size it stays far from int64 overflow.
inline constexpr int64_t kMaxStrideElements = int64_t(1) << 56;

inline std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char *f, ...)
{
	char buf[NEURON_FAULT_REASON_LEN];
	va_list ap;
	va_start(ap, f);
	std::vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

inline Fault bad(const std::string &msg) { return Fault{NEURON_FAULT_BAD_OPERAND, msg}; }

struct OpInfo {
	const char *name;
	int arity; // operands it takes; a variadic op takes 2..arity
	const char *operands[NEURON_MAX_OPERANDS];
	bool variadic = false;
};

// The opcode's name, arity and operand names; nullptr for an unknown opcode
// (including the numbers no block has taken yet).
const OpInfo *op_info(uint16_t opcode);

struct CheckBase {
	const neuron_cmd &cmd;
	const OpInfo &op;

	const neuron_tensor_desc &d(int k) const { return cmd.operands[k]; }
	std::string who(int k) const { return fmt("operand %d (%s)", k, op.operands[k]); }

	std::optional<Fault> descriptor(int k) const
	{
		const neuron_tensor_desc &t = d(k);
		if (t.mem_space != NEURON_MEM_DEVICE && t.mem_space != NEURON_MEM_HOST)
			return bad(who(k) + fmt(": mem_space=%u is unknown (0 device, 1 host)", t.mem_space));
		if (t.mem_space == NEURON_MEM_DEVICE && t.host_buffer != 0)
			return bad(who(k) + fmt(": host_buffer=%u must be 0 for device memory", t.host_buffer));
		if (t.reserved != 0)
			return bad(who(k) + fmt(": reserved=%u must be zero", t.reserved));
		if (!is_valid_dtype(t.dtype))
			return bad(who(k) + fmt(": dtype=%u is not a valid dtype (1..%d)", t.dtype, NEURON_DTYPE_COUNT_ - 1));
		if (t.ndim > NEURON_MAX_DIMS)
			return bad(who(k) + fmt(": ndim=%u exceeds %d", t.ndim, NEURON_MAX_DIMS));
		for (int i = 0; i < NEURON_MAX_DIMS; ++i) {
			if (i < t.ndim) {
				if (t.sizes[i] < 0)
					return bad(who(k) + fmt(": sizes[%d]=%" PRId64 " is negative", i, t.sizes[i]));
				if (t.strides[i] < 0)
					return bad(who(k) + fmt(": strides[%d]=%" PRId64 " is negative", i, t.strides[i]));
			} else if (t.sizes[i] != 0 || t.strides[i] != 0) {
				return bad(who(k) + fmt(": sizes[%d]/strides[%d] must be zero past ndim=%u", i, i, t.ndim));
			}
		}
		// Element count and byte extent must be representable; the extent bound
		// matches the chip's (2^62 bytes).
		int64_t numel = 1;
		bool empty = false;
		for (int i = 0; i < t.ndim; ++i)
			empty = empty || t.sizes[i] == 0;
		// Bounded even where the extent does not bound it (a dim of size 1):
		// kernels scale strides to bytes. (An empty tensor's strides are never
		// used; gate::resolve zeroes them.)
		for (int i = 0; i < t.ndim && !empty; ++i)
			if (t.strides[i] > kMaxStrideElements)
				return bad(who(k) + fmt(": strides[%d]=%" PRId64 " exceeds 2^56", i, t.strides[i]));
		unsigned __int128 last = 0;
		for (int i = 0; i < t.ndim && !empty; ++i) {
			if (__builtin_mul_overflow(numel, t.sizes[i], &numel))
				return bad(who(k) + ": element count overflows int64");
			last += static_cast<unsigned __int128>(t.sizes[i] - 1) * static_cast<uint64_t>(t.strides[i]);
		}
		const size_t es = dtype_size(t.dtype);
		if (!empty) {
			const unsigned __int128 bytes = (last + 1) * es;
			if (bytes > (static_cast<unsigned __int128>(1) << 62))
				return bad(who(k) + ": sizes and strides reach past 2^62 bytes");
			if (t.addr > UINT64_MAX - static_cast<uint64_t>(bytes))
				return bad(who(k) + ": addr + extent overflows 64 bits");
		}
		if (t.addr % es != 0)
			return bad(who(k) + fmt(": addr=0x%" PRIx64 " is not aligned to the %s element size (%zu)", t.addr,
						dtype_name(t.dtype), es));
		return std::nullopt;
	}

	// Scalars the op does not use must be zero (bitwise for f[], so -0.0 is rejected).
	std::optional<Fault> unused_scalars(unsigned used_f, unsigned used_i) const
	{
		for (int i = 0; i < NEURON_MAX_SCALARS; ++i) {
			if (!((used_f >> i) & 1) && cmd.fscalars.bits[i] != 0)
				return bad(fmt("scalars f[%d]=%g must be zero: unused by %s", i, cmd.fscalars.f[i], op.name));
			if (!((used_i >> i) & 1) && cmd.iscalars[i] != 0)
				return bad(fmt("scalars i[%d]=%" PRId64 " must be zero: unused by %s", i, cmd.iscalars[i],
					       op.name));
		}
		return std::nullopt;
	}

	// Operand k has exactly operand 0's shape.
	std::optional<Fault> same_shape(int k) const
	{
		const neuron_tensor_desc &o = d(0), &t = d(k);
		if (t.ndim != o.ndim)
			return bad(who(k) + fmt(": ndim=%u does not match out ndim=%u", t.ndim, o.ndim));
		for (int i = 0; i < t.ndim; ++i)
			if (t.sizes[i] != o.sizes[i])
				return bad(who(k) + fmt(": sizes[%d]=%" PRId64 " does not match out sizes[%d]=%" PRId64, i,
							t.sizes[i], i, o.sizes[i]));
		return std::nullopt;
	}

	std::optional<Fault> dtype_is(int k, bool ok, const char *expected) const
	{
		if (ok)
			return std::nullopt;
		return bad(who(k) + fmt(": dtype %s is not allowed for %s (expected %s)", dtype_name(d(k).dtype), op.name,
					expected));
	}

	std::optional<Fault> selector(int64_t count, const char *what) const
	{
		if (cmd.iscalars[0] < 0 || cmd.iscalars[0] >= count)
			return bad(fmt("scalars i[0]=%" PRId64 " is not a valid %s (0..%" PRId64 ")", cmd.iscalars[0], what,
				       count - 1));
		return std::nullopt;
	}

	std::optional<Fault> same_dtype(int k) const
	{
		if (d(k).dtype != d(0).dtype)
			return bad(who(k) + fmt(": dtype %s does not match out dtype %s", dtype_name(d(k).dtype),
						dtype_name(d(0).dtype)));
		return std::nullopt;
	}

	// dim i[0] valid for operand k's rank (a 0-d tensor has one implicit dim).
	std::optional<Fault> dim_of(int k) const
	{
		const int64_t dim = cmd.iscalars[0];
		if (dim < 0 || dim >= std::max<int64_t>(d(k).ndim, 1))
			return bad(fmt("scalars i[0]=%" PRId64 " (dim) must be in [0, %u)", dim, std::max<unsigned>(d(k).ndim, 1)));
		return std::nullopt;
	}

};

// ISA 1.4 (opcodes 64..71): the per-op rules, after CheckBase's descriptor checks.
std::optional<Fault> check_isa14(const CheckBase &base);
// ISA 1.5 (opcodes 72..79, semantics_isa15.cpp): EXEC_PROGRAM (never a command
// the kernels run) and POINTWISE; MATMUL_EPILOGUE's matmul part is the
// Checker's (semantics.cpp), its bias and activation here.
std::optional<Fault> check_isa15(const CheckBase &base);
std::optional<Fault> check_epilogue_extras(const CheckBase &base);

} // namespace neuron::kernels::semantics
