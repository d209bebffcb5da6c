// SPDX-License-Identifier: GPL-2.0-only
/*
 * SUBMIT validation: every case differs from a valid submit in one field and
 * must fail with the errno the uAPI documents; the valid submit must pass.
 */
#include "nt.h"

struct sub {
	struct drm_neuron_submit s;
	struct drm_neuron_submit_bo bos[2];
	struct drm_neuron_sync in, out;
	struct drm_neuron_dma_copy copy;
	uint32_t cmd[2];
	uint8_t wide[2][64];	/* elements with a larger stride */
};

static uint32_t host, dev, so, fresh;

static void dma_base(struct sub *x)
{
	memset(x, 0, sizeof(*x));
	x->bos[0] = (struct drm_neuron_submit_bo){ host, DRM_NEURON_BO_ACCESS_READ };
	x->bos[1] = (struct drm_neuron_submit_bo){ dev, DRM_NEURON_BO_ACCESS_WRITE };
	x->copy = (struct drm_neuron_dma_copy){ 0, 1, 0, 0, 4096 };
	x->out = (struct drm_neuron_sync){ so, 0, 0 };
	x->s = (struct drm_neuron_submit){
		.queue_type = DRM_NEURON_QUEUE_DMA, .queue_index = 1,
		.bos = (uintptr_t)x->bos, .bo_count = 2, .bo_stride = 8,
		.sync_stride = 16, .out_syncs = (uintptr_t)&x->out,
		.out_sync_count = 1, .copies = (uintptr_t)&x->copy,
		.copy_count = 1, .copy_stride = sizeof(x->copy),
	};
}

static void core_base(struct sub *x)
{
	dma_base(x);
	x->bos[0].flags |= DRM_NEURON_BO_ACCESS_WRITE;
	x->s.queue_type = DRM_NEURON_QUEUE_CORE;
	x->s.queue_index = 3;
	x->s.copies = 0;
	x->s.copy_count = 0;
	x->s.copy_stride = 0;
	x->s.cmd = (uintptr_t)x->cmd;
	x->s.cmd_size = sizeof(x->cmd);
}

/* Case i: mutate a valid submit; return the expected errno, -1 at the end. */
static int mutate(struct sub *x, int i, const char **what)
{
	dma_base(x);
	switch (i) {
#define CASE(n, err, desc, ...) case n: *what = desc; __VA_ARGS__; return err
	CASE(0, 0, "valid DMA submit");
	CASE(1, EINVAL, "flags", x->s.flags = 1);
	CASE(2, EINVAL, "pad", x->s.pad = 1);
	CASE(3, EINVAL, "queue_type 0", x->s.queue_type = 0);
	CASE(4, EINVAL, "queue_type 3", x->s.queue_type = 3);
	CASE(5, EINVAL, "DMA queue_index", x->s.queue_index = 2);
	CASE(6, EINVAL, "bo_count > max", x->s.bo_count = DRM_NEURON_MAX_SUBMIT_BOS + 1);
	CASE(7, EINVAL, "bo_stride small", x->s.bo_stride = 4);
	CASE(8, EINVAL, "bo_stride big", x->s.bo_stride = DRM_NEURON_MAX_STRIDE + 8);
	CASE(9, EINVAL, "sync_stride small", x->s.sync_stride = 8);
	CASE(10, EINVAL, "in_sync_count > max", x->s.in_sync_count = 65);
	CASE(11, EINVAL, "out_sync_count > max", x->s.out_sync_count = 65);
	CASE(12, EINVAL, "copy_count 0", x->s.copy_count = 0);
	CASE(13, EINVAL, "copy_count > max", x->s.copy_count = DRM_NEURON_MAX_DMA_COPIES + 1);
	CASE(14, EINVAL, "copy_stride small", x->s.copy_stride = 16);
	CASE(15, EINVAL, "cmd on DMA", x->s.cmd = (uintptr_t)x->cmd);
	CASE(16, EINVAL, "cmd_size on DMA", x->s.cmd_size = 8);
	CASE(17, EINVAL, "BO access 0", x->bos[0].flags = 0);
	CASE(18, EINVAL, "BO access unknown", x->bos[0].flags |= 4);
	CASE(19, EINVAL, "BO twice", x->bos[1].handle = host;
	     x->bos[1].flags = DRM_NEURON_BO_ACCESS_WRITE);
	CASE(20, ENOENT, "BO handle unknown", x->bos[1].handle = 999);
	CASE(21, ENOENT, "in-sync unknown", x->in.handle = 999;
	     x->s.in_syncs = (uintptr_t)&x->in; x->s.in_sync_count = 1);
	CASE(22, EINVAL, "in-sync flags", x->in.handle = so; x->in.flags = 1;
	     x->s.in_syncs = (uintptr_t)&x->in; x->s.in_sync_count = 1);
	CASE(23, EINVAL, "in-sync without fence", x->in.handle = fresh;
	     x->s.in_syncs = (uintptr_t)&x->in; x->s.in_sync_count = 1);
	CASE(24, ENOENT, "out-sync unknown", x->out.handle = 999);
	CASE(25, EINVAL, "out-sync flags", x->out.flags = 1);
	CASE(26, EINVAL, "copy src index", x->copy.src_bo = 2);
	CASE(27, EINVAL, "copy dst index", x->copy.dst_bo = 2);
	CASE(28, EINVAL, "copy src not READ", x->copy.src_bo = 1; x->copy.dst_bo = 0);
	CASE(29, EINVAL, "copy size 0", x->copy.size = 0);
	CASE(30, EINVAL, "copy past BO end", x->copy.size = 65536 + 1);
	CASE(31, EINVAL, "copy offset overflow", x->copy.src_offset = UINT64_MAX - 10);
	CASE(32, EINVAL, "copy dst offset", x->copy.dst_offset = 65536 - 100);
	CASE(33, EINVAL, "copy overlap", x->bos[0].flags |= DRM_NEURON_BO_ACCESS_WRITE;
	     x->copy.dst_bo = 0; x->copy.dst_offset = 100);
	CASE(34, 0, "copy same BO, disjoint", x->bos[0].flags |= DRM_NEURON_BO_ACCESS_WRITE;
	     x->copy.dst_bo = 0; x->copy.dst_offset = 4096);
	CASE(35, EINVAL, "BO element unknown bytes",
	     memcpy(x->wide[0], &x->bos[0], 8); memcpy(x->wide[1], &x->bos[1], 8);
	     x->wide[1][20] = 1; x->s.bos = (uintptr_t)x->wide; x->s.bo_stride = 64);
	CASE(36, 0, "BO element zero tail",
	     memcpy(x->wide[0], &x->bos[0], 8); memcpy(x->wide[1], &x->bos[1], 8);
	     x->s.bos = (uintptr_t)x->wide; x->s.bo_stride = 64);
	CASE(37, EINVAL, "copy element unknown bytes",
	     memcpy(x->wide[0], &x->copy, 32); x->wide[0][40] = 1;
	     x->s.copies = (uintptr_t)x->wide; x->s.copy_stride = 64);
	CASE(38, 0, "sync element zero tail",
	     memcpy(x->wide[0], &x->out, 16); x->s.out_syncs = (uintptr_t)x->wide;
	     x->s.sync_stride = 64);
	CASE(39, EFAULT, "bad bos pointer", x->s.bos = 16);
	CASE(40, EFAULT, "bad copies pointer", x->s.copies = 16);
	CASE(41, EFAULT, "bad out_syncs pointer", x->s.out_syncs = 16);
	CASE(42, 0, "valid compute submit", core_base(x));
	CASE(43, EINVAL, "core index", core_base(x); x->s.queue_index = 8);
	CASE(44, EINVAL, "cmd_size 0", core_base(x); x->s.cmd_size = 0);
	CASE(45, EINVAL, "cmd_size > max", core_base(x); x->s.cmd_size = 65537);
	CASE(46, EINVAL, "copies on core", core_base(x); x->s.copies = (uintptr_t)&x->copy);
	CASE(47, EINVAL, "copy_count on core", core_base(x); x->s.copy_count = 1);
	CASE(48, EINVAL, "copy_stride on core", core_base(x); x->s.copy_stride = 32);
	CASE(49, EFAULT, "bad cmd pointer", core_base(x); x->s.cmd = 16);
	CASE(50, 0, "compute without BOs", core_base(x); x->s.bo_count = 0);
#undef CASE
	}
	return -1;
}

NT_TEST(submit_each_bad_field)
{
	int fd = nt_open(0), i, want, bad = 0;
	struct sub x;
	const char *what = "";

	host = nt_bo(fd, 65536, 0);
	dev = nt_bo(fd, 65536, DRM_NEURON_BO_DEVICE);
	so = nt_syncobj(fd);
	fresh = nt_syncobj(fd);
	for (i = 0; (want = mutate(&x, i, &what)) >= 0; i++) {
		int r = ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, &x.s) ? errno : 0;

		if (r != want) {
			printf("# case %d (%s): got %s, want %s\n", i, what,
			       r ? strerror(r) : "success",
			       want ? strerror(want) : "success");
			bad++;
		}
		if (!r)
			CHECK(x.s.job_seq > 0);
	}
	CHECK(!bad, "%d of %d cases wrong", bad, i);
	CHECK(i > 45);
	/* Jobs complete (compute ones fail without an engine, not hang). */
	OK(nt_bo_wait(fd, host, 5000));
	OK(nt_bo_wait(fd, dev, 5000));
}

NT_TEST(job_seq_increments)
{
	int fd = nt_open(0);
	uint32_t a = nt_bo(fd, 8192, 0), b = nt_bo(fd, 8192, 0);
	struct drm_neuron_submit_bo bos[2] = {
		{ a, DRM_NEURON_BO_ACCESS_READ }, { b, DRM_NEURON_BO_ACCESS_WRITE } };
	struct drm_neuron_dma_copy c = { 0, 1, 0, 0, 100 };
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_DMA, .bos = (uintptr_t)bos,
		.bo_count = 2, .bo_stride = 8, .copies = (uintptr_t)&c,
		.copy_count = 1, .copy_stride = sizeof(c),
	};
	uint64_t first;

	OK(ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, &s));
	first = s.job_seq;
	OK(ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, &s));	/* reused struct */
	CHECK(s.job_seq == first + 1);
	OK(nt_bo_wait(fd, b, 5000));
}

NT_TEST(reset_status_errors)
{
	struct drm_neuron_reset_status r = { 0 };
	int fd = nt_open(0);

	OK(ioctl(fd, DRM_IOCTL_NEURON_GET_RESET_STATUS, &r));
	CHECK(r.status == DRM_NEURON_CONTEXT_OK && r.guilty_jobs == 0);
	r.flags = 1;
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_GET_RESET_STATUS, &r));
}
