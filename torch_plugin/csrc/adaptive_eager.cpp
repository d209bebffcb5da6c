// Adaptive eager: recording, stable-segment detection, and replay of a stream's
// command segments as programs (adaptive_eager.h has the design).
//
// Locking: a stream's state lives in its StreamQueues and is touched only with
// sq.mu held (submit_core and the flush points hold it). The list of streams with
// state and the counters have their own mutex / atomics.
#include "adaptive_eager.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace torch_neuron {

std::atomic<bool> g_adaptive_on{false};

struct AdaptiveStream;

namespace {

constexpr size_t kMaxSegment = 16384;    // commands of one segment recorded at most
constexpr size_t kMaxChunkPrograms = 512; // programs registered per stream at most
constexpr size_t kMaxSeen = 4096;         // forms counted per stream before the counts restart
constexpr size_t kMaxPrevious = 16;       // occurrences kept to find commands whose scalars change

std::atomic<int> g_warmup{2};  // occurrences of a form before it is registered
std::atomic<int> g_chunk{64};  // commands per program

struct Counters {
	std::atomic<int64_t> segments{0}, registered{0}, programs{0}, replayed_segments{0}, replayed_chunks{0},
		replayed_commands{0}, deferred_then_plain{0}, fallbacks{0}, refused{0};
	std::mutex mu;
	std::string last_fallback, last_refusal;
};
Counters g_count;

void note(std::string *where, const std::string &why)
{
	std::lock_guard lock(g_count.mu);
	*where = why;
}

// ---- a command's fields other than its addresses and wait ----

constexpr size_t kHeadBytes = offsetof(neuron_cmd, wait);
constexpr size_t kScalarOff = offsetof(neuron_cmd, fscalars);
constexpr size_t kScalarBytes = offsetof(neuron_cmd, operands) - kScalarOff;
constexpr size_t kDescTail = sizeof(neuron_tensor_desc) - offsetof(neuron_tensor_desc, host_buffer);

bool same_fields(const neuron_cmd &a, const neuron_cmd &b)
{
	const auto *pa = reinterpret_cast<const unsigned char *>(&a), *pb = reinterpret_cast<const unsigned char *>(&b);
	if (std::memcmp(pa, pb, kHeadBytes) || std::memcmp(pa + kScalarOff, pb + kScalarOff, kScalarBytes))
		return false;
	for (int j = 0; j < a.num_operands && j < NEURON_MAX_OPERANDS; ++j)
		if (std::memcmp(&a.operands[j].host_buffer, &b.operands[j].host_buffer, kDescTail))
			return false;
	return true;
}

// A 64-bit hash step over n bytes (whole words first: the command's parts are
// multiples of 8 bytes).
uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const auto *c = static_cast<const unsigned char *>(p);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		std::memcpy(&w, c + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	for (; i < n; ++i)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

// same_fields without the scalars (a command whose scalars change every step).
bool same_but_scalars(const neuron_cmd &a, const neuron_cmd &b)
{
	if (std::memcmp(&a, &b, kHeadBytes))
		return false;
	for (int j = 0; j < a.num_operands && j < NEURON_MAX_OPERANDS; ++j)
		if (std::memcmp(&a.operands[j].host_buffer, &b.operands[j].host_buffer, kDescTail))
			return false;
	return true;
}

uint64_t loose_hash(const neuron_cmd &c)
{
	uint64_t h = mix(0x84222325cbf29ce4ull, &c, kHeadBytes);
	for (int j = 0; j < c.num_operands && j < NEURON_MAX_OPERANDS; ++j)
		h = mix(h, &c.operands[j].host_buffer, kDescTail);
	return h;
}

uint64_t fields_hash(const neuron_cmd &c)
{
	const auto *p = reinterpret_cast<const unsigned char *>(&c);
	uint64_t h = mix(0xcbf29ce484222325ull, p, kHeadBytes);
	h = mix(h, p + kScalarOff, kScalarBytes);
	for (int j = 0; j < c.num_operands && j < NEURON_MAX_OPERANDS; ++j)
		h = mix(h, &c.operands[j].host_buffer, kDescTail);
	return h;
}

uint64_t dtype_bytes(int dt)
{
	switch (dt) {
	case NEURON_DTYPE_F32:
	case NEURON_DTYPE_I32: return 4;
	case NEURON_DTYPE_I64: return 8;
	case NEURON_DTYPE_BF16:
	case NEURON_DTYPE_F16: return 2;
	default: return 1;
	}
}

// Bytes [addr, addr + *bytes) a device operand touches; false if none (a zero size).
bool span(const neuron_tensor_desc &d, uint64_t *bytes)
{
	uint64_t last = 0;
	for (int i = 0; i < d.ndim && i < NEURON_MAX_DIMS; ++i) {
		if (d.sizes[i] == 0)
			return false;
		last += static_cast<uint64_t>(d.sizes[i] - 1) * static_cast<uint64_t>(d.strides[i]);
	}
	*bytes = (last + 1) * dtype_bytes(d.dtype);
	return true;
}

// What a program cannot hold, or nullptr.
const char *unreplayable(const neuron_cmd &c)
{
	switch (c.opcode) {
	case NEURON_OP_RNG:
	case NEURON_OP_DROPOUT:
	case NEURON_OP_RANDPERM:
	case NEURON_OP_MULTINOMIAL: return "random numbers";
	case NEURON_OP_TIMESTAMP: return "a device timestamp (profiling, timed events)";
	case NEURON_OP_TILE_KERNEL: return "a tile kernel";
	default: break;
	}
	for (int j = 0; j < c.num_operands && j < NEURON_MAX_OPERANDS; ++j)
		if (c.operands[j].mem_space != NEURON_MEM_DEVICE)
			return "an operand in host memory";
	return nullptr;
}

// ---- canonical form ----

// An operand named relative to its chunk's region (region -1: it touches no byte).
struct Ref {
	int32_t region = -1;
	uint64_t offset = 0;
};

struct Chunk {
	size_t begin = 0, end = 0;
	std::vector<uint64_t> region_bytes;
	uint64_t program = 0; // neurond's id once registered
	bool plain = false;   // holds a command whose scalars change: checked, never a program
};

struct Form {
	std::vector<neuron_cmd> cmds; // as the occurrence that was canonicalised issued them
	std::vector<const char *> labels;
	std::vector<std::array<Ref, NEURON_MAX_OPERANDS>> refs;
	std::vector<Chunk> chunks;
	uint64_t sig = 0; // without the scalars: a form may have commands whose scalars change
	uint64_t first_key = 0;
	// Commands whose scalars differed between occurrences: their chunks stay plain
	// (program 0), checked but submitted as issued.
	std::vector<uint8_t> volatile_;
	std::string taint;
};

// Regions of one chunk: byte ranges that overlap are merged (so two operands of a
// region keep their relative place), numbered by first use (so the numbering does
// not depend on where the allocator put them).
void canonical_chunk(Form &f, Chunk &ch)
{
	struct Span {
		uint64_t lo, hi;
		size_t k;
		int j;
	};
	std::vector<Span> spans;
	for (size_t k = ch.begin; k < ch.end; ++k)
		for (int j = 0; j < f.cmds[k].num_operands; ++j) {
			uint64_t bytes = 0;
			if (span(f.cmds[k].operands[j], &bytes))
				spans.push_back({f.cmds[k].operands[j].addr, f.cmds[k].operands[j].addr + bytes, k, j});
		}
	std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) { return a.lo < b.lo; });
	// Merge: group g covers [glo[g], ghi[g]).
	std::vector<uint64_t> glo, ghi;
	std::vector<size_t> group(spans.size());
	for (size_t i = 0; i < spans.size(); ++i) {
		if (glo.empty() || spans[i].lo >= ghi.back()) {
			glo.push_back(spans[i].lo);
			ghi.push_back(spans[i].hi);
		} else {
			ghi.back() = std::max(ghi.back(), spans[i].hi);
		}
		group[i] = glo.size() - 1;
	}
	// Number the groups by first use (command order, then operand order).
	std::vector<size_t> order(spans.size());
	for (size_t i = 0; i < order.size(); ++i)
		order[i] = i;
	std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
		return spans[a].k != spans[b].k ? spans[a].k < spans[b].k : spans[a].j < spans[b].j;
	});
	std::vector<int32_t> number(glo.size(), -1);
	ch.region_bytes.clear();
	for (size_t i : order) {
		const size_t g = group[i];
		if (number[g] < 0) {
			number[g] = static_cast<int32_t>(ch.region_bytes.size());
			ch.region_bytes.push_back(ghi[g] - glo[g]);
		}
		f.refs[spans[i].k][spans[i].j] = {number[g], spans[i].lo - glo[g]};
	}
}

Form canonical(std::vector<neuron_cmd> cmds, std::vector<const char *> labels, std::string taint, size_t chunk)
{
	Form f;
	f.cmds = std::move(cmds);
	f.labels = std::move(labels);
	f.taint = std::move(taint);
	f.refs.assign(f.cmds.size(), {});
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t b = 0; b < f.cmds.size(); b += chunk) {
		Chunk ch;
		ch.begin = b;
		ch.end = std::min(f.cmds.size(), b + chunk);
		canonical_chunk(f, ch);
		if (ch.region_bytes.empty() && f.taint.empty())
			f.taint = "a chunk that touches no memory";
		for (size_t k = ch.begin; k < ch.end; ++k) {
			const uint64_t fh = loose_hash(f.cmds[k]);
			h = mix(h, &fh, sizeof fh);
			for (int j = 0; j < f.cmds[k].num_operands; ++j) {
				const int64_t ref[2] = {f.refs[k][j].region, static_cast<int64_t>(f.refs[k][j].offset)};
				h = mix(h, ref, sizeof ref);
			}
		}
		h = mix(h, ch.region_bytes.data(), ch.region_bytes.size() * sizeof(uint64_t));
		h = mix(h, "|", 1); // chunk boundary
		f.chunks.push_back(std::move(ch));
	}
	f.sig = mix(h, &chunk, sizeof chunk);
	if (!f.cmds.empty())
		f.first_key = fields_hash(f.cmds[0]);
	return f;
}

// "" and the chunk's program id, or neurond's refusal.
std::string register_chunk(const Form &f, Chunk &ch, int device)
{
	const size_t n = ch.end - ch.begin;
	std::vector<neuron_program_node> nodes(n);
	std::vector<uint32_t> deps(n);
	std::vector<std::string> labels(n);
	for (size_t i = 0; i < n; ++i) {
		const size_t k = ch.begin + i;
		neuron_cmd c = f.cmds[k];
		c.wait = neuron_wait{}; // the EXEC_PROGRAM carries the chunk's wait
		for (int j = 0; j < c.num_operands; ++j) {
			const Ref r = f.refs[k][j];
			c.operands[j].mem_space = NEURON_MEM_PROGRAM_ARG;
			c.operands[j].host_buffer = static_cast<uint32_t>(std::max(r.region, 0));
			c.operands[j].addr = r.region < 0 ? 0 : r.offset;
		}
		labels[i] = std::string("adaptive ") + (f.labels[k] ? f.labels[k] : "?");
		labels[i].resize(std::min<size_t>(labels[i].size(), NEURON_PROGRAM_LABEL_LEN - 1));
		nodes[i].cmd = c;
		deps[i] = static_cast<uint32_t>(i) - 1;
		nodes[i].deps = i ? &deps[i] : nullptr; // issue order, as eager
		nodes[i].dep_count = i ? 1 : 0;
		nodes[i].label = labels[i].c_str();
	}
	neuron_program_desc d{};
	d.device = static_cast<uint32_t>(device);
	d.arg_count = static_cast<uint32_t>(ch.region_bytes.size());
	d.arg_bytes = ch.region_bytes.data();
	d.node_count = static_cast<uint32_t>(n);
	d.nodes = nodes.data();
	if (neuron_program_register(client(), &d, &ch.program) != NEURON_OK) {
		ch.program = 0;
		return neuron_last_error();
	}
	return {};
}

} // namespace

// ---- per-stream state ----

struct AdaptiveStream {
	// The segment so far, as issued (held back or not), with the op of each.
	std::vector<neuron_cmd> cur;
	std::vector<const char *> cur_labels;
	std::string cur_taint;
	// Replay in progress: the form being followed, the next command's position,
	// the region bindings of the current chunk, and the wait of what is held back.
	const Form *replay = nullptr;
	size_t next = 0, chunk = 0, held_from = 0;
	std::vector<uint64_t> bind;
	std::vector<uint8_t> bound;
	neuron_wait wait{};
	// History: occurrences per form, registered forms, which form followed which.
	std::unordered_map<uint64_t, int> seen;
	std::unordered_map<uint64_t, std::unique_ptr<Form>> previous; // last occurrence per form, until registered
	std::unordered_map<uint64_t, std::unique_ptr<Form>> forms;
	std::unordered_map<uint64_t, std::vector<const Form *>> by_first;
	std::unordered_map<uint64_t, uint64_t> successor;
	uint64_t last_sig = 0;
	size_t programs = 0;
};

namespace {

std::mutex g_streams_mu;
std::vector<StreamQueues *> g_streams;

AdaptiveStream &state(StreamQueues &sq)
{
	if (!sq.adaptive) {
		sq.adaptive = new AdaptiveStream; // lives as long as the stream (streams are never freed)
		std::lock_guard lock(g_streams_mu);
		g_streams.push_back(&sq);
	}
	return *sq.adaptive;
}

void submit_plain(StreamQueues &sq, neuron_cmd &cmd)
{
	uint64_t seq = 0;
	if (neuron_status s = neuron_submit(sq.core, &cmd, &seq); s != NEURON_OK)
		stream_failed(sq, s, "submitting a command");
}

// Held-back commands of the current chunk go as plain commands, in order.
void release_held(StreamQueues &sq, AdaptiveStream &st)
{
	const size_t from = st.held_from, to = st.next;
	st.held_from = st.next;
	for (size_t k = from; k < to; ++k) {
		g_count.deferred_then_plain.fetch_add(1, std::memory_order_relaxed);
		submit_plain(sq, st.cur[k]);
	}
}

void leave_replay(StreamQueues &sq, AdaptiveStream &st, const std::string &why)
{
	st.replay = nullptr;
	g_count.fallbacks.fetch_add(1, std::memory_order_relaxed);
	note(&g_count.last_fallback, why);
	release_held(sq, st);
}

// Binds the command's operands to the current chunk's regions; false if an
// address contradicts an earlier binding.
bool bind_operands(AdaptiveStream &st, const neuron_cmd &cmd, size_t k)
{
	const auto &refs = st.replay->refs[k];
	for (int j = 0; j < cmd.num_operands; ++j) {
		const Ref r = refs[j];
		if (r.region < 0)
			continue;
		const uint64_t base = cmd.operands[j].addr - r.offset;
		if (!st.bound[r.region]) {
			st.bound[r.region] = 1;
			st.bind[r.region] = base;
		} else if (st.bind[r.region] != base) {
			return false;
		}
	}
	return true;
}

void start_chunk(AdaptiveStream &st)
{
	const Chunk &ch = st.replay->chunks[st.chunk];
	st.bind.assign(ch.region_bytes.size(), 0);
	st.bound.assign(ch.region_bytes.size(), 0);
	st.held_from = ch.begin;
	st.wait = neuron_wait{};
}

// The chunk is complete: one EXEC_PROGRAM, unless its regions now overlap (then
// the held commands go plain and the replay ends).
bool submit_chunk(StreamQueues &sq, AdaptiveStream &st)
{
	const Chunk &ch = st.replay->chunks[st.chunk];
	std::vector<std::pair<uint64_t, uint64_t>> r(ch.region_bytes.size());
	for (size_t i = 0; i < r.size(); ++i)
		r[i] = {st.bind[i], st.bind[i] + ch.region_bytes[i]};
	std::sort(r.begin(), r.end());
	for (size_t i = 1; i < r.size(); ++i)
		if (r[i].first < r[i - 1].second) {
			leave_replay(sq, st, "memory that was apart when the segment was recorded overlaps now");
			return false;
		}
	neuron_exec_options opts{};
	opts.wait = st.wait;
	uint64_t seq = 0;
	st.held_from = ch.end;
	neuron_status s = neuron_submit_program(sq.core, ch.program, st.bind.data(), static_cast<uint32_t>(st.bind.size()),
						&opts, &seq);
	if (s != NEURON_OK) {
		st.replay = nullptr;
		stream_failed(sq, s, "submitting an adaptive eager program");
	}
	g_count.replayed_chunks.fetch_add(1, std::memory_order_relaxed);
	g_count.replayed_commands.fetch_add(static_cast<int64_t>(ch.end - ch.begin), std::memory_order_relaxed);
	return true;
}

// The form that should come next, if its first command is this one.
const Form *candidate(AdaptiveStream &st, const neuron_cmd &cmd)
{
	const uint64_t key = fields_hash(cmd);
	if (auto s = st.successor.find(st.last_sig); s != st.successor.end())
		if (auto f = st.forms.find(s->second); f != st.forms.end() && f->second->first_key == key &&
						   same_fields(f->second->cmds[0], cmd))
			return f->second.get();
	auto it = st.by_first.find(key);
	if (it == st.by_first.end())
		return nullptr;
	for (auto f = it->second.rbegin(); f != it->second.rend(); ++f)
		if (same_fields((*f)->cmds[0], cmd))
			return *f;
	return nullptr;
}

// A form seen `warmup` times becomes programs (or is remembered as refused).
void maybe_register(StreamQueues &sq, AdaptiveStream &st, Form &&f)
{
	if (st.seen.size() > kMaxSeen) // code whose segments never repeat (forms that will not come back)
		st.seen.clear();
	if (st.forms.count(f.sig))
		return;
	const int seen = ++st.seen[f.sig];
	f.volatile_.assign(f.cmds.size(), 0);
	if (auto p = st.previous.find(f.sig); p != st.previous.end()) {
		f.volatile_ = p->second->volatile_;
		for (size_t k = 0; k < f.cmds.size() && k < p->second->cmds.size(); ++k)
			if (!same_fields(f.cmds[k], p->second->cmds[k]))
				f.volatile_[k] = 1;
	}
	if (seen != g_warmup.load()) {
		if (st.previous.size() >= kMaxPrevious)
			st.previous.clear();
		st.previous[f.sig] = std::make_unique<Form>(std::move(f));
		return;
	}
	st.previous.erase(f.sig);
	bool any = false;
	for (Chunk &ch : f.chunks) {
		bool plain = false;
		for (size_t k = ch.begin; k < ch.end; ++k)
			plain = plain || f.volatile_[k];
		ch.plain = plain;
		any = any || !plain;
	}
	if (!any)
		return;
	if (st.programs + f.chunks.size() > kMaxChunkPrograms) {
		g_count.refused.fetch_add(1, std::memory_order_relaxed);
		note(&g_count.last_refusal, "the stream has " + std::to_string(st.programs) +
						    " adaptive programs already (limit " + std::to_string(kMaxChunkPrograms) + ")");
		return;
	}
	auto form = std::make_unique<Form>(std::move(f));
	for (Chunk &ch : form->chunks)
		if (ch.plain)
			continue;
		else if (auto why = register_chunk(*form, ch, sq.device); !why.empty()) {
			for (Chunk &done : form->chunks)
				if (done.program)
					(void)neuron_program_release(client(), done.program);
			g_count.refused.fetch_add(1, std::memory_order_relaxed);
			note(&g_count.last_refusal, "neurond refused a segment's program: " + why);
			return;
		}
	size_t registered = 0;
	for (const Chunk &ch : form->chunks)
		registered += ch.program ? 1 : 0;
	st.programs += registered;
	g_count.registered.fetch_add(1, std::memory_order_relaxed);
	g_count.programs.fetch_add(static_cast<int64_t>(registered), std::memory_order_relaxed);
	st.by_first[form->first_key].push_back(form.get());
	st.forms[form->sig] = std::move(form);
}

void end_segment(StreamQueues &sq, AdaptiveStream &st)
{
	if (st.replay) {
		if (st.next == st.replay->cmds.size()) {
			if (st.held_from < st.next)
				(void)submit_chunk(sq, st);
			if (st.replay) {
				g_count.replayed_segments.fetch_add(1, std::memory_order_relaxed);
				st.successor[st.last_sig] = st.replay->sig;
				st.last_sig = st.replay->sig;
				st.replay = nullptr;
				st.cur.clear();
				st.cur_labels.clear();
				g_count.segments.fetch_add(1, std::memory_order_relaxed);
				return;
			}
		} else {
			leave_replay(sq, st, "the segment ended after " + std::to_string(st.next) + " of its " +
						     std::to_string(st.replay->cmds.size()) + " recorded commands");
		}
	}
	if (st.cur.empty())
		return;
	g_count.segments.fetch_add(1, std::memory_order_relaxed);
	Form f = canonical(std::move(st.cur), std::move(st.cur_labels), std::move(st.cur_taint),
			   static_cast<size_t>(g_chunk.load()));
	st.cur.clear();
	st.cur_labels.clear();
	st.cur_taint.clear();
	st.successor[st.last_sig] = f.sig;
	st.last_sig = f.sig;
	if (f.taint.empty())
		maybe_register(sq, st, std::move(f));
}

} // namespace

bool adaptive_take_locked(StreamQueues &sq, neuron_cmd &cmd)
{
	AdaptiveStream &st = state(sq);
	if (st.cur.size() >= kMaxSegment) {
		if (st.replay)
			leave_replay(sq, st, "the segment is longer than the recording limit");
		if (st.cur_taint.empty())
			st.cur_taint = "longer than " + std::to_string(kMaxSegment) + " commands";
		return false;
	}
	if (const char *why = unreplayable(cmd)) {
		if (st.replay)
			leave_replay(sq, st, std::string("the segment now has ") + why);
		if (st.cur_taint.empty())
			st.cur_taint = why;
		st.cur.push_back(cmd);
		st.cur_labels.push_back(tl_native_op);
		return false;
	}
	st.cur.push_back(cmd);
	st.cur_labels.push_back(tl_native_op);
	if (!st.replay && st.cur.size() == 1 && st.cur_taint.empty()) {
		if (const Form *f = candidate(st, cmd)) {
			st.replay = f;
			st.next = 0;
			st.chunk = 0;
			start_chunk(st);
		}
	}
	if (!st.replay)
		return false;
	const size_t k = st.next;
	const bool plain_chunk = k < st.replay->cmds.size() && st.replay->chunks[st.chunk].plain;
	if (k >= st.replay->cmds.size() ||
	    !(st.replay->volatile_[k] ? same_but_scalars(st.replay->cmds[k], cmd) : same_fields(st.replay->cmds[k], cmd)) ||
	    (!plain_chunk && !bind_operands(st, cmd, k))) {
		leave_replay(sq, st,
			     k >= st.replay->cmds.size()
				     ? "the segment is longer than the recorded one"
				     : "command " + std::to_string(k) + " (" + (tl_native_op ? tl_native_op : "?") +
					       ") differs from the recorded one (" +
					       (st.replay->labels[k] ? st.replay->labels[k] : "?") + ")");
		return false;
	}
	if (plain_chunk) { // checked, submitted as issued
		st.next = st.held_from = k + 1;
		if (st.next == st.replay->chunks[st.chunk].end && st.next < st.replay->cmds.size()) {
			++st.chunk;
			start_chunk(st);
		}
		return false;
	}
	if (cmd.wait.queue_id && cmd.wait.value > st.wait.value)
		st.wait = cmd.wait;
	st.next = k + 1;
	if (st.next == st.replay->chunks[st.chunk].end && st.next < st.replay->cmds.size()) {
		if (!submit_chunk(sq, st))
			return true; // held commands (this one included) went plain
		++st.chunk;
		start_chunk(st);
	}
	return true;
}

void adaptive_flush_locked(StreamQueues &sq)
{
	if (sq.adaptive)
		end_segment(sq, *sq.adaptive);
}

namespace {

void op_adaptive_set(bool on, int64_t warmup, int64_t chunk)
{
	TORCH_CHECK(warmup >= 1 && warmup <= 1000, "set_adaptive_eager: warmup must be in [1, 1000], got ", warmup);
	TORCH_CHECK(chunk >= 1 && chunk <= NEURON_PROGRAM_MAX_NODES, "set_adaptive_eager: chunk must be in [1, ",
		    NEURON_PROGRAM_MAX_NODES, "], got ", chunk);
	if (on) {
		g_warmup = static_cast<int>(warmup);
		g_chunk = static_cast<int>(chunk);
		g_adaptive_on = true;
		return;
	}
	g_adaptive_on = false;
	std::vector<StreamQueues *> streams;
	{
		std::lock_guard lock(g_streams_mu);
		streams = g_streams;
	}
	// Held work goes out; the forms' programs are released once the replays
	// already submitted were admitted (neurond faults a replay of a released one).
	for (StreamQueues *sq : streams) {
		std::vector<uint64_t> ids;
		{
			std::lock_guard lock(sq->mu);
			AdaptiveStream &st = *sq->adaptive;
			end_segment(*sq, st);
			for (auto &[sig, f] : st.forms)
				for (const Chunk &ch : f->chunks)
					if (ch.program)
						ids.push_back(ch.program);
			*sq->adaptive = AdaptiveStream{};
		}
		if (ids.empty() || !connected())
			continue;
		try {
			sync_stream(*sq);
		} catch (const std::exception &) {
		}
		for (uint64_t id : ids)
			(void)neuron_program_release(client(), id);
	}
}

bool op_adaptive_enabled() { return adaptive_on(); }

// The counters, in the order torch_neuron/_device.py names them, then the last
// fallback's and the last refusal's reasons.
std::tuple<std::vector<int64_t>, std::string, std::string> op_adaptive_stats()
{
	std::lock_guard lock(g_count.mu);
	return {{g_count.segments.load(), g_count.registered.load(), g_count.programs.load(),
		 g_count.replayed_segments.load(), g_count.replayed_chunks.load(), g_count.replayed_commands.load(),
		 g_count.deferred_then_plain.load(), g_count.fallbacks.load(), g_count.refused.load()},
		g_count.last_fallback,
		g_count.last_refusal};
}

void op_adaptive_reset_stats()
{
	std::lock_guard lock(g_count.mu);
	for (auto *c : {&g_count.segments, &g_count.registered, &g_count.programs, &g_count.replayed_segments,
			&g_count.replayed_chunks, &g_count.replayed_commands, &g_count.deferred_then_plain,
			&g_count.fallbacks, &g_count.refused})
		c->store(0);
	g_count.last_fallback.clear();
	g_count.last_refusal.clear();
}

} // namespace

TORCH_LIBRARY_FRAGMENT(neuron, m)
{
	m.def("_adaptive_set(bool on, int warmup, int chunk) -> ()", &op_adaptive_set);
	m.def("_adaptive_enabled() -> bool", &op_adaptive_enabled);
	m.def("_adaptive_stats() -> (int[], str, str)", &op_adaptive_stats);
	m.def("_adaptive_reset_stats() -> ()", &op_adaptive_reset_stats);
}

} // namespace torch_neuron
