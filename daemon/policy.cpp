#include "policy.h"

#include "log.h"
#include "text.h"

#include <neuron/futex.h>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace neuron::daemon {

namespace {

bool parse_hhmm(const std::string &s, int *minutes)
{
	int h = -1, m = -1;
	char extra;
	// At most "HH:MM": sscanf would also take leading zeros and blanks, and a window
	// of 500 KB of zeros would make the policy too large to report.
	if (s.size() > 5)
		return false;
	if (std::sscanf(s.c_str(), "%d:%d%c", &h, &m, &extra) != 2 || h < 0 || h > 24 || m < 0 || m > 59 ||
	    (h == 24 && m != 0))
		return false;
	*minutes = h * 60 + m;
	return true;
}

int minutes_now()
{
	const std::time_t t = std::time(nullptr);
	std::tm tm{};
	localtime_r(&t, &tm);
	return tm.tm_hour * 60 + tm.tm_min;
}

bool in_window(const api::ScheduleWindow &w, int now)
{
	int a = 0, b = 0;
	if (!parse_hhmm(w.start(), &a) || !parse_hhmm(w.end(), &b))
		return false;
	return a <= b ? (now >= a && now < b) : (now >= a || now < b); // wraps past midnight
}

} // namespace

std::string parse_schedule(const std::string &text, api::PolicyConfig *out)
{
	size_t pos = 0;
	while (pos < text.size()) {
		size_t comma = text.find(',', pos);
		if (comma == std::string::npos)
			comma = text.size();
		const std::string item = text.substr(pos, comma - pos);
		pos = comma + 1;
		const size_t dash = item.find('-');
		if (dash == std::string::npos)
			return "schedule window '" + item + "' is not HH:MM-HH:MM[/cores]";
		std::string end = item.substr(dash + 1);
		uint32_t cores = 0;
		if (const size_t slash = end.find('/'); slash != std::string::npos) {
			try {
				cores = static_cast<uint32_t>(std::stoul(end.substr(slash + 1)));
			} catch (...) {
				return "schedule window '" + item + "': the core count after '/' is not a number";
			}
			end = end.substr(0, slash);
		}
		auto *w = out->add_windows();
		w->set_start(item.substr(0, dash));
		w->set_end(end);
		w->set_cores(cores);
	}
	return validate_policy(*out);
}

std::string validate_policy(const api::PolicyConfig &p)
{
	if (p.mode() != "manual" && p.mode() != "scheduled" && p.mode() != "auto")
		return "policy mode '" + escape_text(p.mode(), 64) + "' is unknown: use manual, scheduled or auto";
	// GetCapacity reports the policy in one frame (1 MiB) beside the cores and loans:
	// a policy that could not be reported is refused here, not cut off there.
	constexpr int kMaxWindows = 256;
	if (p.windows_size() > kMaxWindows)
		return "the policy has " + std::to_string(p.windows_size()) + " schedule windows; at most " +
		       std::to_string(kMaxWindows) + " are allowed (merge adjacent windows)";
	int m;
	for (const auto &w : p.windows())
		if (!parse_hhmm(w.start(), &m) || !parse_hhmm(w.end(), &m))
			return "schedule window '" + escape_text(w.start(), 32) + "-" + escape_text(w.end(), 32) + "' is not HH:MM-HH:MM";
	if (p.mode() == "scheduled" && p.windows().empty())
		return "the scheduled policy needs at least one window (e.g. 00:00-06:00)";
	if (p.mode() == "auto" && p.auto_().lend_depth() >= p.auto_().reclaim_depth())
		return "auto policy: lend_depth (" + std::to_string(p.auto_().lend_depth()) +
		       ") must be below reclaim_depth (" + std::to_string(p.auto_().reclaim_depth()) +
		       "), or the policy would flap";
	if (p.auto_().reclaim_p99_us() && p.auto_().lend_p99_us() > p.auto_().reclaim_p99_us())
		return "auto policy: lend_p99_us must not exceed reclaim_p99_us";
	return {};
}

api::PolicyConfig policy_from_config(const Config &c)
{
	api::PolicyConfig p;
	p.set_mode(c.policy);
	auto *a = p.mutable_auto_();
	a->set_reclaim_depth(c.auto_reclaim_depth);
	a->set_lend_depth(c.auto_lend_depth);
	a->set_reclaim_p99_us(c.auto_reclaim_p99_us);
	a->set_lend_p99_us(c.auto_lend_p99_us);
	a->set_hold_ms(c.auto_hold_ms);
	p.set_reclaim_deadline_ms(c.reclaim_deadline_ms);
	return p;
}

Policy::Policy(boost::asio::io_context &io, backend::DeviceBackend &devices, Leases &leases, Capacity &capacity,
	       EventBus &events,
	       api::PolicyConfig config)
	: timer_(io), devices_(devices), leases_(leases), capacity_(capacity), events_(events), config_(std::move(config)),
	  low_since_(devices.device_count(), 0)
{
	arm();
}

void Policy::stop()
{
	stopped_ = true;
	timer_.cancel();
}

std::string Policy::set(const api::PolicyConfig &p)
{
	if (auto err = validate_policy(p); !err.empty())
		return err;
	config_ = p;
	if (config_.reclaim_deadline_ms() == 0)
		config_.set_reclaim_deadline_ms(capacity_.default_deadline_ms());
	capacity_.set_default_deadline_ms(config_.reclaim_deadline_ms());
	std::fill(low_since_.begin(), low_since_.end(), 0);
	events_.publish(EventBus::make("policy.set", 0, -1, "mode=" + config_.mode()));
	return {};
}

void Policy::arm()
{
	if (stopped_)
		return;
	timer_.expires_after(std::chrono::milliseconds(100));
	timer_.async_wait([this](const boost::system::error_code &ec) {
		if (ec || stopped_)
			return;
		tick();
		arm();
	});
}

void Policy::tick()
{
	// Roll the latency windows once a second: p99 covers the last one to two seconds.
	const uint64_t now = detail::monotonic_ns();
	if (now - last_roll_ns_ >= 1'000'000'000ull) {
		last_roll_ns_ = now;
		std::erase_if(windows_, [](const auto &kv) { return kv.second.core.expired(); });
		for (auto &[ptr, w] : windows_)
			if (auto l = w.core.lock()) {
				w.prev = w.base;
				w.base = l->latency.snapshot();
			}
	}
	for (uint32_t d = 0; d < devices_.device_count(); ++d) {
		if (config_.mode() == "scheduled")
			run_scheduled(d);
		else if (config_.mode() == "auto")
			run_auto(d);
	}
}

void Policy::run_scheduled(uint32_t d)
{
	const int now = minutes_now();
	const api::ScheduleWindow *open = nullptr;
	for (const auto &w : config_.windows())
		if (in_window(w, now))
			open = &w;
	const uint32_t lent = capacity_.active_loans(Pool::Inference, d, "schedule");
	std::vector<Loan> loans;
	if (!open) {
		if (lent > 0)
			capacity_.reclaim(Pool::Inference, 0, d, 0, "schedule", &loans);
		return;
	}
	if (open->cores() != 0 && lent >= open->cores())
		return;
	const uint32_t want = open->cores() == 0 ? 0 : open->cores() - lent;
	// Only while something can still be lent (quietly: the window stays open).
	if (leases_.held(d, Pool::Inference) > capacity_.limits(Pool::Inference).min &&
	    leases_.homed(d, Pool::Inference) > capacity_.active_loans(Pool::Inference, d))
		capacity_.lend(Pool::Inference, want, d, "schedule", &loans);
}

uint64_t Policy::inference_p99(uint32_t d)
{
	sched::LatencyHistogram::Counts sum{};
	for (const auto &l : devices_.cores(d).logical_cores()) {
		if (l->pool() != Pool::Inference)
			continue;
		auto [it, fresh] = windows_.try_emplace(l.get());
		if (fresh) {
			it->second.core = l;
			it->second.base = it->second.prev = l->latency.snapshot();
		}
		const auto now = l->latency.snapshot();
		for (int i = 0; i < sched::LatencyHistogram::kBuckets; ++i)
			sum[i] += now[i] - it->second.prev[i];
	}
	return sched::LatencyHistogram::percentile(sum, 0.99);
}

void Policy::run_auto(uint32_t d)
{
	const auto &a = config_.auto_();
	uint64_t depth = 0;
	for (const auto &l : devices_.cores(d).logical_cores())
		if (l->pool() == Pool::Inference)
			depth += l->depth();
	const uint64_t p99 = inference_p99(d);
	const bool high = depth >= a.reclaim_depth() || (a.reclaim_p99_us() && p99 >= a.reclaim_p99_us() * 1000);
	const bool low = depth <= a.lend_depth() && (!a.lend_p99_us() || p99 <= a.lend_p99_us() * 1000);
	std::vector<Loan> loans;
	const uint64_t now = detail::monotonic_ns();
	if (high) {
		low_since_[d] = 0;
		if (capacity_.active_loans(Pool::Inference, d) > 0) {
			NLOG_INFO("policy.auto_reclaim", "device=" + std::to_string(d) + " depth=" + std::to_string(depth) +
								 " p99_ns=" + std::to_string(p99));
			capacity_.reclaim(Pool::Inference, 0, d, 0, "auto", &loans);
		}
		return;
	}
	if (!low) {
		low_since_[d] = 0;
		return;
	}
	if (low_since_[d] == 0)
		low_since_[d] = now;
	if (now - low_since_[d] < uint64_t(a.hold_ms()) * 1000000ull)
		return;
	// Lend only to a pool that has work to put there, and only what the limits allow.
	if (!capacity_.pool_in_use(Pool::Training, d) ||
	    leases_.held(d, Pool::Inference) <= capacity_.limits(Pool::Inference).min ||
	    leases_.homed(d, Pool::Inference) <= capacity_.active_loans(Pool::Inference, d))
		return;
	NLOG_INFO("policy.auto_lend", "device=" + std::to_string(d) + " depth=" + std::to_string(depth) +
					      " p99_ns=" + std::to_string(p99));
	capacity_.lend(Pool::Inference, 0, d, "auto", &loans);
}

} // namespace neuron::daemon
