// Collective groups (contracts/neuron.proto, CollectiveJoin): the registry of the
// groups that ranks of distributed jobs formed, their rendezvous, the collectives
// each is collecting, timeouts, and what happens when a member goes away.
//
// A member is a pair: the tenant whose device memory the collectives use, and the
// channel session (an observer connection of the same process) whose requests wait
// for the peers. Replies to those requests are deferred: a Reply is called (once)
// on the control thread when the join or run finished, failed or timed out.
//
// Threads: every method on the control thread; the data movement runs on the
// CollectiveRunner's thread (collective_run.h), which sees only the job it got.
#pragma once

#include "collective_run.h"
#include "tenant.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace neuron::daemon {

class CollectiveGroups {
public:
	// Sends the response to the request it answers (the caller set its body).
	using Reply = std::function<void(api::Response &)>;
	// Finds a live, greeted tenant by id (null if none): the owner of the members.
	using TenantLookup = std::function<const Tenant *(uint64_t tenant_id)>;

	// devices: whose mover moves the data; inference: what the runner yields to
	// (collective_run.h).
	CollectiveGroups(boost::asio::io_context &io, backend::DeviceBackend &devices, TenantLookup lookup,
			 InferenceLoadOf inference);
	~CollectiveGroups();

	void join(const Tenant &channel, const api::CollectiveJoin &req, Reply reply);
	void run(const Tenant &channel, const api::CollectiveRun &req, Reply reply);
	void p2p(const Tenant &channel, const api::CollectiveP2P &req, Reply reply);
	// A session ended (either a member's channel or a member tenant): its groups break.
	void session_gone(uint64_t session_id);
	size_t group_count() const { return groups_.size(); }

private:
	struct Member {
		uint64_t channel = 0; // session id of the connection that joined
		uint64_t tenant = 0;  // session id of the tenant whose memory is used
		std::shared_ptr<backend::TenantContext> ctx;
		pid_t pid = 0;
		bool gone = false;
		std::optional<Reply> waiting; // its join or run, not answered yet
		std::optional<api::CollectiveRun> arrived; // its run at the group's seq
		// Its CollectiveP2P (answered in `waiting`): ops not yet moved, and a
		// timer for its oldest unmatched op.
		uint32_t p2p_left = 0;
		uint64_t p2p_batch = 0; // which batch the timer is for
		std::shared_ptr<boost::asio::steady_timer> p2p_timer;
		std::vector<uint32_t> p2p_sources; // per op of the batch: its peer (the sender, for any_source)
	};
	// A posted, unmatched point-to-point op of a member.
	struct Posted {
		uint32_t rank = 0;
		api::P2POp op;
		uint32_t index = 0; // in its member's batch
	};
	struct Group {
		uint64_t id = 0;
		std::string name;
		std::string secret;
		uint32_t timeout_ms = 0;
		std::vector<std::optional<Member>> members; // by rank
		bool formed = false;
		bool running = false;  // the runner holds the collective of seq
		uint64_t seq = 0;      // the collective being collected
		std::string broken;    // why it takes no more work ("" while healthy)
		api::ErrorCode broken_code = api::ERROR_ABORTED;
		std::vector<Posted> posted; // in posting order
		uint32_t copies = 0;   // point-to-point jobs the runner holds
		std::unique_ptr<boost::asio::steady_timer> timer;
	};

	std::string check_join(const Tenant &channel, const api::CollectiveJoin &req, const Tenant **member) const;
	// Whether the member's tenant is an inference tenant (its collectives do not yield).
	bool inference_member(const Member &m) const;
	Group *group_of_channel(uint64_t group_id, uint64_t channel, uint32_t *rank);
	void arrive(Group &g, uint32_t rank);
	void start_timer(Group &g, const std::string &what);
	void timed_out(uint64_t group_id, const std::string &what);
	void launch(Group &g);
	void finished(uint64_t group_id, int bad_rank, const std::string &error);
	// A member posts one op: it matches the oldest compatible op of its peer or waits.
	void post(Group &g, uint32_t rank, const api::P2POp &op, uint32_t index);
	void p2p_timed_out(uint64_t group_id, uint32_t rank, uint64_t batch);
	void copied(uint64_t group_id, uint32_t from, uint32_t to, int bad_rank, const std::string &error);
	void answer_p2p(Member &m);
	bool busy(const Group &g) const { return g.running || g.copies > 0; }
	// Breaks the group: every member still waiting gets `code` with the reason.
	void break_group(Group &g, api::ErrorCode code, const std::string &reason);
	// Erases the group once it is broken, not running, and no member is connected.
	void maybe_free(uint64_t group_id);
	std::string missing_ranks(const Group &g, bool for_join) const;

	boost::asio::io_context &io_;
	TenantLookup lookup_;
	CollectiveRunner runner_;
	std::map<uint64_t, Group> groups_;
	uint64_t next_group_ = 1;
};

// Fails resp with code and message (the body the deferred replies carry).
void set_error(api::Response &resp, api::ErrorCode code, const std::string &message);

} // namespace neuron::daemon
