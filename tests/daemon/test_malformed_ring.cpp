// Malformed ring commands (contracts/include/neuron/cmd.h): each faults its queue only,
// with the fault code the spec gives, a readable reason, and a sticky error state.
// Another queue of the same tenant and another tenant keep working. A tenant that
// corrupts its ring header (tail far ahead) gets NEURON_FAULT_RING.
#include "daemon_test.h"
#include "raw_client.h"

#include <neuron/futex.h>
#include <neuron/ring.h>

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace dt;
namespace api = neuron::api;

namespace {

constexpr uint64_t kTag = 0xC0FFEE;
constexpr uint64_t kOwnBytes = 4096;

Tenant g_t1;                   // owns the victim queue and a healthy sibling queue
Tenant g_t2;                   // another tenant on the same core
neuron_queue *g_victim = nullptr;
uint64_t g_own = 0;            // a 4 KiB buffer of tenant 1
uint64_t g_sentinel = 0;       // stays zero unless work after a fault runs

void close_tenants()
{
	if (g_victim)
		neuron_queue_destroy(g_victim);
	g_victim = nullptr;
	g_t1.close();
	g_t2.close();
}

void setup()
{
	daemon_up();
	g_before_stop = close_tenants;
	g_t1.open("ring-tenant-1");
	g_t2.open("ring-tenant-2");
	NEURON_OK_OR_FAIL(neuron_queue_create(g_t1.client, 0, NEURON_QUEUE_CORE, 0, 0, &g_victim));
	g_own = dev_alloc(g_t1.client, kOwnBytes);
	g_sentinel = dev_alloc(g_t1.client, 1024);
}

// A valid matmul on `t`'s core queue, checked against a CPU product.
void expect_tenant_works(Tenant &t, uint32_t seed)
{
	const int n = 8;
	const auto a = random_f32(n * n, seed), b = random_f32(n * n, seed + 1);
	const uint64_t da = dev_alloc(t.client, 3 * n * n * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, da + n * n * 4, b);
	run(t.core, make_matmul(desc(da + 2 * n * n * 4, NEURON_DTYPE_F32, {n, n}), desc(da, NEURON_DTYPE_F32, {n, n}),
				desc(da + n * n * 4, NEURON_DTYPE_F32, {n, n})));
	const auto got = download_f32(t.dma, da + 2 * n * n * 4, n * n);
	std::vector<double> ref(n * n, 0.0);
	for (int i = 0; i < n; ++i)
		for (int j = 0; j < n; ++j)
			for (int k = 0; k < n; ++k)
				ref[i * n + j] += static_cast<double>(a[i * n + k]) * b[k * n + j];
	expect_close(got, ref, 1e-5, 1e-6, "matmul on a healthy queue");
	NEURON_OK_OR_FAIL(neuron_free(t.client, 0, da));
}

// Submits `bad` on the victim queue followed at once by a valid fill of the sentinel,
// then checks the fault and that nothing else was affected.
void expect_fault(neuron_cmd bad, uint32_t code, const char *reason_has = nullptr)
{
	bad.user_tag = kTag;
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_submit(g_victim, &bad, &seq));
	const neuron_cmd after = make_fill_f32(desc(g_sentinel, NEURON_DTYPE_F32, {256}), 9.0);
	uint64_t after_seq = 0;
	const neuron_status after_st = neuron_submit(g_victim, &after, &after_seq);
	cr_assert(after_st == NEURON_OK || after_st == NEURON_ERR_FAULT, "submit after the bad command: %s",
		  describe(after_st).c_str());

	const neuron_status st = neuron_queue_wait(g_victim, seq, kWaitNs);
	cr_assert(st == NEURON_ERR_FAULT, "wait on the bad command returned %s, expected NEURON_ERR_FAULT",
		  describe(st).c_str());
	const neuron_fault f = fault_of(g_victim);
	cr_assert(f.code == code, "fault code %u, expected %u (reason: \"%s\")", f.code, code, f.reason);
	cr_assert(f.reason[0] != '\0', "the fault has no reason");
	cr_assert(f.seq == seq, "the fault names command %llu, the bad one was %llu", (unsigned long long)f.seq,
		  (unsigned long long)seq);
	cr_assert(f.user_tag == kTag, "the fault's user_tag is 0x%llx, the command's 0x%llx",
		  (unsigned long long)f.user_tag, (unsigned long long)kTag);
	if (reason_has)
		cr_assert(std::strstr(f.reason, reason_has), "the reason \"%s\" does not mention \"%s\"", f.reason, reason_has);
	// The library's message for the failed wait carries the daemon's reason.
	const std::string last = neuron_last_error();
	cr_assert(last.find(f.reason) != std::string::npos, "neuron_last_error() \"%s\" lacks the reason \"%s\"",
		  last.c_str(), f.reason);

	// Sticky: the work queued behind it fails, new submits fail, waits keep failing.
	if (after_st == NEURON_OK)
		cr_assert(neuron_queue_wait(g_victim, after_seq, kWaitNs) == NEURON_ERR_FAULT,
			  "a command queued after the fault did not fail");
	neuron_cmd nop;
	neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
	const neuron_status later = neuron_submit(g_victim, &nop, nullptr);
	cr_assert(later == NEURON_ERR_FAULT, "a submit after the fault returned %s", describe(later).c_str());
	cr_assert(neuron_queue_wait(g_victim, seq, kWaitNs) == NEURON_ERR_FAULT, "a second wait did not fail");
	cr_assert(neuron_queue_completed(g_victim) < seq, "the timeline reached the faulting command");

	// The command queued after the fault never ran.
	const auto s = download_f32(g_t1.dma, g_sentinel, 256);
	for (float x : s)
		cr_assert(x == 0.0f, "a command submitted after the faulting one ran (sentinel holds %g)", x);
	// The rest of the world carries on.
	expect_tenant_works(g_t1, 500);
	expect_tenant_works(g_t2, 600);
	cr_assert(g_daemon->running(), "neurond died");
}

neuron_tensor_desc f32(uint64_t addr, std::initializer_list<int64_t> sizes) { return desc(addr, NEURON_DTYPE_F32, sizes); }

} // namespace

TestSuite(malformed_ring, .init = setup, .fini = daemon_down, .timeout = 100);

// ISA 1.7, NEURON_CMD_F_STAMP: a stamp that is not 2 contiguous i64 of the
// tenant's own device memory, disjoint from the command's operands, faults the
// command with a reason that names the stamp.
namespace {

neuron_cmd with_stamp(neuron_cmd cmd, const neuron_tensor_desc &stamp)
{
	cmd.flags |= NEURON_CMD_F_STAMP;
	cmd.operands[cmd.num_operands++] = stamp;
	return cmd;
}

} // namespace

DAEMON_TEST(malformed_ring, stamp_flag_without_an_operand)
{
	neuron_cmd nop;
	neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
	nop.flags = NEURON_CMD_F_STAMP;
	expect_fault(nop, NEURON_FAULT_BAD_OPERAND, "stamp");
}

DAEMON_TEST(malformed_ring, stamp_of_the_wrong_dtype)
{
	const auto relu = make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + 64, {16})});
	expect_fault(with_stamp(relu, f32(g_own + 1024, {4})), NEURON_FAULT_BAD_OPERAND, "stamp");
}

DAEMON_TEST(malformed_ring, stamp_not_contiguous)
{
	const auto relu = make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + 64, {16})});
	expect_fault(with_stamp(relu, desc_strided(g_own + 1024, NEURON_DTYPE_I64, {2}, {2})), NEURON_FAULT_BAD_OPERAND,
		     "stamp");
}

DAEMON_TEST(malformed_ring, stamp_outside_the_tenants_memory)
{
	const auto relu = make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + 64, {16})});
	expect_fault(with_stamp(relu, desc(g_own + kOwnBytes - 8, NEURON_DTYPE_I64, {2})), NEURON_FAULT_OUT_OF_BOUNDS,
		     "stamp");
}

DAEMON_TEST(malformed_ring, stamp_overlapping_an_operand)
{
	const auto relu = make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + 64, {16})});
	expect_fault(with_stamp(relu, desc(g_own + 56, NEURON_DTYPE_I64, {2})), NEURON_FAULT_OVERLAP, "stamp");
}

DAEMON_TEST(malformed_ring, unknown_command_flag)
{
	neuron_cmd relu = make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + 64, {16})});
	relu.flags = 0x2;
	expect_fault(relu, NEURON_FAULT_BAD_OPERAND, "flags");
}

DAEMON_TEST(malformed_ring, unknown_opcode)
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, 99, 0);
	expect_fault(cmd, NEURON_FAULT_BAD_OPCODE, "99");
}

DAEMON_TEST(malformed_ring, opcode_zero_is_invalid)
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_INVALID, 0);
	expect_fault(cmd, NEURON_FAULT_BAD_OPCODE);
}

DAEMON_TEST(malformed_ring, output_out_of_bounds)
{
	// 64 floats starting 128 bytes before the end of the 4 KiB allocation.
	expect_fault(make_fill_f32(f32(g_own + kOwnBytes - 128, {64}), 1.0), NEURON_FAULT_OUT_OF_BOUNDS, "operand 0");
}

DAEMON_TEST(malformed_ring, input_out_of_bounds)
{
	expect_fault(make_cmd(NEURON_OP_RELU, {f32(g_own, {16}), f32(g_own + (1 << 20), {16})}), NEURON_FAULT_OUT_OF_BOUNDS,
		     "operand 1");
}

DAEMON_TEST(malformed_ring, matmul_output_is_an_input)
{
	const auto m = f32(g_own, {8, 8});
	expect_fault(make_matmul(m, m, f32(g_own + 256 * 4, {8, 8})), NEURON_FAULT_OVERLAP);
}

DAEMON_TEST(malformed_ring, elementwise_output_partly_overlaps_input)
{
	// An exact alias is allowed for elementwise ops; a shifted one is not.
	expect_fault(make_cmd(NEURON_OP_RELU, {f32(g_own + 4, {64}), f32(g_own, {64})}), NEURON_FAULT_OVERLAP);
}

DAEMON_TEST(malformed_ring, matmul_on_int32)
{
	expect_fault(make_matmul(desc(g_own, NEURON_DTYPE_I32, {4, 4}), desc(g_own + 64, NEURON_DTYPE_I32, {4, 4}),
				 desc(g_own + 128, NEURON_DTYPE_I32, {4, 4})),
		     NEURON_FAULT_BAD_OPERAND);
}

DAEMON_TEST(malformed_ring, invalid_dtype_value)
{
	expect_fault(make_cmd(NEURON_OP_RELU, {desc(g_own, 42, {16}), f32(g_own + 1024, {16})}), NEURON_FAULT_BAD_OPERAND);
}

DAEMON_TEST(malformed_ring, host_memory_on_a_core_queue)
{
	neuron_host_buffer *hb = nullptr;
	NEURON_OK_OR_FAIL(neuron_host_alloc(g_t1.client, 4096, &hb));
	neuron_tensor_desc host = f32(0, {64});
	host.mem_space = NEURON_MEM_HOST;
	host.host_buffer = neuron_host_handle(hb);
	expect_fault(make_cmd(NEURON_OP_COPY, {f32(g_own, {64}), host}), NEURON_FAULT_BAD_OPERAND, "operand 1");
	NEURON_OK_OR_FAIL(neuron_host_free(hb));
}

DAEMON_TEST(malformed_ring, reserved0_not_zero)
{
	neuron_cmd cmd = make_fill_f32(f32(g_own, {16}), 1.0);
	cmd.reserved0 = 1;
	expect_fault(cmd, NEURON_FAULT_BAD_OPERAND, "reserved");
}

DAEMON_TEST(malformed_ring, descriptor_reserved_not_zero)
{
	neuron_tensor_desc d = f32(g_own, {16});
	d.reserved = 3;
	expect_fault(make_fill_f32(d, 1.0), NEURON_FAULT_BAD_OPERAND, "reserved");
}

DAEMON_TEST(malformed_ring, flags_not_zero)
{
	neuron_cmd cmd = make_fill_f32(f32(g_own, {16}), 1.0);
	cmd.flags = 0x80;
	expect_fault(cmd, NEURON_FAULT_BAD_OPERAND);
}

DAEMON_TEST(malformed_ring, wrong_operand_count)
{
	neuron_cmd cmd = make_cmd(NEURON_OP_ADD, {f32(g_own, {16}), f32(g_own + 64, {16})}); // add takes 3
	cmd.fscalars.f[0] = 1.0;
	expect_fault(cmd, NEURON_FAULT_BAD_OPERAND);
}

DAEMON_TEST(malformed_ring, wait_on_a_queue_of_another_tenant)
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_NOP, 0);
	cmd.wait.queue_id = neuron_queue_id(g_t2.core);
	cmd.wait.value = 1;
	expect_fault(cmd, NEURON_FAULT_BAD_WAIT);
}

DAEMON_TEST(malformed_ring, corrupted_ring_tail)
{
	using neuron::detail::atomic_u32;
	using neuron::detail::atomic_u64;
	neuron::test::RawClient rc;
	cr_assert(rc.connect(g_daemon->socket_path()));
	cr_assert(rc.hello(), "raw Hello failed");

	struct Ring {
		neuron_ring_header *h = nullptr;
		uint64_t bytes = 0, id = 0;
		uint32_t slots = 0;
	};
	auto create = [&](Ring *r) {
		api::Request req;
		auto *cq = req.mutable_create_queue();
		cq->set_device(0);
		cq->set_kind(api::QUEUE_KIND_CORE);
		cq->set_core(0);
		cq->set_slot_count(256);
		api::Response resp;
		int fd = -1;
		std::string why;
		cr_assert(rc.call(req, &resp, 5000, &fd, &why), "CreateQueue: %s", why.c_str());
		cr_assert(resp.has_create_queue(), "CreateQueue answered with body %d", static_cast<int>(resp.body_case()));
		cr_assert(fd >= 0, "CreateQueue's reply carried no ring descriptor");
		r->bytes = resp.create_queue().ring_bytes();
		r->id = resp.create_queue().queue_id();
		r->slots = resp.create_queue().slot_count();
		cr_assert(r->slots == 256 && r->bytes == NEURON_RING_HEADER_SIZE + 256ull * NEURON_CMD_SLOT_SIZE,
			  "ring of %u slots, %llu bytes", r->slots, (unsigned long long)r->bytes);
		void *p = mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		cr_assert(p != MAP_FAILED, "mmap of the ring failed");
		r->h = static_cast<neuron_ring_header *>(p);
		cr_assert(r->h->magic == NEURON_RING_MAGIC && r->h->slot_count == 256 && r->h->queue_id == r->id,
			  "ring header: magic 0x%x, %u slots, queue %llu", r->h->magic, r->h->slot_count,
			  (unsigned long long)r->h->queue_id);
	};
	auto publish = [](Ring &r, uint64_t tail) {
		atomic_u64(r.h->tail).store(tail, std::memory_order_seq_cst);
		if (atomic_u32(r.h->engine_sleeping).load(std::memory_order_seq_cst)) {
			atomic_u32(r.h->doorbell).fetch_add(1, std::memory_order_seq_cst);
			neuron::detail::futex_wake_all(&r.h->doorbell);
		}
	};
	auto put_nop = [](Ring &r, uint64_t seq) {
		neuron_cmd nop;
		neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
		std::memcpy(reinterpret_cast<char *>(r.h) + NEURON_RING_HEADER_SIZE +
				    ((seq - 1) % r.slots) * NEURON_CMD_SLOT_SIZE,
			    &nop, sizeof(nop));
	};
	auto wait_for = [](auto cond) {
		for (int i = 0; i < 1000 && !cond(); ++i)
			sleep_ms(5);
		return cond();
	};

	Ring bad, good;
	create(&bad);
	create(&good);
	// The hand-written protocol works: a NOP on the good ring completes.
	put_nop(good, 1);
	publish(good, 1);
	cr_assert(wait_for([&] { return atomic_u64(good.h->completed).load() >= 1; }), "a NOP on a raw ring never completed");

	publish(bad, 1000); // 1000 commands published on a 256-slot ring
	cr_assert(wait_for([&] { return atomic_u32(bad.h->fault_code).load() != NEURON_FAULT_NONE; }),
		  "a tail 1000 slots ahead on a 256-slot ring did not fault the queue");
	cr_assert(bad.h->fault_code == NEURON_FAULT_RING, "fault code %u, expected NEURON_FAULT_RING (%d): %s",
		  bad.h->fault_code, NEURON_FAULT_RING, bad.h->fault_reason);
	cr_assert(bad.h->fault_reason[0] != '\0', "the ring fault has no reason");
	cr_assert(atomic_u64(bad.h->completed).load() == 0, "commands of the corrupted ring ran");

	// Sticky: a sane tail afterwards does not revive the queue.
	put_nop(bad, 1);
	publish(bad, 1);
	sleep_ms(200);
	cr_assert(atomic_u64(bad.h->completed).load() == 0, "the faulted ring ran a command after a tail fix");

	// The same tenant's other ring, the other tenants and the daemon carry on.
	put_nop(good, 2);
	publish(good, 2);
	cr_assert(wait_for([&] { return atomic_u64(good.h->completed).load() >= 2; }),
		  "the corrupting tenant's healthy ring stopped working");
	expect_tenant_works(g_t1, 700);
	expect_tenant_works(g_t2, 800);
	api::Request ping;
	ping.mutable_ping();
	api::Response resp;
	cr_assert(rc.call(ping, &resp) && resp.has_pong(), "the corrupting tenant's control connection stopped answering");
	munmap(bad.h, bad.bytes);
	munmap(good.h, good.bytes);
	cr_assert(g_daemon->running(), "neurond died");
}
