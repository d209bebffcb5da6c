// Writes a seed corpus for fuzz-tile: the canonical kernels (tests/tile/kernels.h)
// and a few single-engine programs, in the wire form, with their argument sizes.
#include "../tile/canonical_kernels.h"

#include <tile/program.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

void write(const std::string &dir, const std::string &name, const std::vector<uint64_t> &args,
	   const std::vector<neuron_tile_insn> &insns)
{
	const auto bytes = neuron::tile::serialize(args, insns);
	if (FILE *f = std::fopen((dir + "/" + name).c_str(), "wb")) {
		std::fwrite(bytes.data(), 1, bytes.size(), f);
		std::fclose(f);
	}
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	using namespace tb;
	const std::string dir = argv[1];
	const uint8_t f32 = NEURON_DTYPE_F32, bf16 = NEURON_DTYPE_BF16;
	write(dir, "matmul-f32", {9 * 10 * 4, 9 * 7 * 4, 7 * 10 * 4}, tk::matmul(f32, 9, 7, 10));
	write(dir, "matmul-bf16", {3 * 5 * 4, 3 * 130 * 2, 130 * 5 * 2}, tk::matmul(bf16, 3, 130, 5));
	write(dir, "rmsnorm", {130 * 8 * 4, 130 * 8 * 4, 8 * 4}, tk::rmsnorm(f32, 130, 8, 1e-5));
	neuron_tile_insn iota = insn(NEURON_TILE_OP_IOTA, {sbuf(f32, 4, 8)});
	iota.i[1] = 1;
	write(dir, "iota-select", {128},
	      {iota, insn(NEURON_TILE_OP_COMPARE, {sbuf(f32, 4, 8, {64}), sbuf(f32, 4, 8)}, NEURON_CMP_LT),
	       insn(NEURON_TILE_OP_SELECT, {sbuf(f32, 4, 8, {128}), sbuf(f32, 4, 8, {64}), sbuf(f32, 4, 8)}),
	       insn(NEURON_TILE_OP_TRANSPOSE, {psum(8, 4), sbuf(f32, 4, 8, {128})}),
	       insn(NEURON_TILE_OP_TENSOR_COPY, {sbuf(f32, 8, 4, {256}), psum(8, 4)}),
	       insn(NEURON_TILE_OP_DMA, {hbm(f32, 0, 8, 4, 4), sbuf(f32, 8, 4, {256})})});
	return 0;
}
