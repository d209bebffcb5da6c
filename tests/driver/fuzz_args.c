// SPDX-License-Identifier: GPL-2.0-only
/*
 * Random values for the fuzzer: a seeded stream, boundary-heavy integers,
 * and user pointers of every kind a careless or hostile caller passes.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

uint64_t fuzz_next(struct fuzz_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

uint32_t fuzz_below(struct fuzz_rng *r, uint32_t n)
{
	return n ? fuzz_next(r) % n : 0;
}

int fuzz_chance(struct fuzz_rng *r, uint32_t one_in)
{
	return fuzz_below(r, one_in) == 0;
}

uint64_t fuzz_u64(struct fuzz_rng *r)
{
	uint64_t k = fuzz_below(r, 4);

	switch (fuzz_below(r, 9)) {
	case 0: return 0;
	case 1: return 1 + k;
	case 2: return 4096 * (1 + k) + fuzz_below(r, 3) - 1;
	case 3: return (1ull << fuzz_below(r, 64)) - 1 + fuzz_below(r, 3);
	case 4: return UINT64_MAX - k;
	case 5: return (uint64_t)INT64_MAX - k;
	case 6: return 0xffffffffull + fuzz_below(r, 3) - 1;
	case 7: return fuzz_below(r, 1 << 20);
	default: return fuzz_next(r);
	}
}

uint32_t fuzz_u32(struct fuzz_rng *r)
{
	return (uint32_t)fuzz_u64(r);
}

uint64_t fuzz_size(struct fuzz_rng *r, uint64_t max)
{
	if (fuzz_chance(r, 8))
		return fuzz_u64(r);
	if (!max)
		return 1 + fuzz_below(r, 4096);
	return 1 + fuzz_next(r) % max;
}

static uint8_t *scratch;		/* 1 MiB of random bytes, read-write */
static uint8_t *guard_page;		/* a page followed by a PROT_NONE page */
static uint8_t *read_only;		/* a read-only page */
static uint8_t *unmapped;		/* a page no access reaches (PROT_NONE) */
#define SCRATCH (1 << 20)

void fuzz_pointers_init(void)
{
	size_t i;

	scratch = mmap(NULL, SCRATCH, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	guard_page = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	read_only = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/*
	 * Reserved, not unmapped: a freed page would be reused by the next
	 * mapping (a thread's stack and TLS), and the kernel would write
	 * there through the "bad" pointer.
	 */
	unmapped = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(scratch != MAP_FAILED && guard_page != MAP_FAILED &&
	      read_only != MAP_FAILED && unmapped != MAP_FAILED);
	CHECK(mprotect(guard_page + 4096, 4096, PROT_NONE) == 0);
	for (i = 0; i < SCRATCH; i++)
		scratch[i] = (uint8_t)(i * 2654435761u >> 13);
}

/*
 * Somewhere in the first half of the scratch area: a buffer the kernel may
 * write more into than the caller claimed (up to half of it) stays inside.
 */
void *fuzz_scratch(struct fuzz_rng *r, size_t len)
{
	size_t off;

	if (len >= SCRATCH / 2)
		return scratch;
	off = fuzz_below(r, SCRATCH / 2 - len) & ~7ul;
	if (fuzz_chance(r, 2))	/* mostly zeros: well-formed enough to go deep */
		memset(scratch + off, 0, len);
	else
		for (size_t i = 0; i < len; i += 8)
			scratch[off + i] = (uint8_t)fuzz_next(r);
	return scratch + off;
}

uint64_t fuzz_ptr(struct fuzz_rng *r, size_t len)
{
	switch (fuzz_below(r, 10)) {
	case 0: return 0;
	case 1: return 16;
	case 2: return (uintptr_t)unmapped + fuzz_below(r, 4096);
	case 3: return 0xffff888000000000ull + fuzz_below(r, 1 << 20);
	case 4: return (uintptr_t)read_only;
	case 5: return (uintptr_t)guard_page + 4096 - fuzz_below(r, len + 1);
	case 6: return fuzz_next(r) | 1ull << 63;	/* never one of ours */
	default: return (uintptr_t)fuzz_scratch(r, len);
	}
}
