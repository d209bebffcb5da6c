// neuron-top's screen, rendered as plain text lines so that the TUI, --once and the
// tmux-driven tests all show the same thing. Panes: core grid (devices x cores with
// utilisation, owner and lease state), memory per device and per tenant, tenants
// table, loans ledger; a tab bar (all + one tab per tenant) and a key line.
#pragma once

#include "model.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace neuron::top {

enum class SortKey { Id, Ops, Memory, P99 };
const char *sort_name(SortKey k);

struct ViewState {
	int tab = 0;          // 0: all; k: the k-th tenant (by id)
	SortKey sort = SortKey::Id;
	bool help = false;
	int width = 120;
};

std::vector<std::string> render(const Model &m, const ViewState &v, const std::string &socket);
nlohmann::json snapshot_json(const Model &m);

} // namespace neuron::top
