// execute(): checks that the resolved views agree with the (already checked)
// command, then dispatches to the op family's kernel. Also the small tables.
#include "dtype.h"
#include "kernels.h"
#include "ops.h"

#include <cstring>

namespace neuron::kernels {

size_t dtype_size(uint8_t dtype)
{
	switch (dtype) {
	case NEURON_DTYPE_F32:
	case NEURON_DTYPE_I32:
		return 4;
	case NEURON_DTYPE_BF16:
	case NEURON_DTYPE_F16:
		return 2;
	case NEURON_DTYPE_I64:
		return 8;
	case NEURON_DTYPE_BOOL:
	case NEURON_DTYPE_U8:
		return 1;
	default:
		return 0;
	}
}

const char *dtype_name(uint8_t dt)
{
	static const char *const names[NEURON_DTYPE_COUNT_] = {"invalid", "f32", "bf16", "f16", "i32", "i64", "bool", "u8"};
	return dt < NEURON_DTYPE_COUNT_ ? names[dt] : "invalid";
}

bool output_may_alias_inputs(neuron_opcode op)
{
	switch (op) {
	case NEURON_OP_FILL:
	case NEURON_OP_COPY:
	case NEURON_OP_ADD:
	case NEURON_OP_SUB:
	case NEURON_OP_MUL:
	case NEURON_OP_DIV:
	case NEURON_OP_ADD_SCALAR:
	case NEURON_OP_SUB_SCALAR:
	case NEURON_OP_MUL_SCALAR:
	case NEURON_OP_DIV_SCALAR:
	case NEURON_OP_RELU:
	case NEURON_OP_GELU:
	case NEURON_OP_SILU:
	case NEURON_OP_TANH:
	case NEURON_OP_EXP:
	case NEURON_OP_UNARY_MATH:
	case NEURON_OP_BINARY_MATH:
	case NEURON_OP_WHERE:
	case NEURON_OP_POINTWISE:
		// Element i of the output depends only on element i of each input, and
		// every kernel reads an element (or a block of them) before writing it.
		return true;
	default:
		return false;
	}
}

namespace detail {

Fault exec_fault(std::string message) { return Fault{NEURON_FAULT_EXEC, std::move(message)}; }

} // namespace detail

namespace {

// Cheap (no allocation unless it fails): runs before every command.
std::optional<Fault> check_view(const neuron_tensor_desc &d, const View &v, int k)
{
	const char *problem = nullptr;
	if (v.dtype != d.dtype || v.ndim != d.ndim || v.ndim > NEURON_MAX_DIMS ||
	    std::memcmp(v.sizes, d.sizes, sizeof(int64_t) * static_cast<size_t>(v.ndim)) != 0 ||
	    std::memcmp(v.strides, d.strides, sizeof(int64_t) * static_cast<size_t>(v.ndim)) != 0) {
		problem = ": resolved view does not match its descriptor";
	} else {
		bool empty = false;
		for (int i = 0; i < v.ndim; ++i)
			empty = empty || v.sizes[i] == 0;
		if (empty)
			return std::nullopt;
		if (v.data == nullptr)
			problem = ": resolved to a null pointer";
		else if (reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype) != 0)
			// Kernels access elements through typed pointers on their fast paths.
			problem = ": host pointer not aligned to its element size";
	}
	if (!problem)
		return std::nullopt;
	return detail::exec_fault("operand " + std::to_string(k) + problem);
}

} // namespace

std::optional<Fault> execute(const neuron_cmd &cmd, std::span<const View> views, int max_threads, GemmPacks *packs)
{
	const int arity = cmd.num_operands; // check_semantics matched it to the opcode
	if (op_arity(cmd.opcode) < 0 || cmd.opcode == NEURON_OP_EXEC_PROGRAM)
		return detail::exec_fault("execute: opcode " + std::to_string(cmd.opcode) + " is not a kernel");
	if (views.size() != static_cast<size_t>(arity))
		return detail::exec_fault("execute: " + std::to_string(views.size()) + " views for " +
					  op_name(cmd.opcode) + " with " + std::to_string(arity) + " operands");
	for (int k = 0; k < arity; ++k)
		if (auto f = check_view(cmd.operands[k], views[static_cast<size_t>(k)], k))
			return f;
	max_threads = std::max(1, max_threads);

	switch (cmd.opcode) {
	case NEURON_OP_NOP:
		return std::nullopt;
	case NEURON_OP_FILL:
		return detail::run_fill(cmd, views[0], max_threads);
	case NEURON_OP_COPY:
		return detail::run_copy(views[0], views[1], max_threads);
	case NEURON_OP_MATMUL:
		return detail::run_matmul(cmd, views, max_threads, packs);
	case NEURON_OP_SUM:
	case NEURON_OP_MEAN:
	case NEURON_OP_AMAX:
		return detail::run_reduce(cmd, views[0], views[1], max_threads);
	case NEURON_OP_SOFTMAX:
		return detail::run_softmax(cmd, views[0], views[1], max_threads);
	case NEURON_OP_UNARY_MATH:
		return detail::run_unary_math(cmd, views, max_threads);
	case NEURON_OP_BINARY_MATH:
		return detail::run_binary_math(cmd, views, max_threads);
	case NEURON_OP_COMPARE:
	case NEURON_OP_COMPARE_SCALAR:
		return detail::run_compare(cmd, views, max_threads);
	case NEURON_OP_WHERE:
		return detail::run_where(views, max_threads);
	case NEURON_OP_LOG_SOFTMAX:
		return detail::run_log_softmax(cmd, views[0], views[1], max_threads);
	case NEURON_OP_INDEX_SELECT:
		return detail::run_index_select(cmd, views, max_threads);
	case NEURON_OP_INDEX_ADD:
		return detail::run_index_add(cmd, views, max_threads);
	case NEURON_OP_GATHER:
		return detail::run_gather(cmd, views, max_threads);
	case NEURON_OP_SCATTER_ADD:
		return detail::run_scatter_add(cmd, views, max_threads);
	case NEURON_OP_INDEX_COPY:
		return detail::run_index_copy(cmd, views, max_threads);
	case NEURON_OP_SCATTER:
		return detail::run_scatter(cmd, views, max_threads);
	case NEURON_OP_ADAM_STEP:
		return detail::run_adam_step(cmd, views, max_threads);
	case NEURON_OP_ARG_REDUCE:
		return detail::run_arg_reduce(cmd, views[0], views[1], max_threads);
	case NEURON_OP_RNG:
		return detail::run_rng(cmd, views[0], max_threads);
	case NEURON_OP_DROPOUT:
		return detail::run_dropout(cmd, views, max_threads);
	case NEURON_OP_RANDPERM:
		return detail::run_randperm(cmd, views[0], max_threads);
	case NEURON_OP_MULTINOMIAL:
		return detail::run_multinomial(cmd, views, max_threads);
	case NEURON_OP_TIMESTAMP:
		return detail::run_timestamp(views[0]);
	case NEURON_OP_AMP_UNSCALE:
		return detail::run_amp_unscale(cmd, views, max_threads);
	case NEURON_OP_AMP_UPDATE_SCALE:
		return detail::run_amp_update_scale(cmd, views, max_threads);
	case NEURON_OP_SCAN:
		return detail::run_scan(cmd, views, max_threads);
	case NEURON_OP_SORT:
		return detail::run_sort(cmd, views, max_threads);
	case NEURON_OP_ATTENTION:
		return detail::run_attention(cmd, views, max_threads);
	case NEURON_OP_LU:
		return detail::run_lu(cmd, views, max_threads);
	case NEURON_OP_PERMUTATION:
		return detail::run_permutation(cmd, views, max_threads);
	case NEURON_OP_CHOLESKY:
		return detail::run_cholesky(cmd, views, max_threads);
	case NEURON_OP_TRIANGULAR_SOLVE:
		return detail::run_triangular_solve(cmd, views, max_threads);
	case NEURON_OP_GEQRF:
		return detail::run_geqrf(cmd, views, max_threads);
	case NEURON_OP_ORGQR:
		return detail::run_orgqr(cmd, views, max_threads);
	case NEURON_OP_EIGH:
		return detail::run_eigh(cmd, views, max_threads);
	case NEURON_OP_SVD:
		return detail::run_svd(cmd, views, max_threads);
	case NEURON_OP_POINTWISE:
		return detail::run_pointwise(cmd, views, max_threads);
	case NEURON_OP_MATMUL_EPILOGUE:
		return detail::run_matmul_epilogue(cmd, views, max_threads, packs);
	case NEURON_OP_LAYER_NORM:
		return detail::run_layer_norm(cmd, views, max_threads);
	case NEURON_OP_LAYER_NORM_BACKWARD:
		return detail::run_layer_norm_backward(cmd, views, max_threads);
	case NEURON_OP_LAYER_NORM_PARAM_GRAD:
		return detail::run_layer_norm_param_grad(cmd, views, max_threads);
	case NEURON_OP_TILE_KERNEL: // its steps run on the core's engines (runtime/tile), never here
		return Fault{NEURON_FAULT_BAD_OPCODE, "tile_kernel runs only as a node of a program"};
	default:
		return detail::run_elementwise(cmd, views, max_threads);
	}
}

} // namespace neuron::kernels
