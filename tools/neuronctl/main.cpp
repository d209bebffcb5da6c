// neuronctl: the operator's command line for neurond's capacity sharing.
//
//   neuronctl [--socket PATH] [--json] pools
//   neuronctl pools set POOL [--min N] [--max N]
//   neuronctl lend   [--from inference|training] [--count N] [--device D]
//   neuronctl reclaim [--pool inference|training] [--count N] [--device D] [--deadline-ms MS]
//   neuronctl policy [show]
//   neuronctl policy set --mode manual|scheduled|auto [--schedule 00:00-06:00[/N],...]
//             [--reclaim-depth N] [--lend-depth N] [--reclaim-p99-us US] [--lend-p99-us US]
//             [--hold-ms MS] [--deadline-ms MS]
//   neuronctl tenants
//   neuronctl loans
//   neuronctl events [-f|--follow]
//
// Every command takes --json (schema "neuron-capacity/1"). Exit status: 0 done,
// 1 neurond refused or failed (its message is printed), 2 usage, 3 no daemon,
// 4 permission denied.
#include "render.h"

#include <capacity_json.h>
#include <ctl_client.h>

#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>

using namespace neuron;
using namespace neuron::tools;
using nlohmann::json;

namespace {

int exit_for(const api::Error &e) { return e.code() == api::ERROR_PERMISSION_DENIED ? 4 : 1; }

int refused(const api::Response &r, bool as_json)
{
	if (as_json)
		std::cout << json{{"schema", kSchema}, {"error", {{"code", api::ErrorCode_Name(r.error().code())}, {"message", r.error().message()}}}}.dump(2) << "\n";
	std::cerr << "neuronctl: " << describe_error(r.error()) << "\n";
	return exit_for(r.error());
}

bool parse_pool(const std::string &s, api::PoolKind *out)
{
	if (s == "inference")
		*out = api::POOL_INFERENCE;
	else if (s == "training")
		*out = api::POOL_TRAINING;
	else
		return false;
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	CLI::App app{"neuronctl: pools, loans, policy and events of neurond's capacity sharing"};
	app.require_subcommand(1);
	std::string socket;
	bool as_json = false;
	app.add_option("--socket", socket, "neurond socket (default: $NEURON_SOCKET or the system socket)");
	app.add_flag("--json", as_json, "machine-readable output (schema neuron-capacity/1)");

	auto *pools = app.add_subcommand("pools", "show pools, cores and their leases");
	auto *pools_set = pools->add_subcommand("set", "set a pool's guaranteed minimum and maximum (admin)");
	std::string set_pool_name;
	uint32_t set_min = 0, set_max = 0;
	pools_set->add_option("pool", set_pool_name, "inference or training")->required();
	pools_set->add_option("--min", set_min, "cores per device never lent below");
	pools_set->add_option("--max", set_max, "cores per device never held above (0: no limit)");

	auto *lend = app.add_subcommand("lend", "lend idle cores of a pool to the other pool (admin)");
	std::string from = "inference";
	uint32_t count = 0;
	std::optional<uint32_t> device;
	lend->add_option("--from", from, "the lending pool (default inference)");
	lend->add_option("--count", count, "cores per device (default: all the limits allow)");
	lend->add_option("--device", device, "only this device");

	auto *reclaim = app.add_subcommand("reclaim", "take lent cores back, within a deadline (admin)");
	std::string lender = "inference";
	uint32_t deadline_ms = 0;
	reclaim->add_option("--pool", lender, "the lender (default inference)");
	reclaim->add_option("--count", count, "how many loans (default: all)");
	reclaim->add_option("--device", device, "only this device");
	reclaim->add_option("--deadline-ms", deadline_ms, "deadline (default: the policy's)");

	auto *policy = app.add_subcommand("policy", "show or set the capacity policy");
	policy->add_subcommand("show", "show the policy (default)");
	auto *policy_set = policy->add_subcommand("set", "set the policy (admin)");
	std::string mode, schedule;
	std::optional<uint64_t> reclaim_depth, lend_depth, reclaim_p99, lend_p99;
	std::optional<uint32_t> hold_ms, pdeadline;
	policy_set->add_option("--mode", mode, "manual, scheduled or auto")->required();
	policy_set->add_option("--schedule", schedule, "windows HH:MM-HH:MM[/cores],... (scheduled mode)");
	policy_set->add_option("--reclaim-depth", reclaim_depth, "auto: reclaim at this inference queue depth");
	policy_set->add_option("--lend-depth", lend_depth, "auto: lend at or below this depth");
	policy_set->add_option("--reclaim-p99-us", reclaim_p99, "auto: reclaim past this inference p99 (0: off)");
	policy_set->add_option("--lend-p99-us", lend_p99, "auto: lend only at or below this p99 (0: off)");
	policy_set->add_option("--hold-ms", hold_ms, "auto: how long load stays low before lending");
	policy_set->add_option("--deadline-ms", pdeadline, "default reclaim deadline");

	auto *tenants = app.add_subcommand("tenants", "list tenants with pool, cores, memory, ops and latency");
	auto *loans = app.add_subcommand("loans", "the loan ledger with reclaim latencies");
	auto *events = app.add_subcommand("events", "print lease changes, faults, resets (recent ones first)");
	bool follow = false;
	events->add_flag("-f,--follow", follow, "keep printing new events until interrupted");

	try {
		app.parse(argc, argv);
	} catch (const CLI::ParseError &e) {
		const int code = app.exit(e);
		return code == 0 ? 0 : 2;
	}

	CtlClient client;
	std::string error;
	if (!client.connect(socket, "neuronctl", &error)) {
		std::cerr << "neuronctl: " << error << "\n";
		return 3;
	}
	api::Request req;
	api::Response resp;
	auto call = [&]() -> bool {
		if (!client.call(req, &resp, &error)) {
			std::cerr << "neuronctl: " << error << "\n";
			return false;
		}
		return true;
	};

	if (pools->parsed() && pools_set->parsed()) {
		api::PoolKind p;
		if (!parse_pool(set_pool_name, &p)) {
			std::cerr << "neuronctl: pool must be inference or training\n";
			return 2;
		}
		auto *s = req.mutable_set_pool();
		s->set_pool(p);
		s->set_min_cores(set_min);
		s->set_max_cores(set_max);
		if (!call())
			return 3;
		if (resp.has_error())
			return refused(resp, as_json);
		if (as_json)
			std::cout << json{{"schema", kSchema}, {"ok", true}}.dump(2) << "\n";
		else
			std::cout << set_pool_name << ": min " << set_min << ", max " << set_max << " cores per device\n";
		return 0;
	}
	if (pools->parsed() || loans->parsed() || (policy->parsed() && !policy_set->parsed())) {
		req.mutable_get_capacity();
		if (!call())
			return 3;
		if (resp.has_error())
			return refused(resp, as_json);
		const auto &cap = resp.capacity();
		if (as_json) {
			json j = to_json(cap);
			if (loans->parsed())
				j = json{{"schema", kSchema}, {"loans", j["loans"]}};
			else if (policy->parsed())
				j = json{{"schema", kSchema}, {"policy", j["policy"]}};
			std::cout << j.dump(2) << "\n";
		} else if (loans->parsed()) {
			print_loans(std::cout, cap);
		} else if (policy->parsed()) {
			print_policy(std::cout, cap.policy());
		} else {
			print_pools(std::cout, cap);
		}
		return 0;
	}
	if (lend->parsed() || reclaim->parsed()) {
		api::PoolKind p;
		if (!parse_pool(lend->parsed() ? from : lender, &p)) {
			std::cerr << "neuronctl: pool must be inference or training\n";
			return 2;
		}
		if (lend->parsed()) {
			auto *l = req.mutable_lend();
			l->set_from(p);
			l->set_count(count);
			if (device)
				l->set_device(*device);
		} else {
			auto *r = req.mutable_reclaim();
			r->set_pool(p);
			r->set_count(count);
			r->set_deadline_ms(deadline_ms);
			if (device)
				r->set_device(*device);
		}
		if (!call())
			return 3;
		if (resp.has_error())
			return refused(resp, as_json);
		if (as_json) {
			json arr = json::array();
			for (const auto &l : resp.loans().loans())
				arr.push_back(to_json(l));
			std::cout << json{{"schema", kSchema}, {"loans", arr}}.dump(2) << "\n";
		} else {
			for (const auto &l : resp.loans().loans())
				print_loan_line(std::cout, l, lend->parsed());
		}
		return 0;
	}
	if (policy_set->parsed()) {
		// Start from the daemon's current policy so unset flags keep their values.
		req.mutable_get_capacity();
		if (!call())
			return 3;
		api::PolicyConfig pc = resp.capacity().policy();
		pc.set_mode(mode);
		if (!schedule.empty()) {
			pc.clear_windows();
			size_t pos = 0;
			while (pos <= schedule.size()) {
				size_t comma = schedule.find(',', pos);
				if (comma == std::string::npos)
					comma = schedule.size();
				std::string item = schedule.substr(pos, comma - pos);
				pos = comma + 1;
				const size_t dash = item.find('-');
				if (dash == std::string::npos) {
					std::cerr << "neuronctl: schedule window '" << item << "' is not HH:MM-HH:MM[/cores]\n";
					return 2;
				}
				auto *w = pc.add_windows();
				std::string end = item.substr(dash + 1);
				if (size_t slash = end.find('/'); slash != std::string::npos) {
					w->set_cores(static_cast<uint32_t>(std::strtoul(end.c_str() + slash + 1, nullptr, 10)));
					end = end.substr(0, slash);
				}
				w->set_start(item.substr(0, dash));
				w->set_end(end);
			}
		}
		auto *a = pc.mutable_auto_();
		if (reclaim_depth)
			a->set_reclaim_depth(*reclaim_depth);
		if (lend_depth)
			a->set_lend_depth(*lend_depth);
		if (reclaim_p99)
			a->set_reclaim_p99_us(*reclaim_p99);
		if (lend_p99)
			a->set_lend_p99_us(*lend_p99);
		if (hold_ms)
			a->set_hold_ms(*hold_ms);
		if (pdeadline)
			pc.set_reclaim_deadline_ms(*pdeadline);
		req.Clear();
		*req.mutable_set_policy()->mutable_policy() = pc;
		if (!call())
			return 3;
		if (resp.has_error())
			return refused(resp, as_json);
		if (as_json)
			std::cout << json{{"schema", kSchema}, {"policy", to_json(pc)}}.dump(2) << "\n";
		else
			print_policy(std::cout, pc);
		return 0;
	}
	if (tenants->parsed()) {
		// Paged by the daemon (one frame holds a bounded number of tenants).
		api::ListTenantsReply list;
		if (!client.list_tenants(&list, &error)) {
			std::cerr << "neuronctl: " << error << "\n";
			return 3;
		}
		if (as_json) {
			json arr = json::array();
			for (const auto &t : list.tenants())
				arr.push_back(to_json(t));
			std::cout << json{{"schema", kSchema}, {"tenants", arr}}.dump(2) << "\n";
		} else {
			print_tenants(std::cout, list);
		}
		return 0;
	}
	if (events->parsed()) {
		req.mutable_subscribe_events()->set_replay(true);
		if (!call())
			return 3;
		if (resp.has_error())
			return refused(resp, as_json);
		for (;;) {
			api::Response ev;
			// Without --follow: print what the daemon replays, stop when it goes quiet.
			if (!client.receive(&ev, follow ? -1 : 300, &error)) {
				if (!error.empty()) {
					std::cerr << "neuronctl: " << error << "\n";
					return 3;
				}
				return 0;
			}
			if (!ev.has_event())
				continue;
			if (as_json)
				std::cout << to_json(ev.event()).dump() << std::endl; // one JSON object per line
			else
				print_event(std::cout, ev.event());
		}
	}
	return 2;
}
