// Programs through neurond's API (<neuron/program.h>): a registered program
// replayed with one EXEC_PROGRAM submission gives what a CPU computes, bad
// programs are refused at registration with the reason, a fault inside a replay
// names the node, and a program's buffer is the tenant's memory until it goes.
#include "daemon_test.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace dt;

TestSuite(programs, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

constexpr int M = 8, K = 5, N = 6;

neuron_tensor_desc arg(uint32_t index, uint64_t offset, std::initializer_list<int64_t> sizes,
		       int dtype = NEURON_DTYPE_F32)
{
	neuron_tensor_desc d = desc(offset, dtype, sizes);
	d.mem_space = NEURON_MEM_PROGRAM_ARG;
	d.host_buffer = index;
	return d;
}

neuron_tensor_desc buf(uint32_t index, uint64_t offset, std::initializer_list<int64_t> sizes)
{
	neuron_tensor_desc d = desc(offset, NEURON_DTYPE_F32, sizes);
	d.mem_space = NEURON_MEM_PROGRAM_BUFFER;
	d.host_buffer = index;
	return d;
}

// out = relu(a @ b) + a @ b, through an intermediate in the program's buffer:
// args a [M,K], b [K,N], out [M,N]; buffer t [M,N].
struct MlpProgram {
	uint64_t arg_bytes[3] = {M * K * 4, K * N * 4, M * N * 4};
	uint64_t buffer_bytes[1] = {M * N * 4};
	uint32_t dep0[1] = {0}, dep1[1] = {1};
	neuron_program_node nodes[3]{};
	neuron_program_desc desc{};

	MlpProgram()
	{
		nodes[0].cmd = make_matmul(buf(0, 0, {M, N}), arg(0, 0, {M, K}), arg(1, 0, {K, N}));
		nodes[0].label = "matmul mm_1";
		nodes[1].cmd = make_cmd(NEURON_OP_RELU, {arg(2, 0, {M, N}), buf(0, 0, {M, N})});
		nodes[1].deps = dep0;
		nodes[1].dep_count = 1;
		nodes[1].label = "relu relu_1";
		nodes[2].cmd = make_cmd(NEURON_OP_ADD, {arg(2, 0, {M, N}), arg(2, 0, {M, N}), buf(0, 0, {M, N})});
		nodes[2].cmd.fscalars.f[0] = 1.0; // alpha
		nodes[2].deps = dep1;
		nodes[2].dep_count = 1;
		nodes[2].label = "add add_1";
		desc.device = 0;
		desc.arg_count = 3;
		desc.arg_bytes = arg_bytes;
		desc.buffer_count = 1;
		desc.buffer_bytes = buffer_bytes;
		desc.node_count = 3;
		desc.nodes = nodes;
	}
};

std::vector<double> ref_mlp(const std::vector<float> &a, const std::vector<float> &b)
{
	std::vector<double> out(M * N);
	for (int i = 0; i < M; ++i)
		for (int j = 0; j < N; ++j) {
			double s = 0;
			for (int x = 0; x < K; ++x)
				s += static_cast<double>(a[i * K + x]) * b[x * N + j];
			out[i * N + j] = std::max(s, 0.0) + s;
		}
	return out;
}

// Registration fails with NEURON_ERR_INVALID and a reason containing `needle`.
void expect_refused(neuron_client *c, const neuron_program_desc &d, const char *needle)
{
	uint64_t id = 0;
	const neuron_status s = neuron_program_register(c, &d, &id);
	cr_assert(s != NEURON_OK, "a bad program was registered (id %lu); expected a refusal about '%s'",
		  (unsigned long)id, needle);
	const std::string why = neuron_last_error();
	cr_assert(why.find(needle) != std::string::npos, "refusal '%s' does not mention '%s'", why.c_str(), needle);
}

} // namespace

DAEMON_TEST(programs, replay_matches_the_cpu_with_new_bindings_each_call)
{
	Tenant t;
	t.open("programs-replay");
	MlpProgram p;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &p.desc, &id));
	for (uint32_t call = 0; call < 3; ++call) {
		const auto a = random_f32(M * K, 10 + call), b = random_f32(K * N, 20 + call);
		const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
			       dout = dev_alloc(t.client, M * N * 4);
		upload_f32(t.dma, da, a);
		upload_f32(t.dma, db, b);
		const uint64_t bindings[3] = {da, db, dout};
		const uint64_t before = neuron_queue_completed(t.core);
		uint64_t seq = 0;
		NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, &seq));
		sync(t.core);
		cr_expect_eq(seq, before + 1, "one replay is one ring slot (seq %lu after %lu)", (unsigned long)seq,
			     (unsigned long)before);
		expect_close(download_f32(t.dma, dout, M * N), ref_mlp(a, b), 1e-5, 1e-5, "replayed relu(a@b)+a@b");
	}
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	t.close();
}

DAEMON_TEST(programs, out_of_bounds_operands_are_refused)
{
	Tenant t;
	t.open("programs-bounds");
	MlpProgram p;
	p.nodes[0].cmd.operands[1].addr = 4; // a [M,K] at offset 4 of an argument of M*K*4 bytes
	expect_refused(t.client, p.desc, "argument 0");
	MlpProgram q;
	q.buffer_bytes[0] = M * N * 4 - 4; // the intermediate no longer fits its buffer
	expect_refused(t.client, q.desc, "buffer 0");
	MlpProgram r;
	r.nodes[1].cmd.operands[1].host_buffer = 3; // buffer 3 does not exist
	expect_refused(t.client, r.desc, "buffer 3");
	t.close();
}

DAEMON_TEST(programs, cycles_and_bad_dependencies_are_refused)
{
	Tenant t;
	t.open("programs-cycle");
	MlpProgram p;
	uint32_t back[1] = {2};
	p.nodes[0].deps = back; // 0 after 2, 2 after 1, 1 after 0
	p.nodes[0].dep_count = 1;
	expect_refused(t.client, p.desc, "cycle");
	MlpProgram q;
	uint32_t missing[1] = {7};
	q.nodes[2].deps = missing;
	expect_refused(t.client, q.desc, "does not exist");
	MlpProgram r; // the relu reads the buffer the matmul writes, with no edge between them
	r.nodes[1].dep_count = 0;
	r.nodes[1].deps = nullptr;
	r.nodes[2].deps = r.dep0;
	expect_refused(t.client, r.desc, "node");
	t.close();
}

DAEMON_TEST(programs, oversized_programs_are_refused)
{
	Tenant t;
	t.open("programs-size");
	std::vector<neuron_program_node> many(NEURON_PROGRAM_MAX_NODES + 1);
	MlpProgram p;
	for (auto &n : many)
		n.cmd = make_fill_f32(arg(2, 0, {M, N}), 1.0);
	p.desc.nodes = many.data();
	p.desc.node_count = static_cast<uint32_t>(many.size());
	expect_refused(t.client, p.desc, std::to_string(NEURON_PROGRAM_MAX_NODES).c_str());
	MlpProgram q; // a buffer larger than the device
	q.buffer_bytes[0] = uint64_t{1} << 39;
	uint64_t id = 0;
	cr_assert(neuron_program_register(t.client, &q.desc, &id) != NEURON_OK, "a 512 GiB buffer was granted");
	t.close();
}

DAEMON_TEST(programs, a_fault_in_a_replay_names_the_node)
{
	Tenant t;
	t.open("programs-fault");
	// out = index_select(x * 2, 0, idx): x [4,3], idx [2] (i64), out [2,3]; x*2 in the buffer.
	uint64_t arg_bytes[3] = {4 * 3 * 4, 2 * 8, 2 * 3 * 4};
	uint64_t buffer_bytes[1] = {4 * 3 * 4};
	uint32_t dep0[1] = {0};
	neuron_program_node nodes[2]{};
	nodes[0].cmd = make_cmd(NEURON_OP_MUL_SCALAR, {buf(0, 0, {4, 3}), arg(0, 0, {4, 3})});
	nodes[0].cmd.fscalars.f[0] = 2.0;
	nodes[0].label = "mul mul_1";
	nodes[1].cmd = make_cmd(NEURON_OP_INDEX_SELECT,
				{arg(2, 0, {2, 3}), buf(0, 0, {4, 3}), arg(1, 0, {2}, NEURON_DTYPE_I64)});
	nodes[1].deps = dep0;
	nodes[1].dep_count = 1;
	nodes[1].label = "index_select index_select_7";
	neuron_program_desc d{};
	d.arg_count = 3;
	d.arg_bytes = arg_bytes;
	d.buffer_count = 1;
	d.buffer_bytes = buffer_bytes;
	d.node_count = 2;
	d.nodes = nodes;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &d, &id));
	const uint64_t dx = dev_alloc(t.client, arg_bytes[0]), didx = dev_alloc(t.client, arg_bytes[1]),
		       dout = dev_alloc(t.client, arg_bytes[2]);
	upload_f32(t.dma, dx, random_f32(12, 5));
	const int64_t good[2] = {3, 1}, bad[2] = {1, 9};
	h2d(t.dma, didx, good, sizeof(good));
	const uint64_t bindings[3] = {dx, didx, dout};
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, nullptr));
	sync(t.core);
	h2d(t.dma, didx, bad, sizeof(bad));
	neuron_exec_options opts{};
	opts.wait = {neuron_queue_id(t.dma), neuron_queue_completed(t.dma)};
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, &opts, &seq));
	const neuron_status s = neuron_queue_sync(t.core, kWaitNs);
	cr_assert_eq(s, NEURON_ERR_FAULT, "a replay with index 9 of 4 rows did not fault: %s", describe(s).c_str());
	const neuron_fault f = fault_of(t.core);
	const std::string reason = f.reason;
	cr_expect(reason.find("node 1") != std::string::npos && reason.find("index_select_7") != std::string::npos,
		  "the fault does not name node 1 'index_select index_select_7': %s", f.reason);
	cr_expect_eq(f.seq, seq, "the fault is at the replay's seq");
	t.close();
}

DAEMON_TEST(programs, buffers_are_the_tenants_memory_until_released)
{
	Tenant t;
	t.open("programs-memory");
	const uint64_t base = hbm_used(t.client);
	MlpProgram p;
	p.buffer_bytes[0] = 64 << 20;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &p.desc, &id));
	cr_expect_geq(hbm_used(t.client), base + (64 << 20), "the program's 64 MiB buffer is not in HBM use");
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	const uint64_t after = wait_hbm_used(t.client, 0, base, 5000);
	cr_expect_eq(after, base, "HBM use %lu after the release, %lu before the program", (unsigned long)after,
		     (unsigned long)base);
	const uint64_t bindings[3] = {0, 0, 0};
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, nullptr));
	cr_expect_eq(neuron_queue_sync(t.core, kWaitNs), NEURON_ERR_FAULT, "a released program replayed");
	cr_expect(std::string(fault_of(t.core).reason).find("not registered") != std::string::npos,
		  "fault: %s", fault_of(t.core).reason);
	t.close();
}

// The fused opcodes programs use (ISA 1.5), as ring commands against the CPU.
DAEMON_TEST(programs, pointwise_chain_matches_the_unfused_ops)
{
	Tenant t;
	t.open("programs-pointwise");
	const int n = 4099;
	const auto a = random_f32(n, 31), b = random_f32(n, 32), c = random_f32(n, 33);
	const uint64_t da = dev_alloc(t.client, n * 4), db = dev_alloc(t.client, n * 4), dc = dev_alloc(t.client, n * 4),
		       dout = dev_alloc(t.client, n * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	upload_f32(t.dma, dc, c);
	// out = tanh(a * b + c) - 0.5: steps MUL(0,1), ADD(5,2), TANH(6), SUB(7, const 21).
	neuron_cmd cmd = make_cmd(NEURON_OP_POINTWISE, {desc(dout, NEURON_DTYPE_F32, {n}), desc(da, NEURON_DTYPE_F32, {n}),
							desc(db, NEURON_DTYPE_F32, {n}), desc(dc, NEURON_DTYPE_F32, {n})});
	auto step = [](int fn, int x, int y) { return static_cast<uint64_t>(fn | (x << 6) | (y << 11)); };
	cmd.iscalars[0] = static_cast<int64_t>(step(NEURON_PW_MUL, 0, 1) | step(NEURON_PW_ADD, 5, 2) << 16 |
					       step(NEURON_PW_TANH, 6, 0) << 32 | step(NEURON_PW_SUB, 7, 21) << 48);
	cmd.fscalars.f[0] = 0.5;
	run(t.core, cmd);
	std::vector<double> ref(n);
	for (int i = 0; i < n; ++i)
		ref[i] = std::tanh(static_cast<double>(a[i]) * b[i] + c[i]) - 0.5;
	expect_close(download_f32(t.dma, dout, n), ref, 1e-5, 1e-6, "pointwise tanh(a*b+c)-0.5");
	t.close();
}

DAEMON_TEST(programs, matmul_epilogue_is_a_linear_layer)
{
	Tenant t;
	t.open("programs-epilogue");
	const int m = 33, k = 300, nn = 47;
	const auto a = random_f32(m * k, 41), b = random_f32(k * nn, 42), bias = random_f32(nn, 43);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dbias = dev_alloc(t.client, bias.size() * 4), dout = dev_alloc(t.client, m * nn * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	upload_f32(t.dma, dbias, bias);
	for (int act : {NEURON_ACT_NONE, NEURON_ACT_RELU}) {
		neuron_cmd cmd = make_cmd(NEURON_OP_MATMUL_EPILOGUE,
					  {desc(dout, NEURON_DTYPE_F32, {m, nn}), desc(da, NEURON_DTYPE_F32, {m, k}),
					   desc(db, NEURON_DTYPE_F32, {k, nn}), desc_strided(dbias, NEURON_DTYPE_F32, {m, nn}, {0, 1})});
		cmd.fscalars.f[0] = 1.0;
		cmd.fscalars.f[1] = 1.0;
		cmd.iscalars[0] = act;
		run(t.core, cmd);
		std::vector<double> ref(m * nn);
		for (int i = 0; i < m; ++i)
			for (int j = 0; j < nn; ++j) {
				double s = bias[j];
				for (int x = 0; x < k; ++x)
					s += static_cast<double>(a[i * k + x]) * b[x * nn + j];
				ref[i * nn + j] = act == NEURON_ACT_RELU ? std::max(s, 0.0) : s;
			}
		expect_close(download_f32(t.dma, dout, m * nn), ref, 1e-4, 1e-4,
			     act ? "relu(a@b+bias)" : "a@b+bias");
	}
	t.close();
}

// A program's buffer counts against the tenant's hbm_bytes limit, and goes when
// the tenant goes.
static void up_with_small_hbm_limit() { daemon_up_with({"--limit", "training.hbm_bytes=64M"}); }

TestSuite(program_limits, .init = up_with_small_hbm_limit, .fini = daemon_down, .timeout = 100);

Test(program_limits, buffers_count_against_the_limit_and_go_with_the_tenant)
{
	neuron_client *observer = connect("observer");
	const uint64_t base = hbm_used(observer);
	Tenant t;
	t.open("programs-limit");
	MlpProgram big;
	big.buffer_bytes[0] = 80ull << 20; // more than the 64 MiB limit
	expect_refused(t.client, big.desc, "hbm_bytes");
	MlpProgram p;
	p.buffer_bytes[0] = 48ull << 20;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &p.desc, &id));
	// 48 MiB held: 32 MiB more is past the limit, as a plain allocation.
	uint64_t addr = 0;
	cr_expect_neq(neuron_alloc(t.client, 0, 32ull << 20, 0, &addr), NEURON_OK,
		      "an allocation past the limit (the program's buffer counted) was granted");
	cr_expect_geq(hbm_used(observer), base + (48ull << 20), "the program's buffer is not in HBM use");
	t.close(); // the tenant goes with its program
	const uint64_t after = wait_hbm_used(observer, 0, base, 5000);
	cr_expect_eq(after, base, "HBM use %lu after the tenant left, %lu before", (unsigned long)after,
		     (unsigned long)base);
	neuron_disconnect(observer);
	daemon_finish();
}
