// Per-tenant resource limits (DESIGN.md section 5): what one tenant may hold, so
// that no tenant can exhaust the daemon or the devices for the others. Each
// resource's limit comes from, most specific first: the first class of neurond's
// config the tenant matches ("group:NAME" when the peer is in that Unix group,
// "uid:N"), its pool ("training" or "inference"), "default", and the built-in
// values, which protect the others out of the box.
//
// Config entries (neurond's repeated --limit, or `limit = [...]` in its config
// file): SCOPE.RESOURCE=VALUE, e.g. training.hbm_bytes=75%, group:ml.queues=512,
// uid:1000.host_buffers=unlimited. VALUE: a count or a size with an optional
// K/M/G/T suffix (powers of 1024), a percentage (hbm_bytes: of a device's HBM;
// host_bytes: of the host's RAM) or "unlimited". A new resource (e.g. programs) is
// one entry of Resource and one check where it is acquired.
//
// Threads: built at start, then read-only (control thread).
#pragma once

#include <neuron.pb.h>
#include <sched/logical_core.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace neuron::daemon {

struct Peer;

enum class Resource { HbmBytes, HostBuffers, HostBytes, Queues };
inline constexpr size_t kResources = 4;
const char *resource_name(Resource r);

struct Limit {
	std::optional<uint64_t> value; // nullopt: unlimited
	std::string source;            // the config entry ("training.hbm_bytes=75%") or "built-in"
};
using LimitSet = std::array<Limit, kResources>;

class Limits {
public:
	// What the percentages are of.
	struct Totals {
		uint64_t hbm_bytes = 0;  // one device (the smallest): hbm_bytes is per device
		uint64_t host_ram = 0;
	};
	// Built-in values only.
	explicit Limits(Totals totals);
	// Adds config entries; "" or what is wrong with the first bad one.
	std::string parse(const std::vector<std::string> &entries);

	// The limits of a tenant of pool `pool` with these credentials, and the class
	// they come from ("training", "group:ml", ...).
	LimitSet for_tenant(const Peer &peer, sched::Pool pool, std::string *class_name) const;
	LimitSet for_pool(sched::Pool pool) const;

	void fill(api::PoolInfo *pool_info, sched::Pool pool) const;
	void fill_classes(api::CapacityReply *r) const;
	static void fill(const LimitSet &set, google::protobuf::RepeatedPtrField<api::ResourceLimit> *out);

	// "" if a tenant holding `held` of `r` may take `more`; else the refusal
	// (RESOURCE_EXHAUSTED) naming the limit and where it comes from.
	// `where` ("on device 1") says what `held` counts, for per-device resources.
	static std::string check(const LimitSet &set, Resource r, uint64_t held, uint64_t more,
				 const std::string &class_name, const std::string &where = {});

private:
	using Partial = std::array<std::optional<Limit>, kResources>;
	struct Class {
		std::string name; // "group:ml", "uid:1000"
		bool by_group = false;
		uint32_t id = 0;  // gid or uid
		Partial limits;
	};
	std::string parse_one(const std::string &entry);
	bool matches(const Class &c, const Peer &peer) const;
	static void overlay(LimitSet *set, const Partial &p);

	Totals totals_;
	LimitSet builtin_;
	Partial default_;
	Partial pools_[sched::kPoolCount];
	std::vector<Class> classes_;
};

// The host's physical memory in bytes (sysconf), for percentages and defaults.
uint64_t host_ram_bytes();

} // namespace neuron::daemon
