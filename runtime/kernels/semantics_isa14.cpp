// check_semantics() for ISA 1.4's block (opcodes 64..71, cmd.h): device RNG,
// timestamps and AMP grad scaling. Runs after CheckBase's descriptor checks.
#include "semantics_checks.h"

#include <cmath>
#include <cstring>

namespace neuron::kernels::semantics {

namespace {

struct Isa14 : CheckBase {
	static constexpr const char *kFloat = "f32, bf16 or f16";

	uint64_t numel_of(int k) const
	{
		uint64_t n = 1;
		for (int i = 0; i < d(k).ndim; ++i)
			n *= static_cast<uint64_t>(d(k).sizes[i]);
		return n;
	}

	std::optional<Fault> one_element(int k, uint8_t dtype) const
	{
		if (numel_of(k) != 1)
			return bad(who(k) + fmt(": has %" PRIu64 " elements; it must have one", numel_of(k)));
		if (d(k).dtype != dtype)
			return bad(who(k) + fmt(": dtype %s, expected %s", dtype_name(d(k).dtype), dtype_name(dtype)));
		return std::nullopt;
	}

	std::optional<Fault> finite(int k, bool positive) const
	{
		const double v = cmd.fscalars.f[k];
		if (!std::isfinite(v) || (positive && !(v > 0)))
			return bad(fmt("scalars f[%d]=%g must be finite%s", k, v, positive ? " and > 0" : ""));
		return std::nullopt;
	}

	std::optional<Fault> probability(int k) const
	{
		const double p = cmd.fscalars.f[k];
		if (!(p >= 0 && p <= 1))
			return bad(fmt("scalars f[%d]=%g (probability) must be in [0, 1]", k, p));
		return std::nullopt;
	}

	// bits[2..3]: the positions [begin, end) the command writes (end 0: all of
	// them); `positions` is how many the op has.
	std::optional<Fault> position_range(uint64_t positions) const
	{
		const uint64_t begin = cmd.fscalars.bits[2], end = cmd.fscalars.bits[3];
		const uint64_t last = end == 0 ? positions : end;
		if (last > positions || begin > last)
			return bad(fmt("scalars bits[2..3]=[%" PRIu64 ", %" PRIu64 ") (positions) must lie in [0, %" PRIu64
				       "] with begin <= end (end 0: to the last)",
				       begin, end, positions));
		return std::nullopt;
	}

	// The RNG ops' scalars: i[1] seed and i[2] offset (any values), f[] as given.
	std::optional<Fault> rng_scalars(unsigned used_f, unsigned used_i, uint64_t positions) const
	{
		if (auto f = position_range(positions))
			return f;
		return unused_scalars(used_f | 0xc, used_i | 0x6);
	}

	std::optional<Fault> rng() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_RNG_DIST_COUNT_, "distribution")))
			return f;
		const uint8_t dt = d(0).dtype;
		switch (cmd.iscalars[0]) {
		case NEURON_RNG_UNIFORM:
			if ((f = dtype_is(0, is_floating(dt), kFloat)) || (f = finite(0, false)) || (f = finite(1, false)))
				return f;
			if (cmd.fscalars.f[0] > cmd.fscalars.f[1])
				return bad(fmt("scalars f[0]=%g (from) must not exceed f[1]=%g (to)", cmd.fscalars.f[0],
					       cmd.fscalars.f[1]));
			break;
		case NEURON_RNG_NORMAL:
			if ((f = dtype_is(0, is_floating(dt), kFloat)) || (f = finite(0, false)) || (f = finite(1, false)))
				return f;
			if (cmd.fscalars.f[1] < 0)
				return bad(fmt("scalars f[1]=%g (std) must be >= 0", cmd.fscalars.f[1]));
			break;
		case NEURON_RNG_BERNOULLI:
			if ((f = probability(0)))
				return f;
			return rng_scalars(0x1, 0x1, numel_of(0));
		default: // INTEGER: from and range are bits[0], bits[1]
			if ((f = dtype_is(0, dt != NEURON_DTYPE_BOOL, "any dtype but bool")))
				return f;
			break;
		}
		return rng_scalars(0x3, 0x1, numel_of(0));
	}

	std::optional<Fault> dropout() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(d(0).dtype), kFloat)) || (f = same_dtype(2)) ||
		    (f = dtype_is(1, d(1).dtype == NEURON_DTYPE_BOOL, "bool")) || (f = same_shape(1)) ||
		    (f = same_shape(2)) || (f = finite(0, false)) || (f = probability(1)))
			return f;
		return rng_scalars(0x3, 0x0, numel_of(0));
	}

	std::optional<Fault> randperm() const
	{
		const uint8_t dt = d(0).dtype;
		std::optional<Fault> f;
		if ((f = dtype_is(0, dt == NEURON_DTYPE_I32 || dt == NEURON_DTYPE_I64 || dt == NEURON_DTYPE_F32,
				  "i32, i64 or f32")))
			return f;
		if (d(0).ndim != 1)
			return bad(who(0) + fmt(": ndim=%u, the permutation is 1-d", d(0).ndim));
		const int64_t n = d(0).sizes[0];
		const int64_t limit = dt == NEURON_DTYPE_F32 ? (int64_t{1} << 24) : dt == NEURON_DTYPE_I32 ? INT32_MAX : INT64_MAX;
		if (n > limit)
			return bad(who(0) + fmt(": %" PRId64 " elements; %s holds indexes up to %" PRId64 " exactly", n,
						dtype_name(dt), limit));
		return rng_scalars(0x0, 0x0, static_cast<uint64_t>(n));
	}

	std::optional<Fault> multinomial() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, d(0).dtype == NEURON_DTYPE_I64, "i64")) ||
		    (f = dtype_is(1, is_floating(d(1).dtype), kFloat)))
			return f;
		const int nd = d(1).ndim;
		if (nd != 1 && nd != 2)
			return bad(who(1) + fmt(": ndim=%u, the weights are 1-d (one row) or 2-d (rows)", d(1).ndim));
		if (d(0).ndim != nd)
			return bad(who(0) + fmt(": ndim=%u does not match probs ndim=%u", d(0).ndim, d(1).ndim));
		if (nd == 2 && d(0).sizes[0] != d(1).sizes[0])
			return bad(who(0) + fmt(": sizes[0]=%" PRId64 " (rows) does not match probs sizes[0]=%" PRId64,
						d(0).sizes[0], d(1).sizes[0]));
		const int64_t categories = d(1).sizes[nd - 1], samples = d(0).sizes[nd - 1];
		if (categories == 0 && samples > 0)
			return bad(who(1) + ": has no categories to draw from");
		if (cmd.iscalars[0] != 0 && cmd.iscalars[0] != 1)
			return bad(fmt("scalars i[0]=%" PRId64 " (replacement) must be 0 or 1", cmd.iscalars[0]));
		if (cmd.iscalars[0] == 0 && samples > categories)
			return bad(fmt("without replacement, %" PRId64 " samples need as many categories (probs has %" PRId64
				       ")",
				       samples, categories));
		const uint64_t rows = nd == 2 ? static_cast<uint64_t>(d(1).sizes[0]) : 1;
		return rng_scalars(0x0, 0x1, rows);
	}

	std::optional<Fault> amp_unscale() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(d(0).dtype), kFloat)) || (f = one_element(1, NEURON_DTYPE_F32)) ||
		    (f = one_element(2, NEURON_DTYPE_F32)))
			return f;
		return unused_scalars(0, 0);
	}

	std::optional<Fault> amp_update_scale() const
	{
		std::optional<Fault> f;
		if ((f = one_element(0, NEURON_DTYPE_F32)) || (f = one_element(1, NEURON_DTYPE_I32)) ||
		    (f = one_element(2, NEURON_DTYPE_F32)) || (f = finite(0, true)) || (f = finite(1, true)))
			return f;
		if (cmd.iscalars[0] < 1 || cmd.iscalars[0] > INT32_MAX)
			return bad(fmt("scalars i[0]=%" PRId64 " (growth interval) must be in [1, 2^31)", cmd.iscalars[0]));
		return unused_scalars(0x3, 0x1);
	}

	std::optional<Fault> run() const
	{
		switch (cmd.opcode) {
		case NEURON_OP_RNG:
			return rng();
		case NEURON_OP_DROPOUT:
			return dropout();
		case NEURON_OP_RANDPERM:
			return randperm();
		case NEURON_OP_MULTINOMIAL:
			return multinomial();
		case NEURON_OP_TIMESTAMP:
			if (auto f = one_element(0, NEURON_DTYPE_I64))
				return f;
			return unused_scalars(0, 0);
		case NEURON_OP_AMP_UNSCALE:
			return amp_unscale();
		case NEURON_OP_AMP_UPDATE_SCALE:
			return amp_update_scale();
		default:
			return Fault{NEURON_FAULT_BAD_OPCODE, fmt("opcode %u has no checks", cmd.opcode)};
		}
	}
};

} // namespace

std::optional<Fault> check_isa14(const CheckBase &base) { return Isa14{base}.run(); }

} // namespace neuron::kernels::semantics
