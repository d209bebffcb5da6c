#include "collective_groups.h"

#include "log.h"
#include "text.h"

#include <neuron/cmd.h>

#include <algorithm>

namespace neuron::daemon {

namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMinSecret = 16, kMaxSecret = 64;
constexpr uint32_t kMaxWorld = 256;
constexpr uint32_t kMaxTimeoutMs = 3'600'000;
constexpr int kMaxP2POps = 1024; // per CollectiveP2P (all_to_all: 2 per peer)

// Equal secrets without a timing side channel on where they first differ.
bool same_secret(const std::string &a, const std::string &b)
{
	if (a.size() != b.size())
		return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < a.size(); ++i)
		diff |= static_cast<unsigned char>(a[i] ^ b[i]);
	return diff == 0;
}

bool same_collective(const api::CollectiveRun &a, const api::CollectiveRun &b)
{
	return a.op() == b.op() && a.reduce() == b.reduce() && a.dtype() == b.dtype() && a.count() == b.count() &&
	       a.root() == b.root();
}

std::string describe(const api::CollectiveRun &r)
{
	return std::string(collective_name(r.op())) + "(reduce " + api::ReduceOp_Name(r.reduce()) + ", dtype " +
	       std::to_string(r.dtype()) + ", count " + std::to_string(r.count()) + ", root " + std::to_string(r.root()) +
	       ")";
}

const char *dtype_name(uint32_t dtype)
{
	switch (dtype) {
	case NEURON_DTYPE_F32: return "f32";
	case NEURON_DTYPE_BF16: return "bf16";
	case NEURON_DTYPE_F16: return "f16";
	case NEURON_DTYPE_I32: return "i32";
	case NEURON_DTYPE_I64: return "i64";
	case NEURON_DTYPE_U8: return "u8";
	default: return "?";
	}
}

// "send to rank 1 (tag 3, 16 elements of f32)"
std::string describe(const api::P2POp &op)
{
	return std::string(op.send() ? "send to" : "recv from") +
	       (op.any_source() ? std::string(" any rank") : " rank " + std::to_string(op.peer())) + " (tag " +
	       std::to_string(op.tag()) + ", " + std::to_string(op.count()) + " elements of " + dtype_name(op.dtype()) +
	       ")";
}

void answer(std::optional<CollectiveGroups::Reply> &waiting, api::Response &resp)
{
	if (!waiting)
		return;
	auto reply = std::move(*waiting);
	waiting.reset();
	reply(resp);
}

void answer_error(std::optional<CollectiveGroups::Reply> &waiting, api::ErrorCode code, const std::string &msg)
{
	api::Response resp;
	set_error(resp, code, msg);
	answer(waiting, resp);
}

} // namespace

void set_error(api::Response &resp, api::ErrorCode code, const std::string &message)
{
	resp.mutable_error()->set_code(code);
	resp.mutable_error()->set_message(message);
}

CollectiveGroups::CollectiveGroups(boost::asio::io_context &io, backend::DeviceBackend &devices, TenantLookup lookup,
				   InferenceLoadOf inference)
	: io_(io), lookup_(std::move(lookup)), runner_(io, devices, std::move(inference))
{
}

CollectiveGroups::~CollectiveGroups() = default;

bool CollectiveGroups::inference_member(const Member &m) const
{
	const Tenant *t = lookup_(m.tenant);
	return t && t->pool() == sched::Pool::Inference;
}

std::string CollectiveGroups::check_join(const Tenant &channel, const api::CollectiveJoin &req, const Tenant **member) const
{
	if (req.group().empty() || req.group().size() > kMaxNameBytes)
		return "group name must be 1.." + std::to_string(kMaxNameBytes) + " bytes";
	if (req.secret().size() < kMinSecret || req.secret().size() > kMaxSecret)
		return "secret must be " + std::to_string(kMinSecret) + ".." + std::to_string(kMaxSecret) + " bytes";
	if (req.world_size() < 1 || req.world_size() > kMaxWorld)
		return "world_size " + std::to_string(req.world_size()) + " is outside 1.." + std::to_string(kMaxWorld);
	if (req.rank() >= req.world_size())
		return "rank " + std::to_string(req.rank()) + " is not below world_size " + std::to_string(req.world_size());
	if (req.timeout_ms() < 1 || req.timeout_ms() > kMaxTimeoutMs)
		return "timeout_ms " + std::to_string(req.timeout_ms()) + " is outside 1.." + std::to_string(kMaxTimeoutMs);
	const Tenant *t = lookup_(req.tenant_id());
	// The same answer for "no such tenant" and "not yours": ids of other users'
	// tenants are not confirmed.
	if (!t || t->observer || t->peer().pid != channel.peer().pid || t->peer().uid != channel.peer().uid)
		return "tenant " + std::to_string(req.tenant_id()) +
		       " is not a tenant of the calling process (a member joins for its own process's tenant)";
	if (!t->context())
		return "tenant " + std::to_string(req.tenant_id()) + " has no device context";
	*member = t;
	return {};
}

void CollectiveGroups::join(const Tenant &channel, const api::CollectiveJoin &req, Reply reply)
{
	std::optional<Reply> waiting(std::move(reply));
	const Tenant *member = nullptr;
	if (auto why = check_join(channel, req, &member); !why.empty())
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT, "CollectiveJoin: " + why);
	Group *g = nullptr;
	for (auto &[id, candidate] : groups_) {
		if (candidate.name == req.group() && !candidate.formed && candidate.broken.empty())
			g = &candidate;
		for (const auto &m : candidate.members) {
			// A channel serves one group (which bounds the groups by connections);
			// a tenant may be in several groups, as one rank of each.
			if (m && !m->gone && m->channel == channel.id())
				return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
						    "CollectiveJoin: this connection is already a member of group '" +
							    candidate.name + "' (open one connection per group)");
			if (m && !m->gone && m->tenant == member->id() && g == &candidate)
				return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
						    "CollectiveJoin: tenant " + std::to_string(member->id()) +
							    " is already a rank of group '" + req.group() + "'");
		}
	}
	if (!g) {
		const uint64_t id = next_group_++;
		g = &groups_[id];
		g->id = id;
		g->name = req.group();
		g->secret = req.secret();
		g->timeout_ms = req.timeout_ms();
		g->members.resize(req.world_size());
		g->timer = std::make_unique<boost::asio::steady_timer>(io_);
		start_timer(*g, "the join");
	} else if (!same_secret(g->secret, req.secret())) {
		return answer_error(waiting, api::ERROR_PERMISSION_DENIED,
				    "CollectiveJoin: wrong secret for group '" + req.group() + "'");
	} else if (g->members.size() != req.world_size() || g->timeout_ms != req.timeout_ms()) {
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
				    "CollectiveJoin: group '" + req.group() + "' has world_size " +
					    std::to_string(g->members.size()) + " and timeout " + std::to_string(g->timeout_ms) +
					    " ms; this join says " + std::to_string(req.world_size()) + " and " +
					    std::to_string(req.timeout_ms()));
	} else if (g->members[req.rank()]) {
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
				    "CollectiveJoin: rank " + std::to_string(req.rank()) + " of group '" + req.group() +
					    "' has joined already");
	}
	g->members[req.rank()] = Member{channel.id(), member->id(), member->context(), member->peer().pid, false,
					std::move(waiting), std::nullopt, 0, 0, nullptr, {}};
	NLOG_INFO("collective.join", member->log_fields() + " group=" + std::to_string(g->id) + " rank=" +
					     std::to_string(req.rank()) + "/" + std::to_string(req.world_size()));
	if (std::any_of(g->members.begin(), g->members.end(), [](const auto &m) { return !m; }))
		return;
	g->formed = true;
	g->timer->cancel();
	for (auto &m : g->members) {
		api::Response resp;
		resp.mutable_collective_join()->set_group_id(g->id);
		answer(m->waiting, resp);
	}
}

CollectiveGroups::Group *CollectiveGroups::group_of_channel(uint64_t group_id, uint64_t channel, uint32_t *rank)
{
	auto it = groups_.find(group_id);
	if (it == groups_.end() || !it->second.formed)
		return nullptr;
	for (uint32_t r = 0; r < it->second.members.size(); ++r)
		if (it->second.members[r]->channel == channel) {
			*rank = r;
			return &it->second;
		}
	return nullptr;
}

void CollectiveGroups::run(const Tenant &channel, const api::CollectiveRun &req, Reply reply)
{
	std::optional<Reply> waiting(std::move(reply));
	uint32_t rank = 0;
	Group *g = group_of_channel(req.group_id(), channel.id(), &rank);
	if (!g)
		return answer_error(waiting, api::ERROR_NOT_FOUND,
				    "CollectiveRun: group " + std::to_string(req.group_id()) +
					    " does not exist or this connection did not join it");
	if (!g->broken.empty())
		return answer_error(waiting, api::ERROR_ABORTED, "CollectiveRun: group '" + g->name + "' is broken: " + g->broken);
	Member &m = *g->members[rank];
	if (m.waiting || req.seq() != g->seq)
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
				    "CollectiveRun: rank " + std::to_string(rank) + " sent seq " + std::to_string(req.seq()) +
					    " but the group is at collective " + std::to_string(g->seq) +
					    (m.waiting ? " and this rank's previous run is still waiting" : ""));
	if (auto why = check_collective_spec(req, static_cast<uint32_t>(g->members.size())); !why.empty())
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT, "CollectiveRun: " + why);
	m.waiting = std::move(waiting);
	m.arrived = req;
	arrive(*g, rank);
}

void CollectiveGroups::p2p(const Tenant &channel, const api::CollectiveP2P &req, Reply reply)
{
	std::optional<Reply> waiting(std::move(reply));
	uint32_t rank = 0;
	Group *g = group_of_channel(req.group_id(), channel.id(), &rank);
	if (!g)
		return answer_error(waiting, api::ERROR_NOT_FOUND,
				    "CollectiveP2P: group " + std::to_string(req.group_id()) +
					    " does not exist or this connection did not join it");
	if (!g->broken.empty())
		return answer_error(waiting, api::ERROR_ABORTED, "CollectiveP2P: group '" + g->name + "' is broken: " + g->broken);
	Member &m = *g->members[rank];
	if (m.waiting)
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
				    "CollectiveP2P: rank " + std::to_string(rank) + "'s previous request is still waiting");
	if (req.ops_size() < 1 || req.ops_size() > kMaxP2POps)
		return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
				    "CollectiveP2P: " + std::to_string(req.ops_size()) + " ops; a batch holds 1.." +
					    std::to_string(kMaxP2POps));
	const uint32_t world = static_cast<uint32_t>(g->members.size());
	for (int i = 0; i < req.ops_size(); ++i)
		if (auto why = check_p2p_op(req.ops(i), rank, world); !why.empty())
			return answer_error(waiting, api::ERROR_INVALID_ARGUMENT,
					    "CollectiveP2P op " + std::to_string(i) + " of rank " + std::to_string(rank) + ": " + why);
	m.waiting = std::move(waiting);
	m.p2p_left = static_cast<uint32_t>(req.ops_size());
	m.p2p_sources.assign(static_cast<size_t>(req.ops_size()), 0);
	for (int i = 0; i < req.ops_size(); ++i)
		m.p2p_sources[i] = req.ops(i).peer();
	++m.p2p_batch;
	if (!m.p2p_timer)
		m.p2p_timer = std::make_shared<boost::asio::steady_timer>(io_);
	m.p2p_timer->expires_after(std::chrono::milliseconds(g->timeout_ms));
	m.p2p_timer->async_wait([this, id = g->id, rank, batch = m.p2p_batch](const boost::system::error_code &ec) {
		if (!ec)
			p2p_timed_out(id, rank, batch);
	});
	const uint64_t id = g->id;
	for (int i = 0; i < req.ops_size(); ++i) {
		auto it = groups_.find(id);
		if (it == groups_.end() || !it->second.broken.empty())
			return; // a mismatch broke it: every waiting member heard why
		post(it->second, rank, req.ops(i), static_cast<uint32_t>(i));
	}
}

void CollectiveGroups::post(Group &g, uint32_t rank, const api::P2POp &op, uint32_t index)
{
	// Matching is by (sender, receiver, tag) in posting order, as MPI and NCCL do;
	// a recv from any source takes the oldest send to its member with its tag.
	auto match = std::find_if(g.posted.begin(), g.posted.end(), [&](const Posted &p) {
		if (p.op.send() == op.send() || p.op.tag() != op.tag())
			return false;
		const bool p_from_me = p.op.any_source() || p.op.peer() == rank;   // p names me (or anyone)
		const bool me_from_p = op.any_source() || op.peer() == p.rank;     // I name p (or anyone)
		return p_from_me && me_from_p && p.rank != rank;
	});
	if (match == g.posted.end()) {
		g.posted.push_back(Posted{rank, op, index});
		return;
	}
	const Posted other = *match;
	g.posted.erase(match);
	const api::P2POp &send = op.send() ? op : other.op;
	const api::P2POp &recv = op.send() ? other.op : op;
	const uint32_t from = op.send() ? rank : other.rank, to = op.send() ? other.rank : rank;
	// The receiver learns who sent (an any_source recv names no peer).
	if (op.send())
		g.members[to]->p2p_sources[other.index] = from;
	else
		g.members[to]->p2p_sources[index] = from;
	if (send.dtype() != recv.dtype() || send.count() != recv.count())
		return break_group(g, api::ERROR_INVALID_ARGUMENT,
				   "point-to-point in group '" + g.name + "': rank " + std::to_string(to) + "'s recv from rank " +
					   std::to_string(from) + " (tag " + std::to_string(recv.tag()) + ") expects " +
					   std::to_string(recv.count()) + " elements of " + dtype_name(recv.dtype()) +
					   ", but rank " + std::to_string(from) + "'s send has " + std::to_string(send.count()) +
					   " elements of " + dtype_name(send.dtype()) + "; nothing moved");
	CollectiveJob job;
	job.copies.push_back(CollectiveCopy{CollectiveOperand{g.members[from]->ctx, send.device(), send.address(), 0},
					    CollectiveOperand{g.members[to]->ctx, recv.device(), 0, recv.address()}, from,
					    to, send.count() * collective_element_size(send.dtype())});
	job.yields = !inference_member(*g.members[from]) && !inference_member(*g.members[to]);
	job.done = [this, id = g.id, from, to](int bad_rank, const std::string &error) {
		copied(id, from, to, bad_rank, error);
	};
	++g.copies;
	runner_.submit(std::move(job));
}

void CollectiveGroups::copied(uint64_t group_id, uint32_t from, uint32_t to, int bad_rank, const std::string &error)
{
	auto it = groups_.find(group_id);
	if (it == groups_.end())
		return;
	Group &g = it->second;
	--g.copies;
	if (!g.broken.empty()) {
		if (!busy(g))
			break_group(g, g.broken_code, g.broken); // it waited for the copies to end
		return;
	}
	if (bad_rank >= 0)
		return break_group(g, api::ERROR_INVALID_ARGUMENT,
				   "point-to-point from rank " + std::to_string(from) + " to rank " + std::to_string(to) +
					   " moved no data: rank " + std::to_string(bad_rank) + "'s buffer was refused: " + error);
	if (!error.empty())
		return break_group(g, api::ERROR_INTERNAL,
				   "point-to-point from rank " + std::to_string(from) + " to rank " + std::to_string(to) +
					   " failed on the device: " + error);
	for (uint32_t r : {from, to}) {
		Member &m = *g.members[r];
		if (m.p2p_left > 0 && --m.p2p_left == 0) {
			m.p2p_timer->cancel();
			answer_p2p(m);
		}
	}
}

void CollectiveGroups::answer_p2p(Member &m)
{
	api::Response resp;
	for (uint32_t s : m.p2p_sources)
		resp.mutable_collective_p2p()->add_sources(s);
	if (m.p2p_sources.empty())
		resp.mutable_ok();
	answer(m.waiting, resp);
}

void CollectiveGroups::p2p_timed_out(uint64_t group_id, uint32_t rank, uint64_t batch)
{
	auto it = groups_.find(group_id);
	if (it == groups_.end())
		return;
	Group &g = it->second;
	const Member &m = *g.members[rank];
	if (!g.broken.empty() || m.p2p_batch != batch || m.p2p_left == 0)
		return;
	std::string reason = "point-to-point of group '" + g.name + "' timed out after " + std::to_string(g.timeout_ms) + " ms: ";
	auto mine = std::find_if(g.posted.begin(), g.posted.end(), [&](const Posted &p) { return p.rank == rank; });
	if (mine != g.posted.end())
		reason += "rank " + std::to_string(rank) + "'s " + describe(mine->op) + " was not matched: " +
			  (mine->op.any_source() ? std::string("no rank") : "rank " + std::to_string(mine->op.peer())) +
			  " did not post the " + (mine->op.send() ? "recv" : "send");
	else
		reason += "rank " + std::to_string(rank) + "'s matched copies did not finish";
	NLOG_WARN("collective.timeout", "group=" + std::to_string(g.id) + " p2p rank=" + std::to_string(rank));
	break_group(g, api::ERROR_DEADLINE_EXCEEDED, reason);
}

void CollectiveGroups::arrive(Group &g, uint32_t rank)
{
	const api::CollectiveRun &mine = *g.members[rank]->arrived;
	for (uint32_t r = 0; r < g.members.size(); ++r) {
		const auto &other = g.members[r]->arrived;
		if (other && r != rank && !same_collective(*other, mine))
			return break_group(g, api::ERROR_ABORTED,
					   "collective " + std::to_string(g.seq) + " differs between ranks: rank " +
						   std::to_string(r) + " called " + describe(*other) + ", rank " +
						   std::to_string(rank) + " called " + describe(mine));
	}
	const auto arrived = std::count_if(g.members.begin(), g.members.end(), [](const auto &m) { return m->arrived.has_value(); });
	if (arrived == 1)
		start_timer(g, std::string(collective_name(mine.op())) + " #" + std::to_string(g.seq));
	if (static_cast<size_t>(arrived) == g.members.size())
		launch(g);
}

void CollectiveGroups::start_timer(Group &g, const std::string &what)
{
	g.timer->expires_after(std::chrono::milliseconds(g.timeout_ms));
	g.timer->async_wait([this, id = g.id, what, seq = g.seq](const boost::system::error_code &ec) {
		if (ec)
			return; // cancelled: everyone arrived
		auto it = groups_.find(id);
		if (it != groups_.end() && it->second.seq == seq && !it->second.running)
			timed_out(id, what);
	});
}

std::string CollectiveGroups::missing_ranks(const Group &g, bool for_join) const
{
	std::string out;
	for (uint32_t r = 0; r < g.members.size(); ++r) {
		const bool missing = for_join ? !g.members[r] : !g.members[r]->arrived;
		if (missing)
			out += (out.empty() ? "" : ", ") + std::to_string(r);
	}
	return out;
}

void CollectiveGroups::timed_out(uint64_t group_id, const std::string &what)
{
	Group &g = groups_.at(group_id);
	if (!g.broken.empty())
		return;
	const std::string missing = missing_ranks(g, !g.formed);
	const std::string reason = what + " of group '" + g.name + "' timed out after " + std::to_string(g.timeout_ms) +
				   " ms: rank(s) " + missing + " did not " + (g.formed ? "arrive" : "join");
	NLOG_WARN("collective.timeout", "group=" + std::to_string(g.id) + " missing=" + quoted(missing));
	break_group(g, api::ERROR_DEADLINE_EXCEEDED, reason);
}

void CollectiveGroups::launch(Group &g)
{
	g.timer->cancel();
	g.running = true;
	CollectiveJob job;
	job.spec = *g.members[0]->arrived;
	for (auto &m : g.members) {
		const auto &a = *m->arrived;
		job.members.push_back(CollectiveOperand{m->ctx, a.device(), a.input(), a.output()});
		job.yields = job.yields && !inference_member(*m);
	}
	job.done = [this, id = g.id](int bad_rank, const std::string &error) { finished(id, bad_rank, error); };
	runner_.submit(std::move(job));
}

void CollectiveGroups::finished(uint64_t group_id, int bad_rank, const std::string &error)
{
	auto it = groups_.find(group_id);
	if (it == groups_.end())
		return;
	Group &g = it->second;
	g.running = false;
	const std::string what = std::string(collective_name(g.members[0]->arrived->op())) + " #" + std::to_string(g.seq);
	++g.seq;
	for (uint32_t r = 0; r < g.members.size(); ++r) {
		Member &m = *g.members[r];
		m.arrived.reset();
		api::Response resp;
		if (bad_rank < 0 && error.empty())
			resp.mutable_ok();
		else if (bad_rank < 0) // the device failed it: the receive buffers hold what they hold
			set_error(resp, api::ERROR_INTERNAL, what + " failed on the device: " + error);
		else if (static_cast<uint32_t>(bad_rank) == r)
			set_error(resp, api::ERROR_INVALID_ARGUMENT, what + ": " + error);
		else
			set_error(resp, api::ERROR_INVALID_ARGUMENT,
				  what + " moved no data: rank " + std::to_string(bad_rank) + "'s operands were refused: " + error);
		answer(m.waiting, resp);
	}
	if (!g.broken.empty() && !busy(g))
		break_group(g, g.broken_code, g.broken); // answers whoever else waits, frees
}

void CollectiveGroups::break_group(Group &g, api::ErrorCode code, const std::string &reason)
{
	if (g.broken.empty()) {
		g.broken = reason;
		g.broken_code = code;
	}
	g.timer->cancel();
	// A run or copies in flight finish (their memory is locked); finished() and
	// copied() answer, then call here again.
	if (busy(g))
		return;
	g.posted.clear();
	for (auto &m : g.members)
		if (m) {
			m->arrived.reset();
			m->p2p_left = 0;
			if (m->p2p_timer)
				m->p2p_timer->cancel();
			answer_error(m->waiting, code, reason);
		}
	maybe_free(g.id);
}

void CollectiveGroups::session_gone(uint64_t session_id)
{
	std::vector<uint64_t> ids;
	for (auto &[id, g] : groups_)
		ids.push_back(id);
	for (uint64_t id : ids) {
		auto it = groups_.find(id);
		if (it == groups_.end())
			continue;
		Group &g = it->second;
		for (uint32_t r = 0; r < g.members.size(); ++r) {
			auto &m = g.members[r];
			if (!m || m->gone || (m->channel != session_id && m->tenant != session_id))
				continue;
			m->gone = true;
			m->waiting.reset(); // its connection is closing
			NLOG_INFO("collective.leave", "group=" + std::to_string(g.id) + " rank=" + std::to_string(r));
			break_group(g, api::ERROR_ABORTED,
				    "rank " + std::to_string(r) + " (pid " + std::to_string(m->pid) + ") of group '" + g.name +
					    "' left: its process exited or disconnected");
			break;
		}
	}
}

void CollectiveGroups::maybe_free(uint64_t group_id)
{
	auto it = groups_.find(group_id);
	if (it == groups_.end() || busy(it->second) || it->second.broken.empty())
		return;
	// A member still connected may ask again and should hear why; the group goes
	// once all have left, or at once if none is waiting on a formed group.
	for (auto &m : it->second.members)
		if (m && !m->gone)
			return;
	NLOG_INFO("collective.free", "group=" + std::to_string(group_id));
	groups_.erase(it);
}

} // namespace neuron::daemon
