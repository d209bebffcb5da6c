#include "fault_injection.h"

#include <charconv>
#include <limits>

namespace neuron::sched {

namespace {

struct KindName {
	InjectedFault::Kind kind;
	const char *name;
};
constexpr KindName kKinds[] = {
	{InjectedFault::Kind::EngineFault, "engine-fault"},
	{InjectedFault::Kind::DmaError, "dma-error"},
	{InjectedFault::Kind::SlowCore, "slow-core"},
	{InjectedFault::Kind::StuckCore, "stuck-core"},
};

bool parse_u64(const std::string &s, uint64_t max, uint64_t *out)
{
	const char *end = s.data() + s.size();
	auto [p, ec] = std::from_chars(s.data(), end, *out);
	return !s.empty() && ec == std::errc() && p == end && *out <= max;
}

// One key=value of the spec into f; "" or what is wrong.
std::string apply_key(const std::string &key, const std::string &value, InjectedFault *f, bool *core_given)
{
	uint64_t v = 0;
	if (key == "device") {
		if (!parse_u64(value, 63, &v))
			return "device must be a number 0..63, not '" + value + "'";
		f->device = static_cast<uint32_t>(v);
	} else if (key == "core") {
		if (f->on_dma_engine())
			return "core does not apply to dma-error (it hits the device's DMA engine)";
		if (!parse_u64(value, 63, &v))
			return "core must be a number 0..63, not '" + value + "'";
		f->core = static_cast<uint32_t>(v);
		*core_given = true;
	} else if (key == "after") {
		if (!parse_u64(value, std::numeric_limits<uint32_t>::max(), &v))
			return "after must be a number of commands, not '" + value + "'";
		f->after = v;
	} else if (key == "count") {
		if (f->kind == InjectedFault::Kind::SlowCore)
			return "count does not apply to slow-core (the core stays slow)";
		if (!parse_u64(value, std::numeric_limits<uint32_t>::max(), &v))
			return "count must be a number (0: every time), not '" + value + "'";
		f->count = v;
	} else if (key == "factor") {
		if (f->kind != InjectedFault::Kind::SlowCore)
			return "factor applies to slow-core only";
		if (!parse_u64(value, 1000, &v) || v < 2)
			return "factor must be a number 2..1000, not '" + value + "'";
		f->factor = static_cast<uint32_t>(v);
	} else {
		return "unknown key '" + key + "' (device, core, after, count, factor)";
	}
	return {};
}

} // namespace

const char *injected_fault_kind_name(InjectedFault::Kind k)
{
	for (const auto &n : kKinds)
		if (n.kind == k)
			return n.name;
	return "?";
}

std::string injected_fault_syntax()
{
	return "KIND[:key=value,...], KIND one of engine-fault, dma-error, slow-core, stuck-core; keys device=D, "
	       "core=C (not for dma-error), after=N, count=N (0: every time), factor=F (slow-core, 2..1000)";
}

std::string parse_injected_fault(const std::string &text, InjectedFault *out)
{
	InjectedFault f;
	f.spec = text;
	const size_t colon = text.find(':');
	const std::string kind = text.substr(0, colon);
	bool known = false;
	for (const auto &n : kKinds)
		if (kind == n.name) {
			f.kind = n.kind;
			known = true;
		}
	if (!known)
		return "'" + text + "': unknown kind '" + kind + "'; expected " + injected_fault_syntax();
	bool core_given = false;
	const std::string keys = colon == std::string::npos ? std::string() : text.substr(colon + 1);
	size_t pos = 0;
	while (pos < keys.size()) {
		size_t comma = keys.find(',', pos);
		if (comma == std::string::npos)
			comma = keys.size();
		const std::string item = keys.substr(pos, comma - pos);
		const size_t eq = item.find('=');
		if (eq == std::string::npos)
			return "'" + text + "': '" + item + "' is not key=value";
		if (auto err = apply_key(item.substr(0, eq), item.substr(eq + 1), &f, &core_given); !err.empty())
			return "'" + text + "': " + err;
		pos = comma + 1;
	}
	if (!f.on_dma_engine() && !core_given)
		return "'" + text + "': " + kind + " needs core=C (which NeuronCore misbehaves)";
	if (f.kind == InjectedFault::Kind::SlowCore && f.factor < 2)
		return "'" + text + "': slow-core needs factor=F (2..1000)";
	*out = std::move(f);
	return {};
}

const InjectedFault *FaultInjector::next_command()
{
	const uint64_t n = commands_++;
	for (size_t i = 0; i < faults_.size(); ++i) {
		const InjectedFault &f = faults_[i];
		if (f.kind == InjectedFault::Kind::SlowCore || n < f.after || (f.count != 0 && fired_[i] >= f.count))
			continue;
		++fired_[i];
		return &f;
	}
	return nullptr;
}

const InjectedFault *FaultInjector::slow(bool *first)
{
	*first = false;
	for (const InjectedFault &f : faults_)
		if (f.kind == InjectedFault::Kind::SlowCore && commands_ > f.after) {
			*first = !slow_reported_;
			slow_reported_ = true;
			return &f;
		}
	return nullptr;
}

} // namespace neuron::sched
