// Recording of the commands a graph's first run submits (graph_capture.h); the
// lowering of a recording to a program is graph_lowering.cpp.
#include "graph_capture.h"

#include <c10/util/Exception.h>

#include <neuron/program.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace torch_neuron {

std::atomic<bool> g_capture_active{false};

namespace {

struct Capture {
	std::mutex mu; // frees may come from other threads (deleters)
	std::thread::id thread;
	int device = 0;
	StreamQueues *sq = nullptr;
	std::string label;
	Recording rec;
	std::unordered_map<uint64_t, size_t> live; // address -> index in rec.allocs
};

Capture g_cap;
thread_local int t_paused = 0; // CapturePause depth on this thread

bool on_capture_thread() { return capture_active() && std::this_thread::get_id() == g_cap.thread; }
bool paused_here() { return t_paused > 0 && on_capture_thread(); }

void taint_locked(const std::string &why)
{
	if (g_cap.rec.taint.empty())
		g_cap.rec.taint = why;
}

} // namespace

CapturePause::CapturePause() { ++t_paused; }
CapturePause::~CapturePause() { --t_paused; }

void capture_command(StreamQueues &sq, const neuron_cmd &cmd)
{
	if (!capture_active() || paused_here())
		return;
	std::lock_guard lock(g_cap.mu);
	if (std::this_thread::get_id() != g_cap.thread) {
		taint_locked("another thread submitted device work while the graph was captured");
		return;
	}
	if (&sq != g_cap.sq) {
		taint_locked("the graph submitted work on another stream than the one it started on");
		return;
	}
	const uint16_t op = cmd.opcode;
	if (op == NEURON_OP_RNG || op == NEURON_OP_DROPOUT || op == NEURON_OP_RANDPERM || op == NEURON_OP_MULTINOMIAL)
		taint_locked("'" + g_cap.label + "' draws random numbers (a replay would repeat them)");
	else if (op == NEURON_OP_TIMESTAMP)
		taint_locked("a device timestamp was recorded (profiling) inside the graph");
	RecordedCmd r;
	r.cmd = cmd;
	r.cmd.wait = neuron_wait{}; // the replay orders itself after earlier work
	r.label = g_cap.label;
	g_cap.rec.cmds.push_back(std::move(r));
}

void capture_tile_kernel(StreamQueues &sq, const neuron_cmd &cmd, int64_t key,
			 std::shared_ptr<const std::vector<uint8_t>> image)
{
	if (!capture_active())
		return;
	size_t index = 0;
	{
		std::lock_guard lock(g_cap.mu);
		auto &keys = g_cap.rec.tile_keys;
		index = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
		if (index == keys.size()) {
			if (keys.size() == NEURON_PROGRAM_MAX_TILE_PROGRAMS) {
				taint_locked("the graph runs more than " + std::to_string(NEURON_PROGRAM_MAX_TILE_PROGRAMS) +
					     " distinct tile kernels");
				return;
			}
			keys.push_back(key);
			g_cap.rec.tile_images.push_back(std::move(image));
		}
	}
	neuron_cmd c = cmd;
	c.iscalars[0] = static_cast<int64_t>(index);
	capture_command(sq, c);
}

void capture_alloc(uint64_t addr, uint64_t bytes)
{
	if (!on_capture_thread() || paused_here())
		return;
	std::lock_guard lock(g_cap.mu);
	g_cap.live[addr] = g_cap.rec.allocs.size();
	g_cap.rec.allocs.push_back({addr, bytes, g_cap.rec.cmds.size(), kAlive});
}

void capture_free(uint64_t addr)
{
	if (!capture_active())
		return;
	std::lock_guard lock(g_cap.mu);
	auto it = g_cap.live.find(addr);
	if (it == g_cap.live.end())
		return;
	g_cap.rec.allocs[it->second].died = g_cap.rec.cmds.size();
	g_cap.live.erase(it);
}

void capture_taint(const char *why)
{
	if (!on_capture_thread() || paused_here())
		return;
	std::lock_guard lock(g_cap.mu);
	taint_locked(std::string(why) + " in '" + g_cap.label + "'");
}

void capture_constant(const at::Tensor &t)
{
	if (!on_capture_thread() || paused_here())
		return;
	std::lock_guard lock(g_cap.mu);
	for (const at::Tensor &c : g_cap.rec.constants)
		if (c.is_same(t))
			return;
	g_cap.rec.constants.push_back(t);
}

void capture_begin(int device, StreamQueues &sq)
{
	bool expected = false;
	TORCH_CHECK(g_capture_active.compare_exchange_strong(expected, true),
		    "neuron: a graph is already being captured (torch.compile runs one capture at a time)");
	std::lock_guard lock(g_cap.mu);
	g_cap.thread = std::this_thread::get_id();
	g_cap.device = device;
	g_cap.sq = &sq;
	g_cap.label.clear();
	g_cap.rec = Recording{};
	g_cap.live.clear();
}

void capture_label(const std::string &label)
{
	std::lock_guard lock(g_cap.mu);
	g_cap.label = label;
}

Recording capture_finish()
{
	std::lock_guard lock(g_cap.mu);
	g_capture_active.store(false);
	g_cap.live.clear();
	g_cap.sq = nullptr;
	return std::move(g_cap.rec);
}

} // namespace torch_neuron
