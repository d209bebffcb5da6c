// JSON forms of the capacity messages, shared by neuronctl --json and
// neuron-top --json so that scripts see one schema. Versioned: every top-level
// document carries "schema": "neuron-capacity/1"; fields are only ever added.
#pragma once

#include <neuron.pb.h>

#include <nlohmann/json.hpp>

namespace neuron::tools {

inline constexpr const char *kSchema = "neuron-capacity/1";

const char *pool_name(api::PoolKind p);
nlohmann::json to_json(const api::PoolInfo &p);
nlohmann::json to_json(const api::CoreInfo &c);
nlohmann::json to_json(const api::LoanInfo &l);
nlohmann::json to_json(const api::PolicyConfig &p);
nlohmann::json to_json(const api::TenantInfo &t);
nlohmann::json to_json(const api::Event &e);
nlohmann::json to_json(const api::CapacityReply &r);
// {"hbm_bytes": {"limit": N or null (unlimited), "source": "..."}, ...}
nlohmann::json to_json(const google::protobuf::RepeatedPtrField<api::ResourceLimit> &limits);

} // namespace neuron::tools
