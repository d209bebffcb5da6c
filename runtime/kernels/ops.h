// Entry points of the per-family kernels, called by execute() after dispatch.
// Each gets views already checked against the command (shape, dtype, alignment).
#pragma once

#include "kernels.h"

#include <optional>
#include <span>

namespace neuron::kernels::detail {

using Result = std::optional<Fault>;

Result run_fill(const neuron_cmd &cmd, const View &out, int max_threads);           // copy.cpp
Result run_copy(const View &out, const View &in, int max_threads);                  // copy.cpp
Result run_elementwise(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // elementwise.cpp
Result run_matmul(const neuron_cmd &cmd, std::span<const View> v, int max_threads, GemmPacks *packs); // matmul.cpp
Result run_reduce(const neuron_cmd &cmd, const View &out, const View &in, int max_threads); // reduce.cpp
Result run_softmax(const neuron_cmd &cmd, const View &out, const View &in, int max_threads); // softmax.cpp

// ISA 1.1
Result run_unary_math(const neuron_cmd &cmd, std::span<const View> v, int max_threads);  // math.cpp
Result run_binary_math(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // math.cpp
Result run_compare(const neuron_cmd &cmd, std::span<const View> v, int max_threads);     // math.cpp
Result run_where(std::span<const View> v, int max_threads);                              // math.cpp
Result run_log_softmax(const neuron_cmd &cmd, const View &out, const View &in, int max_threads); // log_softmax.cpp
Result run_index_select(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // indexing.cpp
Result run_index_add(const neuron_cmd &cmd, std::span<const View> v, int max_threads);    // indexing.cpp
Result run_gather(const neuron_cmd &cmd, std::span<const View> v, int max_threads);       // indexing.cpp
Result run_scatter_add(const neuron_cmd &cmd, std::span<const View> v, int max_threads);  // indexing.cpp

// ISA 1.2
Result run_adam_step(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // optimizer.cpp
Result run_arg_reduce(const neuron_cmd &cmd, const View &out, const View &in, int max_threads); // arg_reduce.cpp

// ISA 1.3
Result run_index_copy(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // indexing.cpp
Result run_scatter(const neuron_cmd &cmd, std::span<const View> v, int max_threads);    // indexing.cpp

// ISA 1.4
Result run_rng(const neuron_cmd &cmd, const View &out, int max_threads);                 // random.cpp
Result run_dropout(const neuron_cmd &cmd, std::span<const View> v, int max_threads);     // random.cpp
Result run_randperm(const neuron_cmd &cmd, const View &out, int max_threads);            // random.cpp
Result run_multinomial(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // random.cpp
Result run_timestamp(const View &out);                                                    // amp.cpp
Result run_amp_unscale(const neuron_cmd &cmd, std::span<const View> v, int max_threads);  // amp.cpp
Result run_amp_update_scale(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // amp.cpp
Result run_scan(const neuron_cmd &cmd, std::span<const View> v, int max_threads);      // scan.cpp
Result run_sort(const neuron_cmd &cmd, std::span<const View> v, int max_threads);      // sort.cpp
Result run_attention(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // attention.cpp
Result run_lu(const neuron_cmd &cmd, std::span<const View> v, int max_threads);               // linalg.cpp
Result run_permutation(const neuron_cmd &cmd, std::span<const View> v, int max_threads);      // linalg.cpp
Result run_cholesky(const neuron_cmd &cmd, std::span<const View> v, int max_threads);         // linalg.cpp
Result run_triangular_solve(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // linalg.cpp
Result run_geqrf(const neuron_cmd &cmd, std::span<const View> v, int max_threads);            // linalg.cpp
Result run_orgqr(const neuron_cmd &cmd, std::span<const View> v, int max_threads);            // linalg.cpp
Result run_eigh(const neuron_cmd &cmd, std::span<const View> v, int max_threads);             // linalg.cpp
Result run_svd(const neuron_cmd &cmd, std::span<const View> v, int max_threads);              // linalg.cpp

// ISA 1.5
Result run_pointwise(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // pointwise_chain.cpp
Result run_layer_norm(const neuron_cmd &cmd, std::span<const View> v, int max_threads); // layer_norm.cpp
Result run_layer_norm_backward(const neuron_cmd &cmd, std::span<const View> v, int max_threads);
Result run_layer_norm_param_grad(const neuron_cmd &cmd, std::span<const View> v, int max_threads);
Result run_matmul_epilogue(const neuron_cmd &cmd, std::span<const View> v, int max_threads,
			   GemmPacks *packs); // matmul_epilogue.cpp

Fault exec_fault(std::string message);
// Before the first BLAS call: the CPU's kernel set, one OpenBLAS thread per call.
void prepare_blas(); // matmul.cpp

} // namespace neuron::kernels::detail
