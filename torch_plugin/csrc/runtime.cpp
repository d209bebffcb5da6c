// Connection, devices, streams and their ordering rules (see runtime.h).
#include "runtime.h"

#include "adaptive_eager.h"
#include "graph_capture.h"

#include "device_trace.h"
#include "queue_explain.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <vector>

namespace torch_neuron {

namespace {

constexpr int kMaxDevices = 16;

struct Devices {
	std::mutex mu;
	neuron_client *client = nullptr;
	int count = -1;
	std::array<uint32_t, kMaxDevices> cores{};
	// [device][stream id] -> queues; id 0 is the default stream, then the pool's,
	// then kCollectiveStream.
	std::array<std::array<std::unique_ptr<StreamQueues>, kCollectiveStream + 1>, kMaxDevices> streams;
	std::array<std::atomic<uint32_t>, kMaxDevices> next_pool{};
};

Devices &devs()
{
	static Devices *d = new Devices; // leaked: destructors of tensors may run at exit
	return *d;
}

thread_local int tl_device = 0;
thread_local std::array<int64_t, kMaxDevices> tl_stream{};

std::string start_hint()
{
	return std::string("neurond is not reachable at ") + neuron_default_socket_path() +
	       ". Start it, e.g. `neurond --socket /tmp/neuron/neurond.sock --cores 2 --hbm-mib 8192 &` "
	       "(from a build tree: build/daemon/neurond), and set NEURON_SOCKET=/tmp/neuron/neurond.sock "
	       "before using device 'neuron'.";
}

neuron_client *connect_locked(Devices &d)
{
	if (d.client)
		return d.client;
	neuron_connect_options opts{};
	opts.client_name = "torch_neuron";
	opts.kind = NEURON_TENANT_TRAINING;
	neuron_client *c = nullptr;
	neuron_status s = neuron_connect(&opts, &c);
	if (s != NEURON_OK) {
		const std::string msg = neuron_last_error();
		TORCH_CHECK(false, start_hint(), " (", neuron_status_name(s), ": ", msg, ")");
	}
	uint32_t n = 0;
	s = neuron_device_count(c, &n);
	if (s != NEURON_OK) {
		const std::string msg = neuron_last_error();
		neuron_disconnect(c);
		TORCH_CHECK(false, "neurond did not list its devices: ", msg);
	}
	const int count = static_cast<int>(std::min<uint32_t>(n, kMaxDevices));
	for (int i = 0; i < count; ++i) {
		struct neuron_device_info info{};
		if (neuron_device_info(c, i, &info) == NEURON_OK)
			d.cores[i] = std::max<uint32_t>(1, info.core_count);
		else
			d.cores[i] = 1;
	}
	d.client = c;
	__atomic_store_n(&d.count, count, __ATOMIC_RELEASE);
	return c;
}

// Called with devs().mu held or after the connection exists.
void create_queues(StreamQueues &sq)
{
	neuron_client *c = devs().client;
	const uint32_t core = static_cast<uint32_t>(sq.id) % std::max<uint32_t>(1, devs().cores[sq.device]);
	neuron_queue *q = nullptr, *dq = nullptr;
	check(neuron_queue_create(c, sq.device, NEURON_QUEUE_CORE, core, 1024, &q), "creating a core queue");
	neuron_status s = neuron_queue_create(c, sq.device, NEURON_QUEUE_DMA, 0, 256, &dq);
	if (s != NEURON_OK) {
		neuron_queue_destroy(q);
		throw_status(s, "creating a DMA queue");
	}
	sq.core = q;
	sq.dma = dq;
	sq.dma_pending = sq.core_waited_dma = sq.dma_waited_core = 0;
}

} // namespace

thread_local const char *tl_native_op = nullptr;

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

[[noreturn]] void throw_status(neuron_status s, const std::string &what)
{
	const std::string msg = neuron_last_error();
	if (s == NEURON_ERR_NO_MEMORY)
		TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: out of device memory while ", what, ": ", msg);
	if (s == NEURON_ERR_DAEMON_LOST)
		TORCH_CHECK(false, "neuron: lost neurond while ", what, ": ", msg,
			    ". Device tensors of this process are gone; restart neurond and the program.");
	TORCH_CHECK(false, "neuron: ", what, " failed (", neuron_status_name(s), "): ", msg);
}

neuron_client *client()
{
	Devices &d = devs();
	std::lock_guard lock(d.mu);
	return connect_locked(d);
}

bool connected() noexcept { return devs().client != nullptr; }

int device_count() noexcept
{
	Devices &d = devs();
	if (const int c = __atomic_load_n(&d.count, __ATOMIC_ACQUIRE); c >= 0)
		return c; // connected: the count never changes
	std::lock_guard lock(d.mu);
	if (d.count >= 0)
		return d.count;
	try {
		connect_locked(d);
	} catch (...) {
		return 0;
	}
	return d.count;
}

uint32_t core_count(int device)
{
	client();
	return devs().cores[device];
}

void check_device(int device)
{
	client();
	TORCH_CHECK(device >= 0 && device < devs().count, "neuron: device index ", device, " is out of range (",
		    devs().count, " device(s))");
}

int current_device() { return tl_device; }

void set_current_device(int device)
{
	TORCH_CHECK(device >= 0 && device < kMaxDevices, "neuron: bad device index ", device);
	tl_device = device;
}

StreamQueues &stream_queues(const c10::Stream &s)
{
	const int dev = s.device_index() < 0 ? current_device() : s.device_index();
	const int64_t id = s.id();
	TORCH_CHECK(dev >= 0 && dev < kMaxDevices && id >= 0 && id <= kCollectiveStream, "neuron: unknown stream ", id,
		    " on device ", dev);
	Devices &d = devs();
	auto &slot = d.streams[dev][id];
	if (slot && slot->core)
		return *slot;
	check_device(dev);
	std::lock_guard lock(d.mu);
	if (!slot) {
		auto sq = std::make_unique<StreamQueues>();
		sq->device = dev;
		sq->id = id;
		create_queues(*sq);
		slot = std::move(sq);
	}
	return *slot;
}

c10::Stream default_stream(int device)
{
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), 0);
}

c10::Stream current_stream(int device)
{
	if (device < 0)
		device = current_device();
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), tl_stream[device]);
}

c10::Stream pool_stream(int device)
{
	if (device < 0)
		device = current_device();
	const uint32_t k = devs().next_pool[device].fetch_add(1) % kStreamPoolSize;
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), 1 + k);
}

c10::Stream collective_stream(int device)
{
	if (device < 0)
		device = current_device();
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), kCollectiveStream);
}

void set_current_stream(const c10::Stream &s)
{
	const int dev = s.device_index() < 0 ? current_device() : s.device_index();
	TORCH_CHECK(s.id() >= 0 && s.id() <= kCollectiveStream, "neuron: unknown stream id ", s.id());
	tl_stream[dev] = s.id();
}

StreamQueues &current_queues(int device)
{
	if (device < 0)
		device = current_device();
	return stream_queues(current_stream(device));
}

namespace {

std::mutex g_explain_mu;
std::map<uint64_t, std::string> g_explain; // queue id -> why it went away (under g_explain_mu)

// Why a stream's wait on another queue failed, when the owner of that queue said
// (explain_failed_queue); empty otherwise.
std::string explain_bad_wait(const neuron_fault &f)
{
	std::lock_guard lock(g_explain_mu);
	for (const auto &[id, why] : g_explain)
		if (std::strstr(f.reason, ("queue " + std::to_string(id) + ",").c_str()) ||
		    std::strstr(f.reason, ("queue " + std::to_string(id) + " ").c_str()))
			return why;
	return {};
}

} // namespace

void explain_failed_queue(uint64_t queue_id, std::string why)
{
	std::lock_guard lock(g_explain_mu);
	g_explain[queue_id] = std::move(why);
}

[[noreturn]] void stream_failed(StreamQueues &sq, neuron_status s, const char *what)
{
	std::string msg = neuron_last_error();
	if (s == NEURON_ERR_FAULT) {
		// Report the root cause: a DMA queue that waited on a faulted core queue
		// faults too, with a less useful reason.
		bool found = false;
		for (neuron_queue *q : {sq.core, sq.dma}) {
			neuron_fault f{};
			if (q && neuron_queue_fault(q, &f) == NEURON_OK && f.code != NEURON_FAULT_NONE &&
			    f.code != NEURON_FAULT_BAD_WAIT) {
				msg = std::string(q == sq.core ? "core" : "DMA") + " queue fault at command " +
				      std::to_string(f.seq) + ": " + f.reason;
				found = true;
				break;
			}
		}
		// A wait on a queue that was given up (a failed collective's signal) says why.
		for (neuron_queue *q : {sq.core, sq.dma}) {
			neuron_fault f{};
			if (found || !q || neuron_queue_fault(q, &f) != NEURON_OK || f.code != NEURON_FAULT_BAD_WAIT)
				continue;
			const std::string why = explain_bad_wait(f);
			if (!why.empty()) {
				msg = std::string(q == sq.core ? "core" : "DMA") + " queue fault at command " +
				      std::to_string(f.seq) + ": " + f.reason + ": " + why;
				break;
			}
		}
		// The old queues stay mapped (events may still name them) but get no more work.
		try {
			create_queues(sq);
		} catch (...) {
		}
		TORCH_CHECK(false, "neuron: device fault on stream ", sq.id, " of neuron:", sq.device, " while ", what, ": ",
			    msg, ". Work queued after the faulting command was dropped; the stream has been reset.");
	}
	throw_status(s, what);
}

uint64_t submit_core(StreamQueues &sq, neuron_cmd &cmd)
{
	TraceSlots slots;
	if (trace_active()) [[unlikely]]
		slots = trace_take_slots(sq.device);
	std::lock_guard lock(sq.mu);
	if (sq.dma_pending > sq.core_waited_dma) {
		cmd.wait.queue_id = neuron_queue_id(sq.dma);
		cmd.wait.value = sq.dma_pending;
		sq.core_waited_dma = sq.dma_pending;
	}
	if (sq.adaptive || adaptive_on()) [[unlikely]] {
		// Adaptive eager holds commands back while they follow a recorded segment;
		// a graph capture or the device trace sees every command (a flush point).
		if (adaptive_on() && !capture_active() && !slots.valid) {
			if (adaptive_take_locked(sq, cmd))
				return 0; // submitted later, in order, by a program or as itself
		} else {
			adaptive_flush_locked(sq);
		}
	}
	if (capture_active()) [[unlikely]]
		capture_command(sq, cmd);
	if (slots.valid) [[unlikely]]
		return trace_submit_locked(sq, cmd, slots);
	uint64_t seq = 0;
	neuron_status s = neuron_submit(sq.core, &cmd, &seq);
	if (s != NEURON_OK)
		stream_failed(sq, s, "submitting a command");
	return seq;
}

uint64_t submit_program(StreamQueues &sq, uint64_t program, const uint64_t *bindings, uint32_t count)
{
	std::lock_guard lock(sq.mu);
	adaptive_flush_locked(sq);
	neuron_exec_options opts{};
	if (sq.dma_pending > sq.core_waited_dma) {
		opts.wait.queue_id = neuron_queue_id(sq.dma);
		opts.wait.value = sq.dma_pending;
		sq.core_waited_dma = sq.dma_pending;
	}
	uint64_t seq = 0;
	neuron_status s = neuron_submit_program(sq.core, program, bindings, count, &opts, &seq);
	if (s != NEURON_OK)
		stream_failed(sq, s, "submitting a graph program");
	return seq;
}

void dma_after_core_locked(StreamQueues &sq)
{
	adaptive_flush_locked(sq); // the copy waits for the core work issued so far
	if (capture_active()) [[unlikely]]
		capture_taint("a copy to or from the host");
	neuron_event ev{};
	neuron_event_record(sq.core, &ev);
	if (ev.value > sq.dma_waited_core) {
		neuron_status s = neuron_queue_wait_event(sq.dma, &ev);
		if (s != NEURON_OK)
			stream_failed(sq, s, "ordering a copy after compute");
		sq.dma_waited_core = ev.value;
	}
}

void core_after_dma_locked(StreamQueues &sq, uint64_t dma_seq)
{
	if (capture_active()) [[unlikely]]
		capture_taint("a copy to or from the host");
	sq.dma_pending = std::max(sq.dma_pending, dma_seq);
}

uint64_t stream_point(StreamQueues &sq)
{
	std::lock_guard lock(sq.mu);
	adaptive_flush_locked(sq);
	if (sq.dma_pending > sq.core_waited_dma) {
		neuron_event ev{neuron_queue_id(sq.dma), sq.dma_pending};
		neuron_status s = neuron_queue_wait_event(sq.core, &ev);
		if (s != NEURON_OK)
			stream_failed(sq, s, "recording an event");
		sq.core_waited_dma = sq.dma_pending;
	}
	neuron_event ev{};
	neuron_event_record(sq.core, &ev);
	return ev.value;
}

void sync_stream(StreamQueues &sq)
{
	if (capture_active()) [[unlikely]]
		capture_taint("a wait for the device (a value read on the host)");
	neuron_queue *dma, *core;
	{
		std::lock_guard lock(sq.mu);
		adaptive_flush_locked(sq);
		dma = sq.dma;
		core = sq.core;
	}
	neuron_status s = neuron_queue_sync(dma, -1);
	if (s != NEURON_OK)
		stream_failed(sq, s, "synchronizing (DMA)");
	s = neuron_queue_sync(core, -1);
	if (s != NEURON_OK)
		stream_failed(sq, s, "synchronizing");
}

bool query_stream(StreamQueues &sq)
{
	std::lock_guard lock(sq.mu);
	adaptive_flush_locked(sq);
	neuron_event a{}, b{};
	neuron_event_record(sq.core, &a);
	neuron_event_record(sq.dma, &b);
	neuron_fault f{};
	neuron_queue_fault(sq.core, &f);
	if (f.code != NEURON_FAULT_NONE)
		return true;
	return neuron_queue_completed(sq.core) >= a.value && neuron_queue_completed(sq.dma) >= b.value;
}

void sync_device(int device)
{
	if (!connected())
		return;
	Devices &d = devs();
	if (device < 0 || device >= kMaxDevices)
		return;
	for (auto &slot : d.streams[device])
		if (slot && slot->core)
			sync_stream(*slot);
}

} // namespace torch_neuron
