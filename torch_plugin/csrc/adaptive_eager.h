// Adaptive eager (torch.neuron.set_adaptive_eager): eager code that repeats the
// same command sequence is recorded at the submission layer (below ATen, where
// every eager op ends as chip commands on a stream's core queue) and, once stable,
// replayed as programs registered with neurond.
//
// A *segment* is what a stream's core queue receives between two flush points:
// the places where the host needs the queue to hold everything issued so far (a
// host<->device copy, an event, a synchronize, a query, a torch.compile replay, a
// stream fault). Its canonical form (adaptive_eager.cpp) keeps every command's
// opcode, scalars, dtypes, sizes and strides, and names memory relative to
// *regions* (the merged byte ranges the commands touch), so the same loop step
// with tensors at other addresses has the same form. After `warmup` occurrences
// of one form it is registered as chunk programs (`chunk` commands each; buffer
// relative operands become program arguments).
//
// Next time a segment starts with a registered form's first command, commands are
// held back instead of submitted, each checked against the form as it arrives
// (same fields, addresses consistent with one binding per region); once a chunk is
// complete it goes as one EXEC_PROGRAM binding the regions' addresses of this
// iteration. A command that differs, a segment that ends early or regions that
// now overlap submit what was held back as plain commands, in order, and the
// segment carries on as plain eager: the device runs exactly the commands eager
// would have run, in the same order, and nothing starts before the host issued it.
// Host-side errors (shape, dtype checks) are raised by the op before it submits;
// device faults are raised at the next synchronization, as in plain eager, with
// the program node's label naming the op that submitted it.
#pragma once

#include "runtime.h"

#include <atomic>
#include <string>
#include <vector>

namespace torch_neuron {

extern std::atomic<bool> g_adaptive_on;
inline bool adaptive_on() { return g_adaptive_on.load(std::memory_order_relaxed); }

// submit_core's hook, with sq.mu held and the command's wait set: true if the
// command was held back for a replay (it is submitted later, by a program or as a
// plain command, before the stream's next flush point completes).
bool adaptive_take_locked(StreamQueues &sq, neuron_cmd &cmd);
// A flush point: everything issued on the stream is submitted when it returns
// (sq.mu held). Cheap when the stream has no adaptive state.
void adaptive_flush_locked(StreamQueues &sq);

} // namespace torch_neuron
