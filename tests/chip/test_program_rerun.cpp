// Which arguments and buffers a program replay must save before it runs so that
// a replay a restart interrupts can run again exactly (runtime/program/
// rerun_reads.h): exactly those it writes and may read before overwriting. Each
// case is a program small enough to reason about by hand; the expected flags are
// that reasoning, not the implementation's output.
#include <program/validate.h>

#include <criterion/criterion.h>

#include <string>
#include <vector>

using neuron::program::Description;
using neuron::program::NodeSpec;
using neuron::program::Program;

namespace {

constexpr int64_t kN = 256; // f32 elements per argument and buffer

neuron_tensor_desc region(uint8_t space, uint32_t index, int64_t n = kN, int64_t stride = 1, uint64_t offset = 0)
{
	neuron_tensor_desc d{};
	d.mem_space = space;
	d.host_buffer = index;
	d.addr = offset;
	d.dtype = NEURON_DTYPE_F32;
	d.ndim = 1;
	d.sizes[0] = n;
	d.strides[0] = stride;
	return d;
}

neuron_tensor_desc arg(uint32_t i) { return region(NEURON_MEM_PROGRAM_ARG, i); }
neuron_tensor_desc buf(uint32_t i) { return region(NEURON_MEM_PROGRAM_BUFFER, i); }

// out = in + 1 (an op that overwrites its output).
NodeSpec add_one(neuron_tensor_desc out, neuron_tensor_desc in, std::vector<uint32_t> deps = {})
{
	NodeSpec s;
	s.cmd.opcode = NEURON_OP_ADD_SCALAR;
	s.cmd.num_operands = 2;
	s.cmd.operands[0] = out;
	s.cmd.operands[1] = in;
	s.cmd.fscalars.f[0] = 1.0;
	s.deps = std::move(deps);
	return s;
}

// out = a @ b + beta * out over 16x16 views of the regions.
NodeSpec matmul(neuron_tensor_desc out, neuron_tensor_desc a, neuron_tensor_desc b, double beta)
{
	for (neuron_tensor_desc *d : {&out, &a, &b}) {
		d->ndim = 2;
		d->sizes[0] = d->sizes[1] = 16;
		d->strides[0] = 16;
		d->strides[1] = 1;
	}
	NodeSpec s;
	s.cmd.opcode = NEURON_OP_MATMUL;
	s.cmd.num_operands = 3;
	s.cmd.operands[0] = out;
	s.cmd.operands[1] = a;
	s.cmd.operands[2] = b;
	s.cmd.fscalars.f[0] = 1.0;
	s.cmd.fscalars.f[1] = beta;
	return s;
}

// The flags per argument, then buffer, of a program with `args` arguments and
// `buffers` buffers of kN f32 each.
std::vector<uint8_t> restore_flags(size_t args, size_t buffers, std::vector<NodeSpec> nodes)
{
	Description d;
	d.arg_bytes.assign(args, kN * 4);
	d.buffer_bytes.assign(buffers, kN * 4);
	d.nodes = std::move(nodes);
	Program p;
	const std::string why = neuron::program::validate(d, &p);
	cr_assert(why.empty(), "the test's program is refused: %s", why.c_str());
	return p.restore_on_rerun;
}

} // namespace

// t = x + 1; y = t + 1: x is only read, y and the scratch buffer t are overwritten
// before anything reads them. Nothing to save.
Test(program_rerun, scratch_buffer_and_pure_output_need_nothing)
{
	const auto r = restore_flags(2, 1, {add_one(buf(0), arg(0)), add_one(arg(1), buf(0), {0})});
	cr_expect_eq(r, (std::vector<uint8_t>{0, 0, 0}));
}

// x = x + 1: the replay reads x before it writes it.
Test(program_rerun, in_place_argument_is_saved)
{
	const auto r = restore_flags(1, 0, {add_one(arg(0), arg(0))});
	cr_expect_eq(r, (std::vector<uint8_t>{1}));
}

// y = s + x; s = x: the buffer carries a value from one replay to the next, read
// before it is written.
Test(program_rerun, state_carried_in_a_buffer_is_saved)
{
	NodeSpec sum = add_one(arg(1), buf(0));
	sum.cmd.opcode = NEURON_OP_ADD;
	sum.cmd.num_operands = 3;
	sum.cmd.operands[2] = arg(0);
	NodeSpec keep = add_one(buf(0), arg(0), {0});
	keep.cmd.opcode = NEURON_OP_COPY;
	keep.cmd.fscalars.f[0] = 0;
	const auto r = restore_flags(2, 1, {sum, keep});
	cr_expect_eq(r, (std::vector<uint8_t>{0, 0, 1}));
}

// The first half of t written, then all of t read: the second half comes from
// before the replay.
Test(program_rerun, partly_written_buffer_is_saved)
{
	const auto r = restore_flags(2, 1, {add_one(region(NEURON_MEM_PROGRAM_BUFFER, 0, kN / 2), region(NEURON_MEM_PROGRAM_ARG, 0, kN / 2)),
					   add_one(arg(1), buf(0), {0})});
	cr_expect_eq(r, (std::vector<uint8_t>{0, 0, 1}));
	// Both halves written by two nodes: covered.
	const auto both = restore_flags(
		2, 1,
		{add_one(region(NEURON_MEM_PROGRAM_BUFFER, 0, kN / 2), region(NEURON_MEM_PROGRAM_ARG, 0, kN / 2)),
		 add_one(region(NEURON_MEM_PROGRAM_BUFFER, 0, kN / 2, 1, kN * 2), region(NEURON_MEM_PROGRAM_ARG, 0, kN / 2)),
		 add_one(arg(1), buf(0), {0, 1})});
	cr_expect_eq(both, (std::vector<uint8_t>{0, 0, 0}));
}

// Every other element of t written (a strided view with gaps), then every element
// from the first written one to the last read: the same byte span, gaps included.
Test(program_rerun, strided_write_leaves_gaps)
{
	const auto r = restore_flags(2, 1, {add_one(region(NEURON_MEM_PROGRAM_BUFFER, 0, kN / 2, 2), region(NEURON_MEM_PROGRAM_ARG, 0, kN / 2)),
					   add_one(region(NEURON_MEM_PROGRAM_ARG, 1, kN - 1), region(NEURON_MEM_PROGRAM_BUFFER, 0, kN - 1), {0})});
	cr_expect_eq(r, (std::vector<uint8_t>{0, 0, 1}));
}

// A matmul reads its output when beta is not 0 (it accumulates into it).
Test(program_rerun, accumulating_matmul_output_is_saved)
{
	cr_expect_eq(restore_flags(3, 0, {matmul(arg(2), arg(0), arg(1), 1.0)}), (std::vector<uint8_t>{0, 0, 1}));
	cr_expect_eq(restore_flags(3, 0, {matmul(arg(2), arg(0), arg(1), 0.0)}), (std::vector<uint8_t>{0, 0, 0}));
}

// A read of t before the node that overwrites it, ordered by an edge: t's old
// contents are read, so t is saved even though it is overwritten later.
Test(program_rerun, read_then_overwritten_is_saved)
{
	const auto r = restore_flags(2, 1, {add_one(arg(1), buf(0)), add_one(buf(0), arg(0), {0})});
	cr_expect_eq(r, (std::vector<uint8_t>{0, 0, 1}));
}
