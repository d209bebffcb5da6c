// SPDX-License-Identifier: GPL-2.0-only
/*
 * The fuzzer's checked worker: DMA host -> HBM -> host, and compute ADD jobs
 * through the test engine, with every byte checked. Around it the engine is
 * killed and restarted and the fuzz workers flood the same device, so a
 * compute job may fail with ENODEV (engine gone) or time out (engine busy
 * with a fuzz job): those are counted as tolerated, then the worker starts
 * over with a fresh file and fresh BOs. A job that reports success with
 * wrong data is a failure.
 */
#include <sys/mman.h>

#include "fuzz.h"

#define WORDS 16384

struct valid {
	int fd;
	uint32_t src, dst, dev, *ps, *pd;
	struct nt_sync s;
};

/*
 * nt_map(), but waiting out a full memory cgroup: mapping a host BO backs
 * its pages, charged to the cgroup the fuzz workers share, and mmap fails
 * with ENOMEM until the cgroup's OOM killer has made room (valid_open()
 * runs again after an ENOMEM job, when the cgroup is full).
 */
static uint32_t *valid_map(int fd, uint32_t handle)
{
	struct drm_neuron_bo_mmap_offset m = { .handle = handle };
	void *p;
	int i;

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	for (i = 0;; i++) {
		p = mmap(NULL, WORDS * 4, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, m.offset);
		if (p != MAP_FAILED)
			return p;
		CHECK(errno == ENOMEM && i < 1000, "mmap: %s", strerror(errno));
		usleep(10000);
	}
}

static void valid_open(struct valid *v, int minor)
{
	v->fd = nt_open(minor);
	v->src = nt_bo(v->fd, WORDS * 4, 0);
	v->dst = nt_bo(v->fd, WORDS * 4, 0);
	v->dev = nt_bo(v->fd, WORDS * 4, DRM_NEURON_BO_DEVICE);
	v->ps = valid_map(v->fd, v->src);
	v->pd = valid_map(v->fd, v->dst);
	v->s = (struct nt_sync){ nt_syncobj(v->fd), 0 };
}

static void valid_close(struct valid *v)
{
	munmap(v->ps, WORDS * 4);
	munmap(v->pd, WORDS * 4);
	close(v->fd);
}

/* Runs a job already given v->s as out-sync: 1 ok, else -errno. */
static int valid_wait(struct valid *v, int ms)
{
	int r = nt_syncobj_wait(v->fd, v->s.handle, 0, ms);

	return r ? r : nt_fence_status(v->fd, v->s.handle);
}

static int valid_check(struct valid *v, uint32_t round, uint32_t add)
{
	uint32_t i, bad = 0;

	for (i = 0; i < WORDS; i++)
		bad += v->pd[i] != i * 2654435761u + round + add;
	if (bad)
		printf("# fuzz: valid round %u: %u of %u words wrong\n", round, bad, WORDS);
	return bad;
}

/*
 * A submission of the checked worker. It shares the fuzzer's memory cgroup, where
 * HBM and jobs are charged: once fuzz workers have filled it to memory.max, ENOMEM
 * is the driver's right answer, not a bug, and the round is given up like one
 * lost to an engine timeout. Any other error fails the test.
 */
#define SUBMIT(call) do { int s_ = (call); \
	if (s_ && errno == ENOMEM) \
		return -ENOMEM; \
	if (s_) \
		nt_fail(__FILE__, __LINE__, "%s: got %s, want success", #call, strerror(errno)); \
	} while (0)

/* One round: DMA there and back, checked; then compute, checked if it ran. */
static int valid_round(struct valid *v, uint32_t round)
{
	uint32_t i, add = 1 + round % 7;
	int r;

	for (i = 0; i < WORDS; i++)
		v->ps[i] = i * 2654435761u + round;
	memset(v->pd, 0, WORDS * 4);
	SUBMIT(nt_dma(v->fd, round & 1, v->src, 0, v->dev, 0, WORDS * 4, NULL, NULL));
	SUBMIT(nt_dma(v->fd, !(round & 1), v->dev, 0, v->dst, 0, WORDS * 4, NULL, &v->s));
	r = valid_wait(v, 20000);
	CHECK(r == 1, "round %u: DMA job status %d", round, r);
	if (valid_check(v, round, 0))
		atomic_fetch_add(&fuzz_stats->mismatches, 1);
	atomic_fetch_add(&fuzz_stats->dma_checked, 1);

	SUBMIT(nt_compute(v->fd, round % 8, NT_OP_ADD, add, v->dev, NULL, &v->s));
	r = valid_wait(v, 20000);
	if (r != 1)
		return r;
	SUBMIT(nt_dma(v->fd, 0, v->dev, 0, v->dst, 0, WORDS * 4, NULL, &v->s));
	r = valid_wait(v, 20000);
	CHECK(r == 1, "round %u: DMA job status %d", round, r);
	if (valid_check(v, round, add))
		atomic_fetch_add(&fuzz_stats->mismatches, 1);
	atomic_fetch_add(&fuzz_stats->compute_checked, 1);
	return 1;
}

void fuzz_valid_worker(int minor, uint64_t deadline_ns)
{
	struct valid v;
	uint32_t round;
	int r;

	valid_open(&v, minor);
	for (round = 0; nt_now_ns() < deadline_ns; round++) {
		r = valid_round(&v, round);
		if (r == 1)
			continue;
		CHECK(r == -ENODEV || r == -ETIMEDOUT || r == -ETIME || r == -ENOMEM,
		      "round %u: compute job status %d", round, r);
		/*
		 * The engine went away (ENODEV), or was too busy with fuzz
		 * jobs (a timeout: the file is banned, and a late engine may
		 * still write the BO), or the shared memory cgroup was full
		 * (ENOMEM): start over with fresh BOs.
		 */
		atomic_fetch_add(&fuzz_stats->valid_tolerated, 1);
		valid_close(&v);
		valid_open(&v, minor);
	}
	valid_close(&v);
}
