// bench-soak: neurond under a crowd for a bounded time (README "Soak and fault
// injection"). 64 tenant processes by default, on a private neurond:
//   - training tenants and inference tenants (paced requests) running checked
//     rounds (tests/common/checked_work.h: every result compared with the CPU),
//   - a PyTorch tenant (tests/bench/soak_torch.py: a small MLP trained on the
//     device and on the CPU side by side) when torch_neuron imports,
//   - tools polling ListTenants and GetCapacity,
//   - churn: short tenants that connect, run a few rounds and leave, and victims
//     that are SIGKILLed mid-work at random times,
// while the parent lends and reclaims cores at random through the capacity API.
// Prints wrong results (goal 0), errors seen by the well-behaved tenants (goal 0),
// the daemon's RSS and open descriptors at start and end, and the inference
// tenants' p99 latency under the soak against their p99 alone (measured first, in
// the same run).
//
//   bench-soak [--seconds 60] [--alone-seconds 5] [--tenants 64] [--seed 1]
//              [--neurond PATH] [--python PATH] [--no-torch] [--check]
//
// --check: exit 1 unless wrong results and errors are 0, no tenant is left in the
// daemon and its descriptors are back to the start value (the CI variant).
#include "neurond_process.h"
#include "raw_client.h"
#include "soak_roles.h"

#include <neuron/futex.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

using neuron::detail::monotonic_ns;
namespace api = neuron::api;

struct Options {
	int seconds = 60;
	int alone_seconds = 5;
	int tenants = 64;
	uint32_t seed = 1;
	std::string neurond;
	std::string python = "python3";
	bool torch = true;
	bool check = false;
};

struct Proc {
	pid_t pid = -1;
	std::string role;
	std::string out;
	uint64_t kill_at_ns = 0; // victims: when to SIGKILL it
	bool killed = false;
	bool done = false;
	int status = 0;
};

struct Totals {
	uint64_t rounds = 0, wrong = 0, errors = 0, polls = 0, killed = 0, shorts = 0;
	std::vector<std::string> error_samples;
	std::vector<uint64_t> inference_ns;
	// The daemon's own view (GetCapacity: the inference pool's worst tenant p99 over
	// its recent window), sampled every 250 ms: command latency inside neurond,
	// without the tenant processes' wait for a host CPU.
	std::vector<uint64_t> daemon_p99_alone, daemon_p99_soak;
	std::vector<uint64_t> rss_quarters_kib; // the daemon's RSS at 1/4, 1/2 and 3/4 of the soak
	uint64_t lent = 0, reclaimed = 0, refused = 0, loan_failures = 0;
	std::string torch_status = "not run";

	void error(const std::string &what)
	{
		++errors;
		if (error_samples.size() < 10)
			error_samples.push_back(what);
	}
};

uint64_t rss_kib(pid_t pid);

class Soak {
public:
	Soak(Options o, std::string socket, pid_t daemon, std::string dir)
		: o_(std::move(o)), socket_(std::move(socket)), daemon_(daemon), dir_(std::move(dir)), rng_(o_.seed)
	{
	}

	// Inference tenants alone: the reference p99.
	std::vector<uint64_t> alone(int inference);
	// The PyTorch tenant, started before the clock (importing torch takes long);
	// false if it skipped or did not come up (said in the totals).
	bool start_torch();
	void run(int training, int inference, int tools, int churn);
	Totals &totals() { return t_; }

private:
	Proc spawn(const std::string &role, uint64_t until_ns, int rounds = 0);
	bool spawn_torch(Proc *p);
	void reap(std::vector<Proc> &procs, bool block);
	void collect(Proc &p);
	void random_loan(neuron::test::RawClient &admin);
	void sample_daemon_p99(neuron::test::RawClient &observer, std::vector<uint64_t> *out);

	Options o_;
	std::string socket_;
	pid_t daemon_;
	std::string dir_;
	std::mt19937 rng_;
	uint32_t next_seed_ = 1;
	Totals t_;
	Proc torch_;
};

Proc Soak::spawn(const std::string &role, uint64_t until_ns, int rounds)
{
	Proc p;
	p.role = role;
	const uint32_t seed = o_.seed * 100000 + next_seed_++;
	p.out = dir_ + "/" + role + "-" + std::to_string(seed);
	std::vector<std::string> args = {"/proc/self/exe", "--role", role, "--socket", socket_, "--out", p.out,
					 "--until", std::to_string(until_ns), "--seed", std::to_string(seed),
					 "--device", std::to_string(seed % 2), "--rounds", std::to_string(rounds)};
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	if (posix_spawn(&p.pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
		t_.error("cannot start a " + role + " process: " + std::strerror(errno));
		p.done = true;
	}
	return p;
}

bool Soak::spawn_torch(Proc *p)
{
	p->role = "pytorch";
	p->out = dir_ + "/pytorch";
	// Until SIGTERM; the limit only ends it should this process die first.
	std::vector<std::string> args = {o_.python, BENCH_SOAK_TORCH, "--socket", socket_, "--out", p->out,
					 "--seconds", std::to_string(o_.seconds + o_.alone_seconds + 600)};
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	return posix_spawnp(&p->pid, o_.python.c_str(), nullptr, nullptr, argv.data(), environ) == 0;
}

void Soak::collect(Proc &p)
{
	if (p.killed) {
		++t_.killed;
		return;
	}
	const soak::RoleReport r = soak::read_report(p.out);
	const bool clean = WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0;
	if (p.role == "pytorch") {
		// Skipped (exit 77: torch_neuron does not import here) is said, not counted.
		if (WIFEXITED(p.status) && WEXITSTATUS(p.status) == 77) {
			t_.torch_status = "skipped (torch_neuron does not import; see " + p.out + ".log)";
			return;
		}
		t_.torch_status = r.present ? std::to_string(r.rounds) + " training steps checked (loss and every gradient)"
					    : "no report";
	}
	if (!clean || !r.present) {
		t_.error(p.role + " process " + std::to_string(p.pid) + " ended with status " + std::to_string(p.status) +
			 (r.present ? "" : " and no report"));
		return;
	}
	t_.rounds += r.rounds;
	t_.wrong += r.wrong;
	t_.polls += r.polls;
	if (r.errors)
		t_.error(p.role + ": " + r.error);
	if (p.role == "short")
		++t_.shorts;
	if (p.role == "inference")
		t_.inference_ns.insert(t_.inference_ns.end(), r.latency_ns.begin(), r.latency_ns.end());
}

void Soak::reap(std::vector<Proc> &procs, bool block)
{
	for (auto &p : procs) {
		if (p.done)
			continue;
		const pid_t w = waitpid(p.pid, &p.status, block ? 0 : WNOHANG);
		if (w == p.pid) {
			p.done = true;
			collect(p);
		}
	}
	procs.erase(std::remove_if(procs.begin(), procs.end(), [](const Proc &p) { return p.done; }), procs.end());
}

std::vector<uint64_t> Soak::alone(int inference)
{
	std::vector<Proc> procs;
	if (torch_.pid > 0)
		kill(torch_.pid, SIGSTOP); // alone means alone: the PyTorch tenant waits
	const uint64_t until = monotonic_ns() + uint64_t(o_.alone_seconds) * 1000000000ull;
	for (int i = 0; i < inference; ++i)
		procs.push_back(spawn("inference", until));
	neuron::test::RawClient observer;
	soak::connect_observer(observer, socket_);
	while (!procs.empty()) {
		sample_daemon_p99(observer, &t_.daemon_p99_alone);
		std::this_thread::sleep_for(std::chrono::milliseconds(250));
		reap(procs, false);
	}
	if (torch_.pid > 0)
		kill(torch_.pid, SIGCONT);
	std::vector<uint64_t> ns;
	ns.swap(t_.inference_ns);
	return ns;
}

bool Soak::start_torch()
{
	if (!spawn_torch(&torch_)) {
		t_.torch_status = "cannot start " + o_.python;
		return false;
	}
	const uint64_t give_up = monotonic_ns() + 300'000'000'000ull;
	while (monotonic_ns() < give_up) {
		if (access((torch_.out + ".ready").c_str(), F_OK) == 0)
			return true;
		if (waitpid(torch_.pid, &torch_.status, WNOHANG) == torch_.pid) {
			torch_.done = true;
			collect(torch_); // skipped (77) or failed
			torch_.pid = -1;
			return false;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
	kill(torch_.pid, SIGKILL);
	waitpid(torch_.pid, &torch_.status, 0);
	torch_.pid = -1;
	t_.error("the PyTorch tenant took no step within 300 s");
	return false;
}

void Soak::sample_daemon_p99(neuron::test::RawClient &observer, std::vector<uint64_t> *out)
{
	api::Request req;
	req.mutable_get_capacity();
	api::Response resp;
	if (!observer.call(req, &resp, 30000) || !resp.has_capacity())
		return;
	for (const auto &p : resp.capacity().pools())
		if (p.pool() == api::POOL_INFERENCE && p.latency_p99_ns())
			out->push_back(p.latency_p99_ns());
}

// Lend one core from a random pool, or reclaim a pool's loans, as an admin would.
void Soak::random_loan(neuron::test::RawClient &admin)
{
	api::Request req;
	const auto pool = rng_() % 2 ? api::POOL_INFERENCE : api::POOL_TRAINING;
	const bool lend = rng_() % 2;
	if (lend) {
		req.mutable_lend()->set_from(pool);
		req.mutable_lend()->set_count(1);
	} else {
		req.mutable_reclaim()->set_pool(pool);
	}
	api::Response resp;
	std::string why;
	if (!admin.call(req, &resp, 30000, nullptr, &why)) {
		++t_.loan_failures;
		t_.error("capacity API: " + why);
		return;
	}
	if (resp.has_error()) {
		// Nothing to lend or to reclaim is a refusal, not a failure.
		if (resp.error().code() == api::ERROR_PERMISSION_DENIED) {
			++t_.loan_failures;
			t_.error("capacity API: " + resp.error().message());
		}
		++t_.refused;
		return;
	}
	++(lend ? t_.lent : t_.reclaimed);
}

void Soak::run(int training, int inference, int tools, int churn)
{
	const uint64_t until = monotonic_ns() + uint64_t(o_.seconds) * 1000000000ull;
	std::vector<Proc> steady, churning;
	for (int i = 0; i < training; ++i)
		steady.push_back(spawn("training", until));
	for (int i = 0; i < inference; ++i)
		steady.push_back(spawn("inference", until));
	for (int i = 0; i < tools; ++i)
		steady.push_back(spawn("tool", until));
	if (torch_.pid > 0)
		steady.push_back(torch_);
	neuron::test::RawClient admin;
	if (!admin.connect(socket_) || !admin.hello())
		t_.error("the admin connection failed");
	neuron::test::RawClient observer;
	soak::connect_observer(observer, socket_);
	uint64_t next_loan = monotonic_ns(), next_sample = next_loan;
	const uint64_t quarter = uint64_t(o_.seconds) * 250'000'000ull;
	uint64_t next_quarter = monotonic_ns() + quarter;
	while (monotonic_ns() < until) {
		reap(steady, false);
		reap(churning, false);
		const uint64_t now = monotonic_ns();
		for (auto &p : churning)
			if (p.kill_at_ns && now >= p.kill_at_ns && !p.killed) {
				kill(p.pid, SIGKILL);
				p.killed = true;
			}
		while (churning.size() < size_t(churn)) {
			if (rng_() % 2) {
				churning.push_back(spawn("short", until, 1 + int(rng_() % 5)));
			} else {
				churning.push_back(spawn("victim", until));
				churning.back().kill_at_ns = now + (100 + rng_() % 900) * 1000000ull;
			}
		}
		if (now >= next_quarter) {
			t_.rss_quarters_kib.push_back(rss_kib(daemon_));
			next_quarter += quarter;
		}
		if (now >= next_sample) {
			sample_daemon_p99(observer, &t_.daemon_p99_soak);
			next_sample = now + 250'000'000ull;
		}
		if (now >= next_loan) {
			random_loan(admin);
			next_loan = now + (200 + rng_() % 600) * 1000000ull;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
	}
	for (auto &p : churning)
		if (p.kill_at_ns && !p.killed) {
			kill(p.pid, SIGKILL);
			p.killed = true;
		}
	for (auto &p : steady)
		if (p.role == "pytorch" && !p.done)
			kill(p.pid, SIGTERM); // it writes its report and exits
	reap(churning, true);
	reap(steady, true);
}

// ---- the daemon's footprint ----

uint64_t rss_kib(pid_t pid)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/status");
	for (std::string line; std::getline(in, line);)
		if (line.rfind("VmRSS:", 0) == 0)
			return std::strtoull(line.c_str() + 6, nullptr, 10);
	return 0;
}

int open_fds(pid_t pid)
{
	DIR *d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
	if (!d)
		return -1;
	int n = 0;
	while (struct dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

// The count once it holds still (3 readings 100 ms apart): the start-up check that
// the socket is alive leaves a connection for the daemon to close.
int settled_fds(pid_t pid)
{
	int last = open_fds(pid), same = 0;
	for (int i = 0; i < 50 && same < 2; ++i) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		const int now = open_fds(pid);
		same = now == last ? same + 1 : 0;
		last = now;
	}
	return last;
}

int tenants_listed(const std::string &socket)
{
	neuron::test::RawClient c;
	api::Request req;
	req.mutable_list_tenants();
	api::Response resp;
	if (!soak::connect_observer(c, socket) || !c.call(req, &resp, 10000) || !resp.has_list_tenants())
		return -1;
	return resp.list_tenants().tenants_size();
}

uint64_t p99(std::vector<uint64_t> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

uint64_t median(std::vector<uint64_t> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

bool parse_args(int argc, char **argv, Options *o, soak::RoleArgs *role)
{
	for (int i = 1; i < argc; ++i) {
		const std::string a = argv[i];
		const bool has_value = i + 1 < argc;
		auto value = [&] { return std::string(argv[++i]); };
		if (a == "--check")
			o->check = true;
		else if (a == "--no-torch")
			o->torch = false;
		else if (!has_value) {
			std::fprintf(stderr, "bench-soak: %s needs a value\n", a.c_str());
			return false;
		} else if (a == "--seconds")
			o->seconds = std::max(1, std::atoi(value().c_str()));
		else if (a == "--alone-seconds")
			o->alone_seconds = std::max(1, std::atoi(value().c_str()));
		else if (a == "--tenants")
			o->tenants = std::atoi(value().c_str());
		else if (a == "--seed")
			o->seed = static_cast<uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
		else if (a == "--neurond")
			o->neurond = value();
		else if (a == "--python")
			o->python = value();
		else if (a == "--role")
			role->role = value();
		else if (a == "--socket")
			role->socket = value();
		else if (a == "--out")
			role->out = value();
		else if (a == "--until")
			role->until_ns = std::strtoull(value().c_str(), nullptr, 10);
		else if (a == "--device")
			role->device = static_cast<uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
		else if (a == "--rounds")
			role->rounds = std::atoi(value().c_str());
		else {
			std::fprintf(stderr, "bench-soak: unknown argument %s\n", a.c_str());
			return false;
		}
		if (a == "--seed")
			role->seed = o->seed;
	}
	if (o->tenants < 16) {
		std::fprintf(stderr, "bench-soak: --tenants must be at least 16\n");
		return false;
	}
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	Options o;
	soak::RoleArgs role;
	if (!parse_args(argc, argv, &o, &role))
		return 2;
	if (!role.role.empty())
		return soak::run_role(role);
	std::signal(SIGPIPE, SIG_IGN);
	if (!o.neurond.empty())
		setenv("NEURON_DAEMON", o.neurond.c_str(), 1);
	auto settings = neuron::test::NeurondProcess::default_settings();
	settings.insert(settings.end(), {"--threads-per-core", "1"});
	neuron::test::NeurondProcess daemon({}, settings);
	std::string error;
	if (!daemon.start(&error)) {
		std::fprintf(stderr, "bench-soak: cannot start neurond: %s\n", error.c_str());
		return 1;
	}
	// The mix: a fixed share of each kind, the rest training.
	const int inference = std::max(2, o.tenants / 8), tools = std::max(1, o.tenants / 16);
	const int churn = std::max(2, o.tenants / 6), torch = o.torch ? 1 : 0;
	const int training = o.tenants - inference - tools - churn - torch;
	const uint64_t rss0 = rss_kib(daemon.pid());
	const int fds0 = settled_fds(daemon.pid());
	std::printf("bench-soak: %d tenants for %d s (%d training, %d inference, %d tools, %d PyTorch, %d churning: short "
		    "or SIGKILLed), seed %u; inference alone first for %d s\n",
		    o.tenants, o.seconds, training, inference, tools, torch, churn, o.seed, o.alone_seconds);
	std::fflush(stdout);
	Soak soak(o, daemon.socket_path(), daemon.pid(), daemon.dir());
	if (o.torch)
		soak.start_torch();
	const std::vector<uint64_t> alone = soak.alone(inference);
	soak.run(training, inference, tools, churn);
	Totals &t = soak.totals();
	// Every tenant is gone: the daemon's descriptors should come back (a tenant's
	// exit is handled asynchronously; give it a few seconds).
	int fds1 = open_fds(daemon.pid()), left = tenants_listed(daemon.socket_path());
	for (int i = 0; i < 100 && (fds1 != fds0 || left != 0); ++i) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		fds1 = open_fds(daemon.pid());
		left = tenants_listed(daemon.socket_path());
	}
	const uint64_t rss1 = rss_kib(daemon.pid());
	const uint64_t p99_alone = p99(alone), p99_soak = p99(t.inference_ns);
	std::printf("  rounds checked against the CPU: %llu (+ %llu tool polls); short tenants %llu, SIGKILLed %llu\n",
		    (unsigned long long)t.rounds, (unsigned long long)t.polls, (unsigned long long)t.shorts,
		    (unsigned long long)t.killed);
	std::printf("  PyTorch tenant: %s\n", t.torch_status.c_str());
	std::printf("  loans: %llu lent, %llu reclaimed, %llu refused (nothing to lend/reclaim), %llu failed\n",
		    (unsigned long long)t.lent, (unsigned long long)t.reclaimed, (unsigned long long)t.refused,
		    (unsigned long long)t.loan_failures);
	std::printf("  wrong results: %llu (goal 0)\n", (unsigned long long)t.wrong);
	std::printf("  errors seen by well-behaved tenants: %llu (goal 0)\n", (unsigned long long)t.errors);
	for (const auto &e : t.error_samples)
		std::printf("    %s\n", e.c_str());
	std::string quarters;
	for (uint64_t k : t.rss_quarters_kib)
		quarters += (quarters.empty() ? "" : ", ") + std::to_string(k / 1024) + "." + std::to_string(k % 1024 * 10 / 1024);
	std::printf("  daemon RSS: %.1f MiB at start, %.1f MiB at end (with the tenants, at 1/4, 1/2 and 3/4 of the soak: %s MiB)\n",
		    rss0 / 1024.0, rss1 / 1024.0, quarters.c_str());
	std::printf("  daemon open fds: %d at start, %d at end; tenants left: %d\n", fds0, fds1, left);
	std::printf("  inference p99: %.2f ms alone (%zu requests), %.2f ms in the soak (%zu requests): %.1fx\n",
		    p99_alone / 1e6, alone.size(), p99_soak / 1e6, t.inference_ns.size(),
		    p99_alone ? double(p99_soak) / double(p99_alone) : 0.0);
	std::printf("  inference p99 inside neurond (GetCapacity, worst tenant's recent window, median of %zu / %zu "
		    "samples): %.2f ms alone, %.2f ms in the soak\n",
		    t.daemon_p99_alone.size(), t.daemon_p99_soak.size(), median(t.daemon_p99_alone) / 1e6,
		    median(t.daemon_p99_soak) / 1e6);
	const bool alive = daemon.running();
	if (!alive)
		std::printf("  neurond died during the soak; the end of its log:\n%s\n", daemon.log_tail(6000).c_str());
	if (o.check && (t.wrong || t.errors || fds1 != fds0 || left != 0 || !alive || t.rounds == 0)) {
		std::printf("bench-soak: FAILED the check (wrong results, errors, descriptors or tenants left)\n");
		return 1;
	}
	return 0;
}
