// neuronctl's text output: tables for people (the --json forms are for scripts).
#pragma once

#include <neuron.pb.h>

#include <ostream>

void print_pools(std::ostream &out, const neuron::api::CapacityReply &cap);
void print_loans(std::ostream &out, const neuron::api::CapacityReply &cap);
void print_loan_line(std::ostream &out, const neuron::api::LoanInfo &l, bool lent);
void print_policy(std::ostream &out, const neuron::api::PolicyConfig &p);
void print_tenants(std::ostream &out, const neuron::api::ListTenantsReply &t);
// The per-tenant limits of each pool and limit class (part of `pools`).
void print_limits(std::ostream &out, const neuron::api::CapacityReply &cap);
void print_event(std::ostream &out, const neuron::api::Event &e);
