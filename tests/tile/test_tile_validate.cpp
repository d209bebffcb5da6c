// The validator's refusals, each next to the accepted program it differs from
// (so the test would fail if the check were missing or too strict), and the
// wire form's framing.
#include "harness.h"
#include "canonical_kernels.h"

using namespace tb;
using th::expect_contains;
using th::refusal;

namespace {

constexpr uint8_t f32 = NEURON_DTYPE_F32;

std::vector<neuron_tile_insn> one(neuron_tile_insn in) { return {in}; }

} // namespace

Test(tile_validate, partition_limit)
{
	cr_expect_eq(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 128, 4)})), {}), "");
	const std::string why = refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 129, 4)})), {});
	expect_contains(why, "instruction 0 (memset)");
	expect_contains(why, "err_num_partition_exceed_arch_limit");
}

Test(tile_validate, start_partition_rules)
{
	cr_expect_eq(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 32, 4, {}, 96)})), {}), "");
	cr_expect_eq(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 64, 4, {}, 64)})), {}), "");
	expect_contains(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 64, 4, {}, 32)})), {}), "starts at partition");
	expect_contains(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 16, 4, {}, 8)})), {}), "not 8");
}

Test(tile_validate, partition_stride_refused)
{
	neuron_tile_ap a = sbuf(f32, 8, 4);
	a.strides[0] = 2;
	expect_contains(refusal(one(insn(NEURON_TILE_OP_MEMSET, {a})), {}), "partition strides are not allowed");
}

// The SBUF end is checked for the last loop iteration, not only the first.
Test(tile_validate, sbuf_bounds_over_loop_iterations)
{
	const int64_t part = 224 * 1024; // trn2
	auto prog = [&](int64_t trips) {
		return std::vector<neuron_tile_insn>{loop(trips), insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 128, 1024, {0, {4096}})}),
						     end_loop()};
	};
	cr_expect_eq(refusal(prog(part / 4096), {}), "");
	const std::string why = refusal(prog(part / 4096 + 1), {});
	expect_contains(why, "of each SBUF partition, which has 229376 bytes");
	// trn3's SBUF is larger: the same program fits there.
	cr_expect_eq(refusal(prog(part / 4096 + 1), {}, "trn3"), "");
}

Test(tile_validate, hbm_bounds_and_masks)
{
	// 300 rows of 8 f32 in 3 iterations of 128 rows: only the mask keeps the last
	// iteration inside the argument.
	auto prog = [](bool mask) {
		neuron_tile_insn ld = insn(NEURON_TILE_OP_DMA, {sbuf(f32, 128, 8), hbm(f32, 0, 128, 8, 8, {0, {128 * 8}})});
		if (mask)
			ld = masked(ld, 0, {0, {128}}, 300);
		return std::vector<neuron_tile_insn>{loop(3), ld, end_loop()};
	};
	cr_expect_eq(refusal(prog(true), {300 * 8 * 4}), "");
	const std::string why = refusal(prog(false), {300 * 8 * 4});
	expect_contains(why, "err_tensor_access_out_of_bound");
	expect_contains(why, "9600 bytes");
	// One byte less than the masked rows need is refused too.
	expect_contains(refusal(prog(true), {300 * 8 * 4 - 1}), "out_of_bound");
	expect_contains(refusal(prog(true), {}), "HBM argument 0");
}

Test(tile_validate, matmul_limits_per_profile)
{
	auto mm = [](int64_t M, int64_t N, int64_t psum_offset = 0) {
		return one(insn(NEURON_TILE_OP_MATMUL, {psum(M, N, {psum_offset}), sbuf(NEURON_DTYPE_BF16, 128, M),
							sbuf(NEURON_DTYPE_BF16, 128, N, {1024})}));
	};
	cr_expect_eq(refusal(mm(128, 512), {}), "");
	// M is out's partitions: past 128 the partition limit refuses it.
	expect_contains(refusal(mm(129, 512), {}), "err_num_partition_exceed_arch_limit");
	expect_contains(refusal(mm(128, 513), {}), "N <= 512");
	cr_expect_eq(refusal(mm(128, 256, 1024), {}), ""); // the second half of bank 0
	expect_contains(refusal(mm(128, 256, 1536), {}), "one 2048-byte PSUM bank");
	cr_expect_eq(refusal(mm(128, 256, 2048), {}), "");
	cr_expect_eq(refusal(mm(128, 4096), {}, "trn3"), "");
	cr_expect_eq(refusal(mm(128, 1024, 2048), {}, "trn3"), "");
	expect_contains(refusal(mm(128, 1024, 1024), {}, "trn3"), "PSUM bank");
	// Mixed operand dtypes and the wrong shapes.
	auto bad = mm(128, 512);
	bad[0].operands[2].dtype = f32;
	expect_contains(refusal(bad, {}), "one floating dtype");
	bad = mm(128, 512);
	bad[0].operands[2].sizes[0] = 64;
	expect_contains(refusal(bad, {}), "err_num_partition_mismatch");
	bad = mm(128, 512);
	bad[0].masks[0].enabled = 1;
	expect_contains(refusal(bad, {}), "takes no mask");
}

Test(tile_validate, engines_reach_only_their_memories)
{
	expect_contains(refusal(one(insn(NEURON_TILE_OP_DMA, {sbuf(f32, 4, 4), psum(4, 4)})), {}), "do not reach PSUM");
	expect_contains(refusal(one(insn(NEURON_TILE_OP_TENSOR_TENSOR, {sbuf(f32, 4, 4), sbuf(f32, 4, 4, {64}),
									 hbm(f32, 0, 4, 4, 4)}, NEURON_PW_ADD)),
				{64}),
			"only dma reaches HBM");
	neuron_tile_ap bf = psum(4, 4);
	bf.dtype = NEURON_DTYPE_BF16;
	expect_contains(refusal(one(insn(NEURON_TILE_OP_MEMSET, {bf})), {}), "PSUM holds f32");
}

Test(tile_validate, functions_and_broadcasts)
{
	auto tt = [](uint32_t fn, int64_t bcols) {
		return one(insn(NEURON_TILE_OP_TENSOR_TENSOR, {sbuf(f32, 8, 16), sbuf(f32, 8, 16, {64}), sbuf(f32, 8, bcols, {128})},
				fn));
	};
	cr_expect_eq(refusal(tt(NEURON_PW_MUL, 1), {}), "");
	expect_contains(refusal(tt(NEURON_PW_EXP, 16), {}), "not a binary neuron_pw_fn");
	expect_contains(refusal(tt(NEURON_PW_MUL, 3), {}), "does not fit out");
	neuron_tile_insn act = insn(NEURON_TILE_OP_ACTIVATION, {sbuf(f32, 8, 16), sbuf(f32, 8, 16, {64})}, NEURON_PW_ADD);
	expect_contains(refusal(one(act), {}), "not a unary");
	act.fn = NEURON_PW_SILU;
	cr_expect_eq(refusal(one(act), {}), "");
}

Test(tile_validate, partial_overlap_refused)
{
	auto add = [](int64_t out_offset) {
		return one(insn(NEURON_TILE_OP_TENSOR_TENSOR, {sbuf(f32, 8, 16, {out_offset}), sbuf(f32, 8, 16), sbuf(f32, 8, 16)},
				NEURON_PW_ADD));
	};
	cr_expect_eq(refusal(add(0), {}), ""); // in place, the identical tile
	cr_expect_eq(refusal(add(64), {}), "");
	expect_contains(refusal(add(4), {}), "out overlaps operand 1");
}

Test(tile_validate, loops_and_work)
{
	expect_contains(refusal({loop(2), insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)})}, {}), "never closed");
	expect_contains(refusal({end_loop()}, {}), "without an open loop");
	expect_contains(refusal({loop(0), end_loop()}, {}), "trip count 0");
	expect_contains(refusal({loop(1), loop(1), loop(1), loop(1), loop(1), end_loop(), end_loop(), end_loop(), end_loop(),
				 end_loop()},
				{}),
			"at most 4 deep");
	// A step of a loop that is not open.
	expect_contains(refusal(one(insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4, {0, {4}})})), {}), "only 0 loops are open");
	// Empty loops still count: 2^20^3 iterations is too much work.
	const int64_t big = NEURON_TILE_MAX_TRIP;
	expect_contains(refusal({loop(big), loop(big), loop(big), end_loop(), end_loop(), end_loop()}, {}), "work passes");
	// Work between two boundaries: 129 matmuls of 2^23 MACs without a loop is too long.
	std::vector<neuron_tile_insn> straight;
	const neuron_tile_insn mm = insn(NEURON_TILE_OP_MATMUL, {psum(128, 512), sbuf(f32, 128, 128), sbuf(f32, 128, 512, {512})},
					 0, NEURON_TILE_ACCUMULATE);
	for (int i = 0; i < 129; ++i)
		straight.push_back(mm);
	expect_contains(refusal(straight, {}), "put them in a loop");
	std::vector<neuron_tile_insn> looped{loop(129), mm, end_loop()};
	cr_expect_eq(refusal(looped, {}), "");
}

Test(tile_validate, errors_name_the_source_line)
{
	neuron_tile_insn in = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 200, 4)});
	in.line = 42;
	expect_contains(refusal({insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)}), in}, {}), "instruction 1 (memset, line 42)");
}

Test(tile_validate, reserved_and_unknown_fields)
{
	neuron_tile_insn in = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)});
	in.reserved = 1;
	expect_contains(refusal(one(in), {}), "reserved");
	in = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)});
	in.operands[2].ndim = 1;
	expect_contains(refusal(one(in), {}), "past num_operands");
	in = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)});
	in.op = 99;
	expect_contains(refusal(one(in), {}), "op 99 is unknown");
	in = insn(NEURON_TILE_OP_MEMSET, {sbuf(f32, 4, 4)});
	in.operands[0].dtype = NEURON_DTYPE_I64;
	expect_contains(refusal(one(in), {}), "tiles take f32, bf16, f16 or i32");
}

Test(tile_validate, canonical_kernels_validate_with_their_numbers)
{
	neuron::tile::TileProgram p;
	const auto insns = tk::matmul(NEURON_DTYPE_BF16, 256, 384, 1024);
	const std::vector<uint64_t> args{256 * 1024 * 4, 256 * 384 * 2, 384 * 1024 * 2};
	cr_assert_eq(neuron::tile::validate(th::onchip(), args, insns, &p), "");
	// 2 x 2 x 3 k iterations, 2 x 2 n iterations, 2 m iterations (it ends with a loop_end).
	cr_expect_eq(p.steps, 12 + 4 + 2);
	cr_expect_eq(p.psum_bytes_used, 2048u);
	cr_expect_eq(p.sbuf_bytes_used, (128 + 512) * 2 + 512 * 4);
	cr_expect_eq(p.arg_written, (std::vector<uint8_t>{1, 0, 0}));
}

Test(tile_validate, wire_form)
{
	const auto insns = tk::rmsnorm(f32, 10, 16, 1e-5);
	const std::vector<uint64_t> args{640, 640, 64};
	const auto bytes = neuron::tile::serialize(args, insns);
	std::vector<uint64_t> a2;
	std::vector<neuron_tile_insn> i2;
	cr_assert_eq(neuron::tile::parse(bytes, &a2, &i2), "");
	cr_expect_eq(a2, args);
	cr_assert_eq(i2.size(), insns.size());
	cr_expect_eq(std::memcmp(i2.data(), insns.data(), insns.size() * sizeof(neuron_tile_insn)), 0);
	auto cut = bytes;
	cut.pop_back();
	expect_contains(neuron::tile::parse(cut, &a2, &i2), "the header declares");
	auto bad = bytes;
	bad[0] = std::byte{0};
	expect_contains(neuron::tile::parse(bad, &a2, &i2), "not a tile program");
}
