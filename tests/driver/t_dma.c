// SPDX-License-Identifier: GPL-2.0-only
/* DMA jobs: correctness at several sizes and offsets, order, syncobjs. */
#include "nt.h"

#define BUF (4 * MIB)

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
}

NT_TEST(dma_sizes_and_offsets)
{
	static const uint64_t sizes[] = { 1, 7, 4095, 4096, 4097, 65536 + 13,
					  3 * MIB + 5 };
	static const uint64_t offs[][3] = {	/* src, dev, dst */
		{ 0, 0, 0 }, { 1, 4095, 3 }, { 4095, 8191, 4097 },
	};
	int fd = nt_open(0);
	uint32_t src = nt_bo(fd, BUF, 0), dst = nt_bo(fd, BUF, 0);
	uint32_t d1 = nt_bo(fd, BUF, DRM_NEURON_BO_DEVICE);
	uint32_t d2 = nt_bo(fd, BUF, DRM_NEURON_BO_DEVICE);
	uint8_t *ps = nt_map(fd, src, BUF), *pd = nt_map(fd, dst, BUF);
	struct nt_sync tl = { nt_syncobj(fd), 0 };
	size_t i, k, j, n = 0;

	for (i = 0; i < BUF; i++)
		ps[i] = pattern(i);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (k = 0; k < 3; k++) {
			uint64_t sz = sizes[i], so = offs[k][0], vo = offs[k][1],
				 dso = offs[k][2];
			struct nt_sync prev = tl;

			memset(pd, 0xee, BUF);
			/* host -> HBM -> HBM -> host, chained on a timeline,
			 * alternating DMA queues. */
			tl.point = ++n;
			OK(nt_dma(fd, 0, src, so, d1, vo, sz,
				  prev.point ? &prev : NULL, &tl));
			prev = tl;
			tl.point = ++n;
			OK(nt_dma(fd, 1, d1, vo, d2, vo + 1, sz, &prev, &tl));
			prev = tl;
			tl.point = ++n;
			OK(nt_dma(fd, 0, d2, vo + 1, dst, dso, sz, &prev, &tl));
			OK(nt_syncobj_wait(fd, tl.handle, tl.point, 10000));
			for (j = dso > 4096 ? dso - 4096 : 0;
			     j < BUF && j < dso + sz + 4096; j++) {
				uint8_t want = j >= dso && j < dso + sz ?
					       pattern(j - dso + so) : 0xee;
				CHECK(pd[j] == want, "size %llu offs %zu: byte %zu is %#x, want %#x",
				      (unsigned long long)sz, k, j, pd[j], want);
			}
		}
	}
	/* host -> host, within one BO. */
	memset(pd, 0, BUF);
	OK(nt_dma(fd, 1, src, 5, dst, 0, 10000, NULL, NULL));
	OK(nt_dma(fd, 1, dst, 0, dst, 20000, 10000, NULL, NULL));
	OK(nt_bo_wait(fd, dst, 5000));
	for (j = 0; j < 10000; j++)
		CHECK(pd[20000 + j] == pattern(j + 5));
}

/* Jobs of one queue complete in order: when the last one has signalled,
 * every earlier one has too, although the first is by far the largest. */
NT_TEST(dma_in_order_completion)
{
	int fd = nt_open(0);
	uint32_t src = nt_bo(fd, 16 * MIB, 0);
	uint32_t dev = nt_bo(fd, 16 * MIB, DRM_NEURON_BO_DEVICE);
	uint32_t small = nt_bo(fd, 4096, 0), sdev = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct nt_sync s[6];
	int i;

	for (i = 0; i < 6; i++)
		s[i] = (struct nt_sync){ nt_syncobj(fd), 0 };
	OK(nt_dma(fd, 0, src, 0, dev, 0, 16 * MIB, NULL, &s[0]));
	for (i = 1; i < 6; i++)
		OK(nt_dma(fd, 0, small, 0, sdev, 0, 64, NULL, &s[i]));
	OK(nt_syncobj_wait(fd, s[5].handle, 0, 10000));
	for (i = 0; i < 5; i++)
		CHECK(nt_fence_status(fd, s[i].handle) == 1, "job %d not done", i);
	/* A later job waiting on an earlier one of the same queue. */
	OK(nt_dma(fd, 1, src, 0, dev, 0, 16 * MIB, NULL, &s[0]));
	{
		struct nt_sync in = s[0];

		OK(nt_dma(fd, 1, dev, 0, small, 0, 4096, &in, &s[1]));
	}
	OK(nt_syncobj_wait(fd, s[1].handle, 0, 10000));
	CHECK(nt_fence_status(fd, s[0].handle) == 1);
}

/* Implicit sync through BOs: a reader waits for the writer. */
NT_TEST(dma_implicit_sync)
{
	int fd = nt_open(0);
	uint32_t a = nt_bo(fd, 8 * MIB, 0), b = nt_bo(fd, 8 * MIB, 0);
	uint32_t d = nt_bo(fd, 8 * MIB, DRM_NEURON_BO_DEVICE);
	uint8_t *pa = nt_map(fd, a, 8 * MIB), *pb = nt_map(fd, b, 8 * MIB);

	memset(pa, 0x5a, 8 * MIB);
	OK(nt_dma(fd, 0, a, 0, d, 0, 8 * MIB, NULL, NULL));	/* queue 0 */
	OK(nt_dma(fd, 1, d, 0, b, 0, 8 * MIB, NULL, NULL));	/* queue 1 */
	OK(nt_bo_wait(fd, b, 10000));
	CHECK(pb[0] == 0x5a && pb[8 * MIB - 1] == 0x5a);
}
