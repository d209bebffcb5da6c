// ISA 1.4 ATTENTION against the textbook formula in double (scores, a softmax with
// its maximum subtracted, the weighted sum): no mask, additive and bool masks,
// causal with several diagonals, key heads broadcast over query heads (stride 0),
// strided q, rows that see no key, f32/bf16/f16, more keys and rows than one
// block; and the ISA 1.4 rejections (SCAN, SORT, ATTENTION, the new functions).
#include "ref.h"

using namespace ref;

namespace {

struct Attn {
	Tensor out, lse, q, k, v, mask;
	double scale = 0.25;
	bool causal = false;
	int64_t diag = 0;
};

// [B, H, L, E] etc. built contiguous; the caller may replace views before running.
Attn make_attn(int dt, int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t Ev, int mdt, uint64_t seed)
{
	Attn a;
	a.q = Tensor::make(dt, {B, H, L, E});
	a.k = Tensor::make(dt, {B, H, S, E});
	a.v = Tensor::make(dt, {B, H, S, Ev});
	a.mask = Tensor::make(mdt, {B, H, L, S});
	a.out = Tensor::make(dt, {B, H, L, Ev});
	a.lse = Tensor::make(NEURON_DTYPE_F32, {B, H, L});
	a.q.randomize(seed, -2, 2);
	a.k.randomize(seed + 1, -2, 2);
	a.v.randomize(seed + 2, -2, 2);
	a.mask.randomize(seed + 3, -1, 1);
	return a;
}

void run_attn(Attn &a, const std::string &what)
{
	auto cmd = make_cmd(NEURON_OP_ATTENTION, {&a.out, &a.lse, &a.q, &a.k, &a.v, &a.mask});
	cmd.fscalars.f[0] = a.scale;
	cmd.iscalars[0] = a.causal ? NEURON_ATTENTION_CAUSAL : 0;
	cmd.iscalars[1] = a.causal ? a.diag : 0;
	run(cmd, {&a.out, &a.lse, &a.q, &a.k, &a.v, &a.mask});
	const int64_t S = a.k.sizes[2], E = a.q.sizes[3];
	const bool bmask = a.mask.dt == NEURON_DTYPE_BOOL;
	// Scores of one row, -inf where masked.
	auto scores = [&](const int64_t *o) {
		std::vector<double> s(static_cast<size_t>(S));
		for (int64_t j = 0; j < S; ++j) {
			double dot = 0;
			for (int64_t e = 0; e < E; ++e) {
				const int64_t qi[4] = {o[0], o[1], o[2], e}, ki[4] = {o[0], o[1], j, e};
				dot += a.q.get(qi) * a.k.get(ki);
			}
			const int64_t mi[4] = {o[0], o[1], o[2], j};
			const double m = a.mask.get(mi);
			double x = a.scale * dot + (bmask ? 0 : m);
			if ((bmask && m == 0) || (a.causal && j > o[2] + a.diag))
				x = -INFINITY;
			s[static_cast<size_t>(j)] = x;
		}
		return s;
	};
	Tol t = tol_for(a.out.dt);
	t.rtol = std::max(t.rtol, 1e-4);
	t.atol = std::max(t.atol, 1e-4);
	expect_tensor(a.out, [&](const int64_t *o) {
		const auto s = scores(o);
		const double mx = *std::max_element(s.begin(), s.end());
		if (mx == -INFINITY)
			return 0.0;
		double sum = 0, acc = 0;
		for (int64_t j = 0; j < S; ++j) {
			const double p = std::exp(s[static_cast<size_t>(j)] - mx);
			const int64_t vi[4] = {o[0], o[1], j, o[3]};
			sum += p;
			acc += p * a.v.get(vi);
		}
		return acc / sum;
	}, t, what + " out");
	expect_tensor(a.lse, [&](const int64_t *o) {
		const int64_t row[4] = {o[0], o[1], o[2], 0};
		const auto s = scores(row);
		const double mx = *std::max_element(s.begin(), s.end());
		if (mx == -INFINITY)
			return -double(INFINITY);
		double sum = 0;
		for (double x : s)
			sum += std::exp(x - mx);
		return mx + std::log(sum);
	}, {1e-4, 1e-4}, what + " lse");
}

} // namespace

Test(isa14_attention, masks_and_dtypes)
{
	for (int dt : kFloatDtypes) {
		Attn a = make_attn(dt, 2, 3, 5, 7, 4, 6, dt, 10);
		run_attn(a, std::string("float mask ") + dname(dt));
		Attn b = make_attn(dt, 1, 2, 6, 9, 3, 3, NEURON_DTYPE_BOOL, 20);
		run_attn(b, std::string("bool mask ") + dname(dt));
	}
	// No mask: one zero broadcast everywhere.
	Attn c = make_attn(NEURON_DTYPE_F32, 2, 2, 4, 5, 8, 8, NEURON_DTYPE_F32, 30);
	Tensor zero = Tensor::make(NEURON_DTYPE_F32, {1, 1, 1, 1});
	zero.each([&](const int64_t *i) { zero.set(i, 0); });
	c.mask = zero.expand(0, 2).expand(1, 2).expand(2, 4).expand(3, 5);
	run_attn(c, "broadcast zero mask");
}

Test(isa14_attention, causal_diagonals_and_empty_rows)
{
	for (int64_t diag : {0, -2, 3}) {
		Attn a = make_attn(NEURON_DTYPE_F32, 1, 2, 6, 6, 4, 5, NEURON_DTYPE_F32, 40);
		a.causal = true;
		a.diag = diag;
		run_attn(a, "causal diag " + std::to_string(diag));
	}
	// A bool mask that hides every key of some rows: out 0, lse -inf.
	Attn b = make_attn(NEURON_DTYPE_F32, 1, 1, 4, 3, 2, 2, NEURON_DTYPE_BOOL, 50);
	b.mask.each([&](const int64_t *i) { b.mask.set(i, i[2] % 2); });
	run_attn(b, "rows without keys");
}

Test(isa14_attention, broadcast_heads_strided_and_long)
{
	// Grouped-query attention: 4 query heads share 2 key heads -> q [B, 2, 2, L, E]
	// with k/v [B, 2, 1 (stride 0), S, E]; written here as H = 2 with k broadcast.
	Attn a = make_attn(NEURON_DTYPE_F32, 2, 3, 5, 6, 4, 4, NEURON_DTYPE_F32, 60);
	Tensor k1 = Tensor::make(NEURON_DTYPE_F32, {2, 1, 6, 4}), v1 = Tensor::make(NEURON_DTYPE_F32, {2, 1, 6, 4});
	k1.randomize(61, -2, 2);
	v1.randomize(62, -2, 2);
	a.k = k1.expand(1, 3);
	a.v = v1.expand(1, 3);
	run_attn(a, "broadcast key heads");
	// Strided q (transposed heads and rows), more rows and keys than one block.
	Attn b = make_attn(NEURON_DTYPE_F32, 1, 2, 130, 300, 8, 8, NEURON_DTYPE_F32, 70);
	Tensor qt = Tensor::make(NEURON_DTYPE_F32, {1, 130, 2, 8});
	qt.randomize(71, -1, 1);
	b.q = qt.transpose(1, 2);
	b.causal = true;
	run_attn(b, "long, strided q, causal");
}

Test(isa14_attention, constant_masks_and_strided_keys)
{
	// A mask of one value broadcast everywhere: the kernel reads it once (a zero or
	// a true changes no score; a false hides every key; another value is added).
	for (int mdt : {NEURON_DTYPE_F32, NEURON_DTYPE_BOOL})
		for (double value : {0.0, 1.0, 2.5}) {
			if (mdt == NEURON_DTYPE_BOOL && value > 1)
				continue;
			Attn a = make_attn(NEURON_DTYPE_F32, 2, 2, 5, 7, 4, 3, mdt, 80);
			Tensor one = Tensor::make(mdt, {1, 1, 1, 1});
			one.each([&](const int64_t *i) { one.set(i, value); });
			a.mask = one.expand(0, 2).expand(1, 2).expand(2, 5).expand(3, 7);
			a.causal = value == 1.0;
			run_attn(a, std::string("constant mask ") + dname(mdt) + " " + std::to_string(value));
		}
	// Keys and values whose rows are not contiguous (packed before the products)
	// beside row-contiguous ones with a row stride wider than a row (read in place).
	Attn b = make_attn(NEURON_DTYPE_F32, 1, 2, 9, 11, 4, 5, NEURON_DTYPE_F32, 90);
	Tensor kt = Tensor::make(NEURON_DTYPE_F32, {1, 2, 4, 11});
	kt.randomize(91, -2, 2);
	b.k = kt.transpose(2, 3);
	Tensor wide = Tensor::make(NEURON_DTYPE_F32, {1, 2, 11, 8});
	wide.randomize(92, -2, 2);
	b.v = wide.slice(3, 1, 6, 1);
	run_attn(b, "transposed keys, values with a wide row stride");
}

Test(isa14_compute, rejections)
{
	auto rejected = [](const neuron_cmd &c, const char *needle) {
		const auto f = neuron::kernels::check_semantics(c);
		cr_assert(f && f->code == NEURON_FAULT_BAD_OPERAND, "accepted: expected '%s'", needle);
		cr_assert(f->message.find(needle) != std::string::npos, "'%s' lacks '%s'", f->message.c_str(), needle);
	};
	// SCAN
	const Tensor x = Tensor::make(NEURON_DTYPE_F32, {4, 5}), y = Tensor::make(NEURON_DTYPE_F32, {4, 5});
	const Tensor init = Tensor::make(NEURON_DTYPE_F32, {4, 1}), bad_init = Tensor::make(NEURON_DTYPE_F32, {4, 2});
	auto scan = make_cmd(NEURON_OP_SCAN, {&y, &x, &init});
	scan.iscalars[0] = 1;
	cr_assert(!neuron::kernels::check_semantics(scan));
	auto c = scan;
	c.iscalars[1] = NEURON_SCAN_COUNT_;
	rejected(c, "scan function");
	c = scan;
	c.iscalars[0] = 2;
	rejected(c, "(dim)");
	c = make_cmd(NEURON_OP_SCAN, {&y, &x, &bad_init});
	c.iscalars[0] = 1;
	rejected(c, "should be 1");
	const Tensor b = Tensor::make(NEURON_DTYPE_BOOL, {4, 5}), i64 = Tensor::make(NEURON_DTYPE_I64, {4, 5});
	c = make_cmd(NEURON_OP_SCAN, {&b, &x, &init});
	rejected(c, "any dtype but bool");
	c = make_cmd(NEURON_OP_SCAN, {&i64, &x, &init});
	c.iscalars[1] = NEURON_SCAN_LOGSUMEXP;
	rejected(c, "f32, bf16 or f16");
	// SORT
	const Tensor vals = Tensor::make(NEURON_DTYPE_F32, {4, 3}), idx = Tensor::make(NEURON_DTYPE_I64, {4, 3});
	auto sort = make_cmd(NEURON_OP_SORT, {&vals, &idx, &x});
	sort.iscalars[0] = 1;
	cr_assert(!neuron::kernels::check_semantics(sort));
	c = sort;
	c.iscalars[1] = 2;
	rejected(c, "descending");
	const Tensor toolong = Tensor::make(NEURON_DTYPE_F32, {4, 6}), tooidx = Tensor::make(NEURON_DTYPE_I64, {4, 6});
	c = make_cmd(NEURON_OP_SORT, {&toolong, &tooidx, &x});
	c.iscalars[0] = 1;
	rejected(c, "exceeds the row length");
	const Tensor i32 = Tensor::make(NEURON_DTYPE_I32, {4, 3});
	c = make_cmd(NEURON_OP_SORT, {&vals, &i32, &x});
	c.iscalars[0] = 1;
	rejected(c, "i64");
	// ATTENTION
	Attn a = make_attn(NEURON_DTYPE_F32, 1, 2, 3, 4, 5, 6, NEURON_DTYPE_F32, 1);
	auto at = make_cmd(NEURON_OP_ATTENTION, {&a.out, &a.lse, &a.q, &a.k, &a.v, &a.mask});
	cr_assert(!neuron::kernels::check_semantics(at));
	c = at;
	c.iscalars[0] = 2;
	rejected(c, "flags other than causal");
	c = at;
	c.iscalars[1] = 1; // a diagonal without the causal flag
	rejected(c, "i[1]");
	c = at;
	c.fscalars.f[0] = INFINITY;
	rejected(c, "(scale) must be finite");
	Tensor k_bad = Tensor::make(NEURON_DTYPE_F32, {1, 2, 4, 4});
	c = make_cmd(NEURON_OP_ATTENTION, {&a.out, &a.lse, &a.q, &k_bad, &a.v, &a.mask});
	rejected(c, "E (q's last dim)");
	Tensor lse_bf = Tensor::make(NEURON_DTYPE_BF16, {1, 2, 3});
	c = make_cmd(NEURON_OP_ATTENTION, {&a.out, &lse_bf, &a.q, &a.k, &a.v, &a.mask});
	rejected(c, "f32");
	// The new functions' scalars.
	auto m = make_cmd(NEURON_OP_UNARY_MATH, {&y, &x});
	m.iscalars[0] = NEURON_UNARY_SIN;
	m.fscalars.f[0] = 1;
	rejected(m, "f[0]");
	m.iscalars[0] = NEURON_UNARY_ROUND_DECIMALS;
	m.fscalars.f[0] = 0.5;
	rejected(m, "10^|decimals|");
	m.iscalars[0] = NEURON_UNARY_COUNT_;
	rejected(m, "unary function");
	auto bm = make_cmd(NEURON_OP_BINARY_MATH, {&y, &x, &x});
	bm.iscalars[0] = NEURON_BINARY_ELU_BACKWARD;
	bm.iscalars[1] = 2;
	rejected(bm, "is the result");
	// An opcode of the reserved part of the block is unknown.
	for (uint16_t op : {uint16_t{NEURON_OP_SVD + 1}, uint16_t{63}}) {
		neuron_cmd r{};
		r.opcode = op;
		const auto f = neuron::kernels::check_semantics(r);
		cr_assert(f && f->code == NEURON_FAULT_BAD_OPCODE);
	}
}
