/* SPDX-License-Identifier: MIT */
/*
 * libneuron: point-to-point receives from any source (an addition to the
 * collective groups of <neuron/neuron.h>, in its own header so that programs not
 * using it do not depend on it).
 */
#ifndef NEURON_P2P_SOURCES_H
#define NEURON_P2P_SOURCES_H

#include <neuron/neuron.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* The peer of a recv that takes the oldest send to this rank with its tag, from
 * any rank (MPI_ANY_SOURCE). A send must name its receiver. */
#define NEURON_P2P_ANY_SOURCE 0xffffffffu

/* As neuron_group_p2p; sources (n entries, may be NULL) receives each op's peer:
 * for an any-source recv, the rank whose send it received. */
neuron_status neuron_group_p2p_sources(neuron_client *channel, uint64_t group_id, const struct neuron_p2p_op *ops,
				       size_t n, uint32_t *sources);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* NEURON_P2P_SOURCES_H */
