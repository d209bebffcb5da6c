// Restart with tenants alive, the parts kept since the first version (issue 12;
// daemon/README.md): registered programs and event subscriptions. neurond runs
// under --supervise and is killed with SIGKILL; results are checked against the
// CPU, and each program replay runs exactly once (replays accumulate into their
// output, so a lost replay leaves it lower and one run twice higher).
#include "daemon_backend.h"
#include "daemon_test.h"
#include "restart_admin.h"
#include "restart_test.h"

#include <ctl_client.h>
#include <raw_client.h>
#include <neuron/program.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

using namespace dt;

namespace {

neuron_tensor_desc arg(uint32_t index, std::initializer_list<int64_t> sizes)
{
	neuron_tensor_desc d = desc(0, NEURON_DTYPE_F32, sizes);
	d.mem_space = NEURON_MEM_PROGRAM_ARG;
	d.host_buffer = index;
	return d;
}

neuron_tensor_desc buf(uint32_t index, std::initializer_list<int64_t> sizes)
{
	neuron_tensor_desc d = desc(0, NEURON_DTYPE_F32, sizes);
	d.mem_space = NEURON_MEM_PROGRAM_BUFFER;
	d.host_buffer = index;
	return d;
}

// out += t; t = a @ b; out += t. Args a [M,K], b [K,N], out [M,N] (read and
// written: each replay accumulates); buffer t [M,N], which keeps the product of
// the replay before (zero at registration). After k replays out = (2k - 1) a @ b.
// A replay run again from its start after its first node would add once more: the
// long matmul between the two adds is where a kill lands most.
// With carry false the first add is left out: t is scratch, overwritten by each
// replay before it is read (not saved before a replay: rerun_reads.h), and after
// k replays out = k a @ b.
struct AccumulateProgram {
	int64_t M, K, N;
	uint64_t arg_bytes[3];
	uint64_t buffer_bytes[1];
	uint32_t dep0[1] = {0}, dep1[1] = {1};
	neuron_program_node nodes[3]{};
	neuron_program_desc desc{};

	AccumulateProgram(int64_t m, int64_t k, int64_t n, bool carry = true)
		: M(m), K(k), N(n), arg_bytes{uint64_t(m * k * 4), uint64_t(k * n * 4), uint64_t(m * n * 4)},
		  buffer_bytes{uint64_t(m * n * 4)}
	{
		nodes[0].cmd = make_cmd(NEURON_OP_ADD, {arg(2, {M, N}), arg(2, {M, N}), buf(0, {M, N})});
		nodes[0].cmd.fscalars.f[0] = 1.0; // alpha
		nodes[0].label = "add out";
		nodes[1].cmd = make_matmul(buf(0, {M, N}), arg(0, {M, K}), arg(1, {K, N}));
		nodes[1].deps = dep0;
		nodes[1].dep_count = 1;
		nodes[1].label = "matmul t";
		nodes[2].cmd = make_cmd(NEURON_OP_ADD, {arg(2, {M, N}), arg(2, {M, N}), buf(0, {M, N})});
		nodes[2].cmd.fscalars.f[0] = 1.0;
		nodes[2].deps = dep1;
		nodes[2].dep_count = 1;
		nodes[2].label = "add out again";
		desc.device = 0;
		desc.arg_count = 3;
		desc.arg_bytes = arg_bytes;
		desc.buffer_count = 1;
		desc.buffer_bytes = buffer_bytes;
		desc.node_count = 3;
		desc.nodes = nodes;
		if (!carry) {
			nodes[1].deps = nullptr;
			nodes[1].dep_count = 0;
			nodes[2].deps = dep0;
			desc.node_count = 2;
			desc.nodes = nodes + 1;
		}
	}
};

// Small integers as floats: every product and sum below is exact in f32, so the
// device's result must equal the CPU's exactly, however many replays accumulate.
std::vector<float> small_ints(size_t n, uint32_t seed)
{
	std::vector<float> v = random_f32(n, seed, -2.4f, 2.4f);
	for (float &x : v)
		x = std::round(x);
	return v;
}

// out after `replays` replays: (2 replays - 1) * (a @ b), computed on the CPU
// (replays * (a @ b) for the program without carry).
std::vector<double> accumulated(const std::vector<float> &a, const std::vector<float> &b, int64_t M, int64_t K,
				int64_t N, int replays, bool carry = true)
{
	std::vector<double> ref(size_t(M * N));
	for (int64_t i = 0; i < M; ++i)
		for (int64_t j = 0; j < N; ++j) {
			double s = 0;
			for (int64_t x = 0; x < K; ++x)
				s += double(a[size_t(i * K + x)]) * b[size_t(x * N + j)];
			ref[size_t(i * N + j)] = s * (carry ? 2 * replays - 1 : replays);
		}
	return ref;
}

struct Operands {
	std::vector<float> a, b;
	uint64_t bindings[3] = {};
};

Operands operands(Tenant &t, int64_t M, int64_t K, int64_t N, uint32_t seed)
{
	Operands o;
	o.a = small_ints(size_t(M * K), seed);
	o.b = small_ints(size_t(K * N), seed + 1);
	o.bindings[0] = dev_alloc(t.client, o.a.size() * 4);
	o.bindings[1] = dev_alloc(t.client, o.b.size() * 4);
	o.bindings[2] = dev_alloc(t.client, uint64_t(M * N * 4));
	upload_f32(t.dma, o.bindings[0], o.a);
	upload_f32(t.dma, o.bindings[1], o.b);
	run(t.core, make_fill_f32(desc(o.bindings[2], NEURON_DTYPE_F32, {M * N}), 0.0));
	return o;
}

uint64_t replay(Tenant &t, uint64_t program, const Operands &o)
{
	uint64_t seq = 0;
	const neuron_status s = neuron_submit_program(t.core, program, o.bindings, 3, nullptr, &seq);
	cr_assert_eq(s, NEURON_OK, "EXEC_PROGRAM of program %lu: %s", (unsigned long)program, describe(s).c_str());
	return seq;
}

} // namespace

TestSuite(restart_kept, .init = supervised_up, .fini = daemon_down, .timeout = 240);

// A program registered before two kill -9s is replayed after each: the new
// neurond has it under the same id, with its buffer, and its result matches the
// CPU. Ids continue (a program registered after a restart gets a new one), and
// the kept program can be deregistered.
DAEMON_TEST(restart_kept, programs_survive_kill9)
{
	constexpr int64_t M = 24, K = 16, N = 20;
	Tenant t;
	t.open("restart-programs", 0, 0);
	AccumulateProgram p(M, K, N);
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &p.desc, &id));
	const Operands o = operands(t, M, K, N, 30);
	replay(t, id, o);
	sync(t.core);
	expect_close(download_f32(t.dma, o.bindings[2], size_t(M * N)), accumulated(o.a, o.b, M, K, N, 1), 0, 0,
		     "out after one replay before the kill");
	uint64_t later = 0;
	for (int round = 0; round < 2; ++round) {
		kill_neurond();
		// The ring needs no connection: this replay runs on the new neurond's
		// engines as soon as it adopted the queue (and the program).
		replay(t, id, o);
		sync(t.core);
		cr_assert_eq(fault_of(t.core).code, 0u, "the replay after restart %d faulted: %s", round + 1,
			     fault_of(t.core).reason);
		expect_close(download_f32(t.dma, o.bindings[2], size_t(M * N)), accumulated(o.a, o.b, M, K, N, round + 2),
			     0, 0, "out after a replay on the restarted neurond");
		if (round == 0) {
			// A second program after the first restart: a new id, and it runs too.
			AccumulateProgram q(M, K, N);
			NEURON_OK_OR_FAIL(neuron_program_register(t.client, &q.desc, &later));
			cr_assert_neq(later, id, "a program registered after the restart got the kept program's id");
		}
	}
	// The second program, registered between the kills, is kept as well.
	const Operands o2 = operands(t, M, K, N, 40);
	replay(t, later, o2);
	replay(t, later, o2);
	sync(t.core);
	expect_close(download_f32(t.dma, o2.bindings[2], size_t(M * N)), accumulated(o2.a, o2.b, M, K, N, 2), 0, 0,
		     "two replays of the program registered between the restarts");
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, later));
	t.close();
	cr_assert_eq(count_in_log("supervise.restart"), 2u, "%zu restarts; the log says:\n%s",
		     count_in_log("supervise.restart"), lines_in_log({"supervise.", "level=error", "level=warn"}).c_str());
}

// Replays in flight when neurond dies: 160 replays (48 on kmd) of a program that accumulates
// into its output (in place: a replay run twice, or partly twice, changes it),
// queued from a thread while neurond is killed four times. Each must run exactly
// once: out ends at exactly accumulated(160).
void replays_survive_kills(bool carry)
{
	Tenant t;
	t.open("restart-replays", 0, 0);
	// Smaller on kmd, for the QEMU guest (TCG): 4 kills 8 replays apart need 40.
	const bool kmd = neuron::test::daemon_runs_kmd(t.client);
	const int kReplays = kmd ? 48 : 160;
	const int64_t M = kmd ? 128 : 512, K = kmd ? 128 : 256, N = kmd ? 128 : 512;
	AccumulateProgram p(M, K, N, carry);
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &p.desc, &id));
	const Operands o = operands(t, M, K, N, 50);
	std::atomic<int> error{NEURON_OK};
	std::thread submitter([&] {
		for (int i = 0; i < kReplays; ++i) {
			uint64_t seq = 0;
			const neuron_status s = neuron_submit_program(t.core, id, o.bindings, 3, nullptr, &seq);
			if (s != NEURON_OK) {
				error.store(s);
				return;
			}
		}
	});
	// Each kill once the queue has run a few more replays and has more to run,
	// half a replay's time after the last completion, so that it lands while a
	// replay's nodes run (a kill between replays proves nothing, nor one while the
	// next replay's undo record is still being saved: on kmd under TCG that copy
	// through the device's DMA takes a while).
	const uint64_t base = neuron_queue_completed(t.core); // the operands' fill ran on it
	uint64_t last = base;
	for (int kill = 0; kill < 4; ++kill) {
		const auto start = std::chrono::steady_clock::now();
		const uint64_t from = neuron_queue_completed(t.core);
		for (int waited = 0; waited < 20000 && neuron_queue_completed(t.core) < last + 8; ++waited)
			sleep_ms(1);
		last = neuron_queue_completed(t.core);
		if (last - base + 8 >= uint64_t(kReplays))
			break;
		const auto per_replay = (std::chrono::steady_clock::now() - start) / std::max<uint64_t>(last - from, 1);
		std::this_thread::sleep_for(per_replay / 2);
		kill_neurond();
	}
	submitter.join();
	cr_assert_eq(error.load(), NEURON_OK, "submitting failed: %s", neuron_last_error());
	NEURON_OK_OR_FAIL(neuron_queue_sync(t.core, kWaitNs));
	cr_assert_eq(fault_of(t.core).code, 0u, "a replay faulted: %s", fault_of(t.core).reason);
	expect_close(download_f32(t.dma, o.bindings[2], size_t(M * N)),
		     accumulated(o.a, o.b, M, K, N, kReplays, carry), 0, 0,
		     "out after as many accumulating replays as were submitted (each exactly once)");
	// The kills must have landed inside replays, or this proves nothing.
	const size_t restored = count_in_log("outcome=restored_then_rerun");
	cr_log_info("restarts: %zu; interrupted replays restored then run again: %zu", count_in_log("supervise.restart"),
		    restored);
	cr_assert(restored >= 1, "no kill landed inside a replay (make them longer); the log says:\n%s",
		  lines_in_log({"supervise.", "state.", "warn", "error"}).c_str());
	t.close();
}

DAEMON_TEST(restart_kept, program_replays_in_flight_run_exactly_once) { replays_survive_kills(true); }

// The same with t as scratch (t = a @ b; out += t): only out is saved before each
// replay, t is computed again by the rerun.
DAEMON_TEST(restart_kept, replays_with_a_scratch_buffer_run_exactly_once) { replays_survive_kills(false); }

namespace {

// Program {FILL arg 0 (256 f32) with 1.0}, as a RegisterProgram request.
neuron::api::Request register_fill(uint64_t request_id)
{
	neuron::api::Request req;
	req.set_request_id(request_id);
	neuron::api::Program *p = req.mutable_register_program()->mutable_program();
	p->set_device(0);
	p->add_arg_bytes(1024);
	neuron::api::ProgramNode *n = p->add_nodes();
	n->set_opcode(NEURON_OP_FILL);
	const double one = 1.0;
	uint64_t bits = 0;
	std::memcpy(&bits, &one, sizeof bits);
	n->add_fscalars(bits);
	neuron::api::ProgramOperand *o = n->add_operands();
	o->set_space(NEURON_MEM_PROGRAM_ARG);
	o->set_index(0);
	o->set_dtype(NEURON_DTYPE_F32);
	o->add_sizes(256);
	o->add_strides(1);
	return req;
}

} // namespace

// A RegisterProgram whose reply the tenant never read when neurond died follows
// the rule for every state-changing request: the re-attaching Hello carries the
// journalled reply (its program id), and that program is kept exactly once (it
// can be deregistered once; the next registration gets the next id).
DAEMON_TEST(restart_kept, program_registered_with_a_lost_reply_is_kept_once)
{
	neuron::test::RawClient first;
	cr_assert(first.connect(g_daemon->socket_path()), "connect");
	neuron::api::Request hello;
	hello.set_request_id(1);
	hello.mutable_hello()->set_api_major(1);
	hello.mutable_hello()->set_api_minor(6);
	hello.mutable_hello()->set_client_name("lost-reply");
	neuron::api::Response hr;
	cr_assert(first.send(hello) && first.receive(&hr, 5000) && hr.has_hello(), "Hello");
	const uint64_t tenant = hr.hello().tenant_id();
	const std::string token = hr.hello().resume_token();
	cr_assert(!token.empty(), "a supervised neurond gives a resume token");
	neuron::api::Response lost;
	cr_assert(first.send(register_fill(77)) && first.receive(&lost, 5000), "RegisterProgram");
	cr_assert(lost.has_register_program(), "RegisterProgram: %s", lost.DebugString().c_str());
	const uint64_t id = lost.register_program().program_id();
	// The reply is "lost": the tenant acts as if it never came.
	kill_neurond();
	first.close();
	neuron::test::RawClient again;
	cr_assert(again.connect(g_daemon->socket_path()), "connect after the restart");
	hello.set_request_id(2);
	hello.mutable_hello()->set_resume_tenant_id(tenant);
	hello.mutable_hello()->set_resume_token(token);
	cr_assert(again.send(hello) && again.receive(&hr, 10000) && hr.has_hello() && hr.hello().resumed(),
		  "resume: %s", hr.DebugString().c_str());
	cr_assert_eq(hr.hello().last_request_id(), 77u, "the journalled request is not the RegisterProgram");
	neuron::api::Response replayed;
	cr_assert(replayed.ParseFromString(hr.hello().last_response()) && replayed.has_register_program() &&
			  replayed.register_program().program_id() == id,
		  "the journalled reply does not name program %lu: %s", (unsigned long)id, replayed.DebugString().c_str());
	// Kept once: the next registration gets the next id, and the kept program
	// goes exactly once.
	neuron::api::Request next = register_fill(78);
	neuron::api::Response r;
	cr_assert(again.send(next) && again.receive(&r, 5000) && r.has_register_program(), "%s", r.DebugString().c_str());
	cr_assert_eq(r.register_program().program_id(), id + 1, "program ids do not continue after the restart");
	neuron::api::Request dereg;
	dereg.set_request_id(79);
	dereg.mutable_deregister_program()->set_program_id(id);
	cr_assert(again.send(dereg) && again.receive(&r, 5000), "DeregisterProgram");
	cr_assert(r.has_ok(), "the program registered before the kill is not kept: %s", r.DebugString().c_str());
	dereg.set_request_id(80);
	cr_assert(again.send(dereg) && again.receive(&r, 5000), "DeregisterProgram");
	cr_assert(r.has_error() && r.error().code() == neuron::api::ERROR_NOT_FOUND, "deregistered twice: %s",
		  r.DebugString().c_str());
}

// An event subscriber (the admin tools' client: neuronctl events -f,
// neuron-monitor) keeps its stream across a kill -9 of neurond without doing
// anything: the next frame after the restart is an events.lost marker saying so,
// then the new neurond's events (a tenant that connects after the restart).
DAEMON_TEST(restart_kept, event_subscription_survives_kill9)
{
	neuron::tools::CtlClient sub;
	std::string error;
	cr_assert(sub.connect(g_daemon->socket_path(), "restart-events", &error), "%s", error.c_str());
	neuron::api::Request req;
	req.mutable_subscribe_events()->set_replay(false);
	neuron::api::Response resp;
	cr_assert(sub.call(req, &resp, &error) && resp.has_ok(), "SubscribeEvents: %s", error.c_str());
	// The next event of `type` naming `name` (others are skipped); the marker is
	// recorded if one comes first.
	auto wait_for = [&](const std::string &type, const std::string &name, bool *marker_first) {
		const uint64_t deadline = now_ns() + 20'000'000'000ull;
		while (now_ns() < deadline) {
			neuron::api::Response ev;
			if (!sub.receive(&ev, 500, &error)) {
				cr_assert(error.empty(), "the subscription ended: %s", error.c_str());
				continue;
			}
			if (!ev.has_event())
				continue;
			if (ev.event().type() == "events.lost" && marker_first) {
				cr_assert(ev.event().message().find("restarted") != std::string::npos, "marker: %s",
					  ev.event().message().c_str());
				*marker_first = true;
			}
			if (ev.event().type() == type && ev.event().client_name() == name)
				return;
		}
		cr_assert_fail("no %s event for %s within 20 s", type.c_str(), name.c_str());
	};
	Tenant before;
	before.open("before-restart", 0, 0);
	wait_for("tenant.connect", "before-restart", nullptr);
	kill_neurond();
	Tenant after;
	after.open("after-restart", 0, 0);
	bool marker = false;
	wait_for("tenant.connect", "after-restart", &marker);
	cr_assert(marker, "the new neurond's events came without an events.lost marker before them");
	// And on: a second restart, the same.
	kill_neurond();
	Tenant third;
	third.open("after-second-restart", 0, 0);
	marker = false;
	wait_for("tenant.connect", "after-second-restart", &marker);
	cr_assert(marker, "no events.lost marker after the second restart");
	third.close();
	after.close();
	before.close();
}

// A loan between pools survives kill -9s: after each restart GetCapacity lists it
// active under its id, its core held by the borrower, and the lender can take it
// back as any loan (before the change the core went home with the restart).
DAEMON_TEST(restart_kept, loans_survive_kill9)
{
	using neuron::api::POOL_INFERENCE;
	using neuron::api::POOL_TRAINING;
	Tenant borrower; // a training tenant with a core queue: the loan is not orphaned
	borrower.open("restart-borrower", 0, 0);
	neuron::api::Request lend;
	lend.mutable_lend()->set_from(POOL_INFERENCE);
	lend.mutable_lend()->set_count(1);
	lend.mutable_lend()->set_device(0);
	const neuron::api::Response lent = admin(lend);
	cr_assert(lent.has_loans() && lent.loans().loans_size() == 1, "Lend: %s",
		  lent.has_error() ? lent.error().message().c_str() : "no loan");
	const neuron::api::LoanInfo loan = lent.loans().loans(0);
	auto check = [&](const char *when) {
		const neuron::api::CapacityReply cap = capacity();
		bool active = false;
		for (const auto &l : cap.loans())
			if (l.loan_id() == loan.loan_id() && l.state() == "active" && l.device() == loan.device() &&
			    l.core() == loan.core() && l.lender() == POOL_INFERENCE && l.borrower() == POOL_TRAINING)
				active = true;
		cr_assert(active, "loan %lu is not listed active %s", (unsigned long)loan.loan_id(), when);
		for (const auto &c : cap.cores())
			if (c.device() == loan.device() && c.core() == loan.core())
				cr_assert(c.holder() == POOL_TRAINING && c.lease_state() == "lent",
					  "core %u %s: holder %d, lease %s", c.core(), when, int(c.holder()),
					  c.lease_state().c_str());
	};
	check("before the kill");
	for (int round = 0; round < 2; ++round) {
		kill_neurond();
		run(borrower.core, make_fill_f32(desc(dev_alloc(borrower.client, 4096), NEURON_DTYPE_F32, {1024}), 1.0));
		check("after the restart");
	}
	cr_assert_eq(count_in_log("state.adopt_loan"), 2u, "%s", g_daemon->log_tail().c_str());
	// The lender takes it back, as any loan.
	neuron::api::Request reclaim;
	reclaim.mutable_reclaim()->set_pool(POOL_INFERENCE);
	const neuron::api::Response back = admin(reclaim);
	cr_assert(back.has_loans() && back.loans().loans_size() == 1 && back.loans().loans(0).loan_id() == loan.loan_id() &&
			  back.loans().loans(0).state() == "returned",
		  "Reclaim: %s", back.has_error() ? back.error().message().c_str() : back.DebugString().c_str());
	const neuron::api::CapacityReply after = capacity();
	for (const auto &c : after.cores())
		if (c.device() == loan.device() && c.core() == loan.core())
			cr_assert(c.holder() == POOL_INFERENCE, "the reclaimed core is not home");
	borrower.close();
}
