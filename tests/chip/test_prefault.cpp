// Prefault (runtime/chip/prefault.h): the chunks cover each range's whole pages
// exactly once and never straddle the two ranges; tiny and null ranges are
// skipped; a chunk's steps back only the pages that are not backed yet, at most
// kStepPages each, and never change a byte.
#include <chip/prefault.h>

#include <criterion/criterion.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

using neuron::chip::Prefault;

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
const size_t kChunkPages = Prefault::kChunkBytes / kPage;

std::byte *map_pages(size_t pages)
{
	void *p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED);
	return static_cast<std::byte *>(p);
}

std::vector<bool> backed(std::byte *p, size_t pages)
{
	std::vector<unsigned char> v(pages);
	cr_assert(mincore(p, pages * kPage, v.data()) == 0);
	std::vector<bool> b(pages);
	for (size_t i = 0; i < pages; ++i)
		b[i] = v[i] & 1;
	return b;
}

size_t count(const std::vector<bool> &b)
{
	size_t n = 0;
	for (bool x : b)
		n += x;
	return n;
}

std::vector<Prefault::Range> all_chunks(Prefault &pf)
{
	std::vector<Prefault::Range> v;
	while (auto c = pf.claim())
		v.push_back(*c);
	return v;
}

} // namespace

Test(prefault, chunks_cover_both_ranges_by_whole_pages)
{
	const size_t out_pages = 3 * kChunkPages + 5, arena_pages = 2 * kChunkPages;
	std::byte *out = map_pages(out_pages);
	std::byte *arena = map_pages(arena_pages);
	Prefault pf;
	// An output that starts and ends mid-page: widened to whole pages.
	pf.reset({out + 100, (out_pages - 1) * kPage}, {arena, arena_pages * kPage});
	const auto chunks = all_chunks(pf);
	cr_assert_eq(chunks.size(), 4u + 2u);
	size_t covered = 0;
	for (size_t i = 0; i < 4; ++i) {
		cr_expect_eq(chunks[i].p, out + i * Prefault::kChunkBytes);
		covered += chunks[i].len;
	}
	cr_expect_eq(covered, out_pages * kPage, "the output's pages, each once");
	cr_expect_eq(chunks[4].p, arena);
	cr_expect_eq(chunks[5].p, arena + Prefault::kChunkBytes);
	cr_expect_eq(chunks[5].len, Prefault::kChunkBytes);
	cr_expect(!pf.claim(), "claims past the end stay empty");
	munmap(out, out_pages * kPage);
	munmap(arena, arena_pages * kPage);
}

Test(prefault, tiny_and_null_ranges_are_skipped)
{
	std::byte *p = map_pages(4);
	Prefault pf;
	pf.reset({p, 4 * kPage}, {nullptr, 1u << 30});
	cr_expect(!pf.claim(), "4 pages are under one step; a null range has none");
	pf.reset({}, {});
	cr_expect(!pf.claim());
	munmap(p, 4 * kPage);
}

Test(prefault, steps_back_the_missing_pages_and_keep_contents)
{
	const size_t pages = kChunkPages;
	std::byte *p = map_pages(pages);
	// Every fourth page written (backed, with data), the rest never touched.
	for (size_t i = 0; i < pages; i += 4)
		std::memset(p + i * kPage, int(i % 251) + 1, kPage);
	const size_t missing = pages - count(backed(p, pages));
	cr_assert_gt(missing, 0u);
	Prefault pf;
	pf.reset({p, pages * kPage}, {});
	const auto chunks = all_chunks(pf);
	cr_assert_eq(chunks.size(), 1u);
	Prefault::Chunk chunk(chunks[0]);
	size_t steps = 0, before = count(backed(p, pages));
	while (chunk.step()) {
		++steps;
		const size_t now = count(backed(p, pages));
		cr_expect(now > before && now - before <= Prefault::kStepPages, "a step backed %zu pages", now - before);
		before = now;
	}
	// Runs of 3 missing pages between backed ones: one step each.
	cr_expect_eq(steps, missing / 3);
	cr_expect_eq(count(backed(p, pages)), pages);
	for (size_t i = 0; i < pages; ++i) {
		const std::byte want = i % 4 == 0 ? std::byte(i % 251 + 1) : std::byte{0};
		cr_expect_eq(p[i * kPage], want, "page %zu changed", i);
		cr_expect_eq(p[i * kPage + kPage - 1], want, "page %zu changed", i);
	}
	cr_expect(!chunk.step(), "a finished chunk has no steps left");
	munmap(p, pages * kPage);
}

Test(prefault, a_stopped_chunk_gives_its_rest_back)
{
	const size_t pages = kChunkPages;
	std::byte *p = map_pages(2 * pages);
	Prefault pf;
	pf.reset({p, 2 * pages * kPage}, {});
	const auto first = pf.claim();
	cr_assert(first.has_value());
	Prefault::Chunk chunk(*first);
	cr_assert(chunk.step());
	const Prefault::Range rest = chunk.rest();
	cr_expect_eq(rest.p, p + Prefault::kStepPages * kPage);
	cr_expect_eq(rest.len, (pages - Prefault::kStepPages) * kPage);
	pf.give_back(rest);
	const auto again = pf.claim();
	cr_assert(again.has_value());
	cr_expect_eq(again->p, rest.p, "the rest comes back before new chunks");
	cr_expect_eq(again->len, rest.len);
	const auto second = pf.claim();
	cr_assert(second.has_value());
	cr_expect_eq(second->p, p + Prefault::kChunkBytes);
	pf.give_back(*second);
	pf.reset({p, 2 * pages * kPage}, {});
	const auto fresh = pf.claim();
	cr_assert(fresh.has_value());
	cr_expect_eq(fresh->p, p, "reset drops what was given back");
	munmap(p, 2 * pages * kPage);
}
