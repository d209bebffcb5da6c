#include "checked_work.h"

#include <chrono>
#include <cmath>
#include <cstring>

namespace neuron::test {

namespace {

uint64_t now_ns()
{
	return static_cast<uint64_t>(
		std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// xorshift32: values in [-1, 1) with few bits, so products sum with little rounding.
float next_value(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return static_cast<float>(static_cast<int>(*s % 256) - 128) / 128.0f;
}

neuron_tensor_desc desc2(uint64_t addr, int64_t rows, int64_t cols)
{
	const int64_t sizes[2] = {rows, cols};
	return neuron_desc_contiguous(addr, NEURON_DTYPE_F32, 2, sizes);
}

} // namespace

bool CheckedTenant::failed(neuron_status s, neuron_queue *q, const char *what, CheckedWorkResult *r)
{
	if (s == NEURON_OK)
		return false;
	if (s == NEURON_ERR_FAULT && q) {
		r->faulted = true;
		std::memset(&r->fault, 0, sizeof(r->fault));
		neuron_queue_fault(q, &r->fault);
		r->fault_queue = q == dma_ ? "dma" : "core";
	} else if (r->error.empty()) {
		r->error = std::string(what) + ": " + neuron_status_name(s) + ": " + neuron_last_error();
	}
	return true;
}

bool CheckedTenant::open(const std::string &socket, const std::string &name, const CheckedWorkSpec &spec,
			 CheckedWorkResult *r)
{
	spec_ = spec;
	rng_ = spec.seed ? spec.seed : 1;
	struct neuron_connect_options o = {};
	o.socket_path = socket.c_str();
	o.client_name = name.c_str();
	o.kind = spec.kind;
	if (failed(neuron_connect(&o, &client_), nullptr, "neuron_connect", r))
		return false;
	if (failed(neuron_queue_create(client_, spec.device, NEURON_QUEUE_DMA, 0, 0, &dma_), nullptr, "create DMA queue", r) ||
	    failed(neuron_queue_create(client_, spec.device, NEURON_QUEUE_CORE, spec.core, 0, &core_), nullptr,
		   "create core queue", r))
		return false;
	const auto fbytes = [](int x, int y) { return static_cast<uint64_t>(x) * static_cast<uint64_t>(y) * sizeof(float); };
	if (failed(neuron_alloc(client_, spec.device, fbytes(spec.m, spec.k), 0, &a_), nullptr, "alloc A", r) ||
	    failed(neuron_alloc(client_, spec.device, fbytes(spec.k, spec.n), 0, &b_), nullptr, "alloc B", r) ||
	    failed(neuron_alloc(client_, spec.device, fbytes(spec.m, spec.n), 0, &out_), nullptr, "alloc out", r))
		return false;
	ha_.resize(static_cast<size_t>(spec.m) * spec.k);
	hb_.resize(static_cast<size_t>(spec.k) * spec.n);
	hout_.resize(static_cast<size_t>(spec.m) * spec.n);
	return true;
}

bool CheckedTenant::round(CheckedWorkResult *r, int64_t timeout_ns)
{
	const uint64_t start = now_ns();
	for (auto &v : ha_)
		v = next_value(&rng_);
	for (auto &v : hb_)
		v = next_value(&rng_);
	std::fill(hout_.begin(), hout_.end(), std::nanf(""));
	if (failed(neuron_memcpy_h2d(dma_, a_, ha_.data(), ha_.size() * sizeof(float)), dma_, "upload A", r) ||
	    failed(neuron_memcpy_h2d(dma_, b_, hb_.data(), hb_.size() * sizeof(float)), dma_, "upload B", r))
		return false;
	neuron_cmd mm;
	neuron_cmd_init(&mm, NEURON_OP_MATMUL, 3);
	mm.operands[0] = desc2(out_, spec_.m, spec_.n);
	mm.operands[1] = desc2(a_, spec_.m, spec_.k);
	mm.operands[2] = desc2(b_, spec_.k, spec_.n);
	mm.fscalars.f[0] = 1.0;
	mm.fscalars.f[1] = 0.0;
	neuron_cmd relu;
	neuron_cmd_init(&relu, NEURON_OP_RELU, 2);
	relu.operands[0] = desc2(out_, spec_.m, spec_.n);
	relu.operands[1] = desc2(out_, spec_.m, spec_.n);
	uint64_t seq = 0;
	if (failed(neuron_submit(core_, &mm, &seq), core_, "submit matmul", r) ||
	    failed(neuron_submit(core_, &relu, &seq), core_, "submit relu", r) ||
	    failed(neuron_queue_wait(core_, seq, timeout_ns), core_, "wait for the core queue", r))
		return false;
	if (failed(neuron_memcpy_d2h(dma_, hout_.data(), out_, hout_.size() * sizeof(float)), dma_, "download out", r))
		return false;
	r->round_ns.push_back(now_ns() - start);
	compare(r);
	++r->rounds;
	return true;
}

// The CPU's relu(A @ B) in double. The inputs are multiples of 1/128 below 1, so
// every product and partial sum is exact in f32 for k up to 2^10: any difference
// is a wrong result, not rounding.
void CheckedTenant::compare(CheckedWorkResult *r)
{
	const int m = spec_.m, k = spec_.k, n = spec_.n;
	for (int i = 0; i < m; ++i)
		for (int j = 0; j < n; ++j) {
			double acc = 0;
			for (int p = 0; p < k; ++p)
				acc += double(ha_[size_t(i) * k + p]) * double(hb_[size_t(p) * n + j]);
			const double want = acc > 0 ? acc : 0;
			const float got = hout_[size_t(i) * n + j];
			++r->elements;
			if (!(double(got) == want)) {
				if (r->wrong++ == 0)
					r->first_wrong = "out[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
							 std::to_string(got) + ", the CPU says " + std::to_string(want);
			}
		}
}

void CheckedTenant::close()
{
	if (core_)
		neuron_queue_destroy(core_);
	if (dma_)
		neuron_queue_destroy(dma_);
	if (client_)
		neuron_disconnect(client_); // frees the device memory with it
	core_ = dma_ = nullptr;
	client_ = nullptr;
}

CheckedWorkResult run_checked_tenant(const std::string &socket, const std::string &name, const CheckedWorkSpec &spec,
				     int rounds, int64_t timeout_ns)
{
	CheckedWorkResult r;
	CheckedTenant t;
	if (!t.open(socket, name, spec, &r))
		return r;
	for (int i = 0; i < rounds; ++i)
		if (!t.round(&r, timeout_ns))
			break;
	return r;
}

} // namespace neuron::test
