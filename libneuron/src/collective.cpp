// Collective groups: join and run over a channel connection (neuron.h).
#include "internal.h"

#include <neuron/p2p_sources.h>

#include <cstring>

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;

extern "C" neuron_status neuron_group_join(neuron_client *c, uint64_t tenant_id, const char *group, const void *secret,
					   size_t secret_len, uint32_t rank, uint32_t world_size, uint32_t timeout_ms,
					   uint64_t *group_id)
{
	if (!c || !group || !secret || !group_id)
		return fail(NEURON_ERR_INVALID, "neuron_group_join: channel, group, secret and group_id must not be NULL");
	api::Request req;
	auto *j = req.mutable_collective_join();
	j->set_tenant_id(tenant_id);
	j->set_group(group);
	j->set_secret(static_cast<const char *>(secret), secret_len);
	j->set_rank(rank);
	j->set_world_size(world_size);
	j->set_timeout_ms(timeout_ms);
	api::Response resp;
	if (neuron_status s = call(c, req, &resp); s != NEURON_OK)
		return s;
	*group_id = resp.collective_join().group_id();
	return NEURON_OK;
}

extern "C" neuron_status neuron_group_run(neuron_client *c, uint64_t group_id, uint64_t seq,
					  const struct neuron_collective *coll)
{
	if (!c || !coll)
		return fail(NEURON_ERR_INVALID, "neuron_group_run: channel and coll must not be NULL");
	if (coll->reserved != 0)
		return fail(NEURON_ERR_INVALID, "neuron_group_run: reserved must be 0");
	api::Request req;
	auto *r = req.mutable_collective_run();
	r->set_group_id(group_id);
	r->set_seq(seq);
	r->set_op(static_cast<api::CollectiveOp>(coll->op));
	r->set_reduce(static_cast<api::ReduceOp>(coll->reduce));
	r->set_dtype(coll->dtype);
	r->set_count(coll->count);
	r->set_root(coll->root);
	r->set_device(coll->device);
	r->set_input(coll->input);
	r->set_output(coll->output);
	api::Response resp;
	return call(c, req, &resp);
}

extern "C" neuron_status neuron_group_p2p_sources(neuron_client *c, uint64_t group_id, const struct neuron_p2p_op *ops,
						 size_t n, uint32_t *sources)
{
	if (!c || (!ops && n))
		return fail(NEURON_ERR_INVALID, "neuron_group_p2p: channel and ops must not be NULL");
	api::Request req;
	auto *p = req.mutable_collective_p2p();
	p->set_group_id(group_id);
	for (size_t i = 0; i < n; ++i) {
		auto *op = p->add_ops();
		op->set_send(ops[i].send != 0);
		const bool any = ops[i].send == 0 && ops[i].peer == NEURON_P2P_ANY_SOURCE;
		op->set_any_source(any);
		op->set_peer(any ? 0 : ops[i].peer);
		op->set_tag(ops[i].tag);
		op->set_dtype(ops[i].dtype);
		op->set_count(ops[i].count);
		op->set_device(ops[i].device);
		op->set_address(ops[i].address);
	}
	api::Response resp;
	const neuron_status s = call(c, req, &resp);
	if (s != NEURON_OK || !sources)
		return s;
	for (size_t i = 0; i < n; ++i)
		sources[i] = resp.has_collective_p2p() && i < static_cast<size_t>(resp.collective_p2p().sources_size())
				     ? resp.collective_p2p().sources(static_cast<int>(i))
				     : ops[i].peer;
	return NEURON_OK;
}

extern "C" neuron_status neuron_group_p2p(neuron_client *c, uint64_t group_id, const struct neuron_p2p_op *ops, size_t n)
{
	return neuron_group_p2p_sources(c, group_id, ops, n, nullptr);
}
