#include "tenant_limits.h"

#include "admin.h"
#include "tenant.h"

#include <cerrno>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

namespace neuron::daemon {

namespace {

constexpr const char *kNames[kResources] = {"hbm_bytes", "host_buffers", "host_bytes", "queues"};

std::optional<Resource> resource_of(const std::string &name)
{
	for (size_t i = 0; i < kResources; ++i)
		if (name == kNames[i])
			return static_cast<Resource>(i);
	return std::nullopt;
}

bool is_size(Resource r) { return r == Resource::HbmBytes || r == Resource::HostBytes; }

std::string with_unit(Resource r, uint64_t v)
{
	if (!is_size(r))
		return std::to_string(v);
	static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	uint64_t x = v;
	while (u < 4 && x >= 1024 && x % 1024 == 0) {
		x /= 1024;
		++u;
	}
	return std::to_string(x) + " " + units[u];
}

// "" or why `text` is not a value for r; the value in *out (nullopt: unlimited).
std::string parse_value(Resource r, const std::string &text, uint64_t hbm, uint64_t ram, std::optional<uint64_t> *out)
{
	if (text == "unlimited") {
		*out = std::nullopt;
		return {};
	}
	char *end = nullptr;
	errno = 0;
	const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
	if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || errno == ERANGE)
		return "'" + text + "' is not a number, a size (e.g. 8G), a percentage or 'unlimited'";
	const std::string suffix(end);
	if (suffix == "%") {
		if (!is_size(r) || n > 100)
			return "a percentage (0-100%) applies to hbm_bytes and host_bytes only";
		*out = (r == Resource::HbmBytes ? hbm : ram) / 100 * n;
		return {};
	}
	int shift = 0;
	if (suffix == "K" || suffix == "KiB")
		shift = 10;
	else if (suffix == "M" || suffix == "MiB")
		shift = 20;
	else if (suffix == "G" || suffix == "GiB")
		shift = 30;
	else if (suffix == "T" || suffix == "TiB")
		shift = 40;
	else if (!suffix.empty())
		return "unknown suffix '" + suffix + "' in '" + text + "' (K, M, G, T or %)";
	if (shift && !is_size(r))
		return std::string(kNames[static_cast<int>(r)]) + " is a count: no size suffix";
	if (shift && n > (UINT64_MAX >> shift))
		return "'" + text + "' is too large";
	*out = static_cast<uint64_t>(n) << shift;
	return {};
}

} // namespace

const char *resource_name(Resource r) { return kNames[static_cast<int>(r)]; }

uint64_t host_ram_bytes()
{
	const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

Limits::Limits(Totals totals) : totals_(totals)
{
	// Enough for any one job, and never all of it: the others keep a share.
	builtin_[static_cast<int>(Resource::HbmBytes)] = {totals.hbm_bytes / 10 * 9, "built-in (90% of a device's HBM)"};
	// Each host buffer is a mapping in neurond; vm.max_map_count is 65530 by default.
	builtin_[static_cast<int>(Resource::HostBuffers)] = {4096, "built-in"};
	builtin_[static_cast<int>(Resource::HostBytes)] = {totals.host_ram / 2, "built-in (50% of RAM)"};
	builtin_[static_cast<int>(Resource::Queues)] = {256, "built-in"};
}

std::string Limits::parse(const std::vector<std::string> &entries)
{
	for (const auto &e : entries)
		if (auto err = parse_one(e); !err.empty())
			return "limit '" + e + "': " + err;
	return {};
}

std::string Limits::parse_one(const std::string &entry)
{
	const size_t eq = entry.find('=');
	if (eq == std::string::npos)
		return "expected SCOPE.RESOURCE=VALUE (e.g. training.hbm_bytes=75%)";
	const std::string key = entry.substr(0, eq), value = entry.substr(eq + 1);
	const size_t dot = key.rfind('.');
	if (dot == std::string::npos || dot == 0)
		return "expected SCOPE.RESOURCE before '=' (scopes: default, training, inference, group:NAME, uid:N)";
	const std::string scope = key.substr(0, dot);
	const auto r = resource_of(key.substr(dot + 1));
	if (!r)
		return "unknown resource '" + key.substr(dot + 1) + "' (hbm_bytes, host_buffers, host_bytes, queues)";
	Limit l;
	l.source = entry;
	if (auto err = parse_value(*r, value, totals_.hbm_bytes, totals_.host_ram, &l.value); !err.empty())
		return err;
	const auto i = static_cast<int>(*r);
	if (scope == "default") {
		default_[i] = l;
	} else if (scope == "training" || scope == "inference") {
		pools_[static_cast<int>(scope == "training" ? sched::Pool::Training : sched::Pool::Inference)][i] = l;
	} else if (scope.rfind("group:", 0) == 0 || scope.rfind("uid:", 0) == 0) {
		Class c;
		c.name = scope;
		c.by_group = scope[0] == 'g';
		const std::string id = scope.substr(c.by_group ? 6 : 4);
		if (c.by_group) {
			const struct group *g = getgrnam(id.c_str());
			if (!g)
				return "no group named '" + id + "' on this host";
			c.id = g->gr_gid;
		} else {
			char *end = nullptr;
			c.id = static_cast<uint32_t>(std::strtoul(id.c_str(), &end, 10));
			if (id.empty() || *end)
				return "'" + id + "' is not a numeric uid";
		}
		for (auto &existing : classes_)
			if (existing.name == c.name) {
				existing.limits[i] = l;
				return {};
			}
		c.limits[i] = l;
		classes_.push_back(std::move(c));
	} else {
		return "unknown scope '" + scope + "' (default, training, inference, group:NAME, uid:N)";
	}
	return {};
}

void Limits::overlay(LimitSet *set, const Partial &p)
{
	for (size_t i = 0; i < kResources; ++i)
		if (p[i])
			(*set)[i] = *p[i];
}

LimitSet Limits::for_pool(sched::Pool pool) const
{
	LimitSet s = builtin_;
	overlay(&s, default_);
	overlay(&s, pools_[static_cast<int>(pool)]);
	return s;
}

bool Limits::matches(const Class &c, const Peer &peer) const
{
	return c.by_group ? peer_in_group(peer, c.id) : peer.uid == c.id;
}

LimitSet Limits::for_tenant(const Peer &peer, sched::Pool pool, std::string *class_name) const
{
	LimitSet s = for_pool(pool);
	*class_name = sched::pool_name(pool);
	for (const Class &c : classes_)
		if (matches(c, peer)) {
			overlay(&s, c.limits);
			*class_name = c.name;
			break;
		}
	return s;
}

void Limits::fill(const LimitSet &set, google::protobuf::RepeatedPtrField<api::ResourceLimit> *out)
{
	for (size_t i = 0; i < kResources; ++i) {
		auto *l = out->Add();
		l->set_resource(kNames[i]);
		l->set_unlimited(!set[i].value);
		l->set_limit(set[i].value.value_or(0));
		l->set_source(set[i].source);
	}
}

void Limits::fill(api::PoolInfo *pool_info, sched::Pool pool) const { fill(for_pool(pool), pool_info->mutable_limits()); }

void Limits::fill_classes(api::CapacityReply *r) const
{
	for (const Class &c : classes_) {
		auto *out = r->add_limit_classes();
		out->set_name(c.name);
		for (size_t i = 0; i < kResources; ++i) {
			if (!c.limits[i])
				continue;
			auto *l = out->add_limits();
			l->set_resource(kNames[i]);
			l->set_unlimited(!c.limits[i]->value);
			l->set_limit(c.limits[i]->value.value_or(0));
			l->set_source(c.limits[i]->source);
		}
	}
}

std::string Limits::check(const LimitSet &set, Resource r, uint64_t held, uint64_t more, const std::string &class_name,
			  const std::string &where)
{
	const Limit &l = set[static_cast<int>(r)];
	if (!l.value || (more <= *l.value && held <= *l.value - more))
		return {};
	return "per-tenant limit " + std::string(resource_name(r)) + " (" + with_unit(r, *l.value) + ", class " +
	       class_name + ", from " + l.source + ") reached: this tenant holds " + with_unit(r, held) +
	       (where.empty() ? "" : " " + where) +
	       " and asked for " + with_unit(r, more) + " more; free some, or have the administrator raise it with " +
	       "neurond's limit setting (e.g. --limit " + class_name + "." + resource_name(r) + "=...)";
}

} // namespace neuron::daemon
