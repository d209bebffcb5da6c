// How the scheduler plans a TILE_KERNEL node: its steps (the count the program's
// validation stored in i[2]) as one ordered chain, so the runner takes them in
// order on one thread and the core may switch tenants after any of them.
#include <sched/tile_cursor.h>
#include <sched/tiling.h>

#include <criterion/criterion.h>

Test(tile_sched, a_kernel_is_one_ordered_chain_of_its_steps)
{
	neuron_cmd c{};
	c.opcode = NEURON_OP_TILE_KERNEL;
	c.num_operands = 2;
	c.iscalars[1] = 1;
	c.iscalars[2] = 19;
	const neuron::sched::TilePlan plan = neuron::sched::plan_tiles(c, neuron::sched::TileBudget{}, 1);
	cr_assert_eq(plan.tiles, 19u);
	cr_expect_eq(neuron::sched::chain_length(plan), 19u);
	neuron::sched::TileCursor cursor;
	cursor.reset(plan.tiles, neuron::sched::chain_length(plan));
	cr_expect_eq(cursor.claimable(), 1u, "one thread at a time runs a kernel's steps");
	c.iscalars[2] = 1;
	cr_expect_eq(neuron::sched::plan_tiles(c, neuron::sched::TileBudget{}, 1).tiles, 1u, "one step: run whole");
}
