// SPDX-License-Identifier: GPL-2.0-only
/*
 * The fuzzer's calls: every neuron ioctl, GEM_CLOSE, GEM_FLINK/OPEN, PRIME
 * and syncobj ioctls, mmap, and raw ioctl numbers, with arguments that are
 * sometimes right and often not. A worker keeps a few of its BOs and
 * syncobjs so that calls reach past the argument checks.
 */
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#define R (&t->rng)

static uint32_t pick_handle(struct fuzz_thread *t, const uint32_t *pool)
{
	if (fuzz_chance(R, 6))
		return fuzz_u32(R);
	return pool[fuzz_below(R, FUZZ_POOL)];
}

static void keep(struct fuzz_thread *t, uint32_t *pool, uint32_t h)
{
	pool[fuzz_below(R, FUZZ_POOL)] = h;
}

/* A call that must fail succeeded: count it and say which. */
static void violation(struct fuzz_thread *t, const char *what)
{
	atomic_fetch_add(&fuzz_stats->violations, 1);
	printf("# fuzz: violation: worker %d: %s succeeded\n", t->w->id, what);
}

/* An ioctl whose argument is @arg, or now and then a bad pointer. */
static int call(struct fuzz_thread *t, int fd, unsigned long req, void *arg)
{
	if (fuzz_chance(R, 40))
		return ioctl(fd, req, (void *)(uintptr_t)fuzz_ptr(R, _IOC_SIZE(req)));
	return ioctl(fd, req, arg);
}

#define CALL(name, fd, req, arg) fuzz_count(t->w, name, call(t, fd, req, arg))
/* The argument as built: for the syncobj array ioctls (see op_syncobj). */
#define CALL_ARG(name, fd, req, arg) fuzz_count(t->w, name, ioctl(fd, req, arg))

static void op_get_param(struct fuzz_thread *t, struct fuzz_file *f)
{
	struct drm_neuron_get_param p = {
		.param = fuzz_chance(R, 4) ? fuzz_u32(R) : fuzz_below(R, 24),
		.index = fuzz_chance(R, 2) ? 0 : fuzz_u32(R),
	};

	CALL("GET_PARAM", f->fd, DRM_IOCTL_NEURON_GET_PARAM, &p);
}

static void op_query(struct fuzz_thread *t, struct fuzz_file *f)
{
	uint32_t size = fuzz_chance(R, 3) ? fuzz_u32(R) : fuzz_below(R, 200);
	struct drm_neuron_query q = {
		.type = fuzz_chance(R, 4) ? fuzz_u32(R) : fuzz_below(R, 4),
		.size = size, .data = fuzz_ptr(R, size < 4096 ? size : 4096),
		.index = fuzz_chance(R, 2) ? 0 : fuzz_u32(R) % 10,
		.flags = fuzz_chance(R, 8) ? fuzz_u32(R) : 0,
	};

	/* The answer is bounded whatever was asked (q itself: CALL_ARG). */
	if (!CALL_ARG("QUERY", f->fd, DRM_IOCTL_NEURON_QUERY, &q) &&
	    q.size > DRM_NEURON_MAX_QUERY_SIZE)
		violation(t, "QUERY of more than 4 KiB");
}

static void op_bo_create(struct fuzz_thread *t, struct fuzz_file *f)
{
	int dev = fuzz_chance(R, 2);
	struct drm_neuron_bo_create c = {
		.size = fuzz_chance(R, 4) ? fuzz_u64(R) : fuzz_size(R, dev ? 16 * MIB : 4 * MIB),
		.flags = dev ? DRM_NEURON_BO_DEVICE : 0,
	};
	uint32_t i;

	if (fuzz_chance(R, 10))
		c.flags = fuzz_u32(R);
	if (fuzz_chance(R, 20))
		c.handle = fuzz_u32(R);
	if (CALL("BO_CREATE", f->fd, DRM_IOCTL_NEURON_BO_CREATE, &c))
		return;
	/* Big host BOs are not kept: a DMA job would pin all of them. */
	if (!(c.flags & DRM_NEURON_BO_DEVICE) && c.size > 4 * MIB) {
		ioctl(f->fd, DRM_IOCTL_GEM_CLOSE, &(struct drm_gem_close){ .handle = c.handle });
		return;
	}
	i = fuzz_below(R, FUZZ_POOL);
	f->bos[i] = c.handle;
	f->bo_size[i] = c.size;
}

static void op_bo_misc(struct fuzz_thread *t, struct fuzz_file *f)
{
	uint32_t h = pick_handle(t, f->bos);
	struct drm_neuron_bo_info i = { .handle = h };
	struct drm_neuron_bo_mmap_offset m = { .handle = h, .offset = fuzz_next(R) & ~4095ull };
	struct drm_neuron_bo_wait bw = { .handle = h };
	struct drm_gem_close c = { .handle = h };
	void *p;

	switch (fuzz_below(R, 5)) {
	case 0:
		i.flags = fuzz_chance(R, 6) ? fuzz_u32(R) : 0;
		i.pad = fuzz_chance(R, 6) ? fuzz_u32(R) : 0;
		CALL("BO_INFO", f->fd, DRM_IOCTL_NEURON_BO_INFO, &i);
		break;
	case 1:
		m.flags = fuzz_chance(R, 6) ? fuzz_u32(R) : 0;
		if (CALL("BO_MMAP_OFFSET", f->fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m) ||
		    f != &t->w->files[t->slot])	/* another thread may swap it */
			break;
		i.handle = h;
		if (ioctl(f->fd, DRM_IOCTL_NEURON_BO_INFO, &i))
			break;
		p = mmap(NULL, i.size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, m.offset);
		if (p == MAP_FAILED)
			break;
		((volatile uint8_t *)p)[0] = 1;	/* inside the BO: must not fault */
		((volatile uint8_t *)p)[i.size - 1] = 2;
		munmap(p, i.size);
		break;
	case 2:
		bw.flags = fuzz_chance(R, 6) ? fuzz_u32(R) : 0;
		bw.timeout_ns = fuzz_chance(R, 4) ? (int64_t)fuzz_u64(R) :
						    (int64_t)nt_deadline_ms(fuzz_below(R, 20));
		if (bw.timeout_ns > (int64_t)nt_deadline_ms(50))
			bw.timeout_ns = nt_deadline_ms(50);	/* bounded */
		CALL("BO_WAIT", f->fd, DRM_IOCTL_NEURON_BO_WAIT, &bw);
		break;
	case 3:
		CALL("GEM_CLOSE", f->fd, DRM_IOCTL_GEM_CLOSE, &c);
		break;
	default: {	/* random offsets and sizes: no access */
		size_t len = 4096 << fuzz_below(R, 8);

		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 fuzz_chance(R, 4) ? MAP_PRIVATE : MAP_SHARED, f->fd,
			 fuzz_chance(R, 2) ? m.offset : fuzz_next(R) & ~4095ull);
		fuzz_count(t->w, "MMAP", p == MAP_FAILED ? -1 : 0);
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	}
}

/* SUBMIT with a BO list, syncs and commands or copies, each maybe wrong. */
static void op_submit(struct fuzz_thread *t, struct fuzz_file *f)
{
	struct drm_neuron_submit_bo bos[8];
	struct drm_neuron_dma_copy copies[8];
	struct drm_neuron_sync in[2], out[2];
	uint32_t nbos = fuzz_below(R, 5), ncopies = 1 + fuzz_below(R, 4), i;
	int dma = fuzz_chance(R, 2);
	struct drm_neuron_submit s = {
		.queue_type = fuzz_chance(R, 10) ? fuzz_u32(R) :
			      dma ? DRM_NEURON_QUEUE_DMA : DRM_NEURON_QUEUE_CORE,
		.queue_index = fuzz_chance(R, 8) ? fuzz_u32(R) : fuzz_below(R, dma ? 2 : 8),
		.bos = (uintptr_t)bos, .bo_count = nbos, .bo_stride = sizeof(bos[0]),
		.sync_stride = sizeof(in[0]),
	};

	for (i = 0; i < nbos; i++)
		bos[i] = (struct drm_neuron_submit_bo){ pick_handle(t, f->bos),
			fuzz_chance(R, 10) ? fuzz_u32(R) : 1 + fuzz_below(R, 3) };
	for (i = 0; i < 2; i++) {
		in[i] = (struct drm_neuron_sync){ pick_handle(t, f->syncobjs),
			fuzz_chance(R, 10) ? fuzz_u32(R) : 0,
			fuzz_chance(R, 2) ? 0 : fuzz_u64(R) % 8 };
		out[i] = (struct drm_neuron_sync){ pick_handle(t, f->syncobjs), 0,
			fuzz_chance(R, 2) ? 0 : fuzz_u64(R) };
	}
	if (fuzz_chance(R, 3)) {
		s.in_syncs = (uintptr_t)in;
		s.in_sync_count = 1 + fuzz_below(R, 2);
	}
	if (fuzz_chance(R, 2)) {
		s.out_syncs = (uintptr_t)out;
		s.out_sync_count = 1 + fuzz_below(R, 2);
	}
	if (dma) {
		for (i = 0; i < ncopies; i++) {
			uint64_t sz = f->bo_size[fuzz_below(R, FUZZ_POOL)];

			copies[i] = (struct drm_neuron_dma_copy){
				fuzz_below(R, nbos + 1), fuzz_below(R, nbos + 1),
				fuzz_chance(R, 3) ? fuzz_u64(R) : 0,
				fuzz_chance(R, 3) ? fuzz_u64(R) : fuzz_size(R, sz / 2),
				fuzz_chance(R, 4) ? fuzz_u64(R) : fuzz_size(R, sz / 2) };
		}
		s.copies = (uintptr_t)copies;
		s.copy_count = fuzz_chance(R, 10) ? fuzz_u32(R) : ncopies;
		s.copy_stride = fuzz_chance(R, 10) ? fuzz_u32(R) : sizeof(copies[0]);
	} else {
		uint32_t size = fuzz_chance(R, 6) ? fuzz_u32(R) : 8 + fuzz_below(R, 64);
		uint32_t *cmd = fuzz_scratch(R, 64 * 1024);

		/* Mostly ops the test engine knows, with short durations. */
		cmd[0] = fuzz_chance(R, 4) ? fuzz_u32(R) : 1 + fuzz_below(R, 5);
		cmd[1] = fuzz_below(R, 30);
		s.cmd = fuzz_chance(R, 10) ? fuzz_ptr(R, size) : (uintptr_t)cmd;
		s.cmd_size = size;
	}
	if (fuzz_chance(R, 10))
		s.bo_stride = fuzz_u32(R);
	if (fuzz_chance(R, 10))
		s.sync_stride = fuzz_u32(R);
	if (fuzz_chance(R, 12))
		s.bos = fuzz_ptr(R, nbos * 8);
	if (fuzz_chance(R, 20))
		s.flags = fuzz_u32(R);
	if (fuzz_chance(R, 20))
		s.pad = fuzz_u32(R);
	CALL("SUBMIT", f->fd, DRM_IOCTL_NEURON_SUBMIT, &s);
}

static void op_control(struct fuzz_thread *t, struct fuzz_file *f)
{
	struct fuzz_file *o = &t->w->files[fuzz_below(R, FUZZ_MAX_FILES)];
	struct drm_neuron_set_core_mask m = {
		.fd = fuzz_chance(R, 5) ? (int)fuzz_u32(R) : o->fd,
		.flags = fuzz_chance(R, 4) ? fuzz_u32(R) : fuzz_below(R, 8),
		.core_mask = fuzz_chance(R, 3) ? fuzz_u64(R) : 0xff,
		.dma_mask = fuzz_chance(R, 3) ? fuzz_u64(R) : 3,
		.tenant_id = fuzz_chance(R, 2) ? 0 : 9000 + fuzz_below(R, 4),
	};
	struct drm_neuron_reset_status rs = { .flags = fuzz_chance(R, 8) };

	if (fuzz_chance(R, 2)) {
		CALL("GET_RESET_STATUS", f->fd, DRM_IOCTL_NEURON_GET_RESET_STATUS, &rs);
		return;
	}
	if (!CALL("SET_CORE_MASK", f->fd, DRM_IOCTL_NEURON_SET_CORE_MASK, &m) &&
	    !t->w->privileged)
		violation(t, "unprivileged SET_CORE_MASK");
}

/*
 * Engine ioctls. On device 0 the test engine must stay the engine (the
 * checked worker's compute jobs go there), so attaching is only ever tried
 * with a bad argument; device 1 belongs to the fuzzers.
 */
static void op_engine(struct fuzz_thread *t, struct fuzz_file *f)
{
	/* As large as the kernel may fill whatever sizes are claimed. */
	static uint32_t cmd[64 * 1024 / 4];
	static uint8_t bos[DRM_NEURON_MAX_SUBMIT_BOS * DRM_NEURON_MAX_STRIDE];
	struct drm_neuron_engine_attach a = {
		.flags = fuzz_chance(R, 3) ? DRM_NEURON_ENGINE_DETACH : 0 };
	struct drm_neuron_engine_fetch fe = {
		.core_mask = fuzz_chance(R, 2) ? 0 : fuzz_u64(R),
		.timeout_ns = nt_deadline_ms(fuzz_below(R, 10)),
		.cmd = fuzz_chance(R, 6) ? fuzz_ptr(R, 64) : (uintptr_t)cmd,
		.cmd_size = fuzz_chance(R, 4) ? fuzz_u32(R) : sizeof(cmd),
		.bos = fuzz_chance(R, 6) ? fuzz_ptr(R, 24) : (uintptr_t)bos,
		.bo_count = fuzz_chance(R, 4) ? fuzz_u32(R) % 300 : 16,
		.bo_stride = fuzz_chance(R, 6) ? fuzz_u32(R) : 24,
	};
	struct drm_neuron_engine_complete c = {
		.job_id = fuzz_chance(R, 4) ? fuzz_u64(R) : f->job_ids[fuzz_below(R, 8)],
		.status = fuzz_chance(R, 2) ? 0 : -(int32_t)fuzz_below(R, 140),
		.flags = fuzz_chance(R, 3) ? DRM_NEURON_ENGINE_PROGRESS : 0,
	};
	int r;

	if (fuzz_chance(R, 10))
		c.status = (int32_t)fuzz_u32(R);
	switch (fuzz_below(R, 3)) {
	case 0:
		if (fuzz_chance(R, 10))
			a.flags = fuzz_u32(R);
		if (f->minor == 0 && !(a.flags & DRM_NEURON_ENGINE_DETACH))
			a.pad = 1 + fuzz_below(R, 9);
		/* Not call(): a random argument could attach to device 0. */
		r = fuzz_count(t->w, "ENGINE_ATTACH",
			       ioctl(f->fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
		if (!r && !t->w->privileged)
			violation(t, "unprivileged ENGINE_ATTACH");
		else if (!r && f->minor == 0 && !a.flags)
			violation(t, "ENGINE_ATTACH with a nonzero pad");
		break;
	case 1:
		if (!CALL("ENGINE_FETCH", f->fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &fe))
			f->job_ids[fuzz_below(R, 8)] = fe.job_id;
		break;
	default:
		CALL("ENGINE_COMPLETE", f->fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c);
	}
}

/*
 * CPU access through a dma-buf: a host BO's maps and syncs, a device BO's
 * refuses both (EINVAL, EOPNOTSUPP). Neither may crash or WARN.
 */
static void prime_cpu_access(struct fuzz_thread *t, int buf)
{
	struct dma_buf_sync sync = {
		.flags = fuzz_chance(R, 4) ? fuzz_u64(R) :
			 DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW,
	};
	size_t len = 4096 * (1 + fuzz_below(R, 4));
	void *p;

	/* Not too often: mapping a host BO backs all of its pages. */
	if (fuzz_chance(R, 4)) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf,
			 4096 * fuzz_below(R, 2));
		fuzz_count(t->w, "DMABUF_MMAP", p == MAP_FAILED ? -1 : 0);
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	if (fuzz_chance(R, 2) &&
	    !CALL("DMABUF_SYNC", buf, DMA_BUF_IOCTL_SYNC, &sync)) {
		sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
		CALL("DMABUF_SYNC", buf, DMA_BUF_IOCTL_SYNC, &sync);
	}
}

static void op_prime(struct fuzz_thread *t, struct fuzz_file *f)
{
	struct fuzz_file *o = &t->w->files[fuzz_below(R, FUZZ_MAX_FILES)];
	struct drm_prime_handle ph = {
		.handle = pick_handle(t, f->bos),
		.flags = fuzz_chance(R, 4) ? fuzz_u32(R) : DRM_CLOEXEC | DRM_RDWR,
		.fd = -1,	/* stays so when the call wrote elsewhere */
	};
	struct drm_gem_flink fl = { .handle = pick_handle(t, f->bos) };
	struct drm_gem_open go = { .name = fuzz_below(R, 8) };

	switch (fuzz_below(R, 3)) {
	case 0:
		if (CALL("PRIME_HANDLE_TO_FD", f->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph) ||
		    ph.fd < 0)
			break;
		prime_cpu_access(t, ph.fd);
		ph.handle = 0;
		ph.flags = 0;
		/*
		 * A device BO's dma-buf imports into files of its device only
		 * (another minor: EOPNOTSUPP); no check here, as another
		 * worker may reopen o meanwhile.
		 */
		if (!CALL("PRIME_FD_TO_HANDLE", o->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph))
			keep(t, o->bos, ph.handle);
		close(ph.fd);
		break;
	case 1:
		ph.fd = fuzz_chance(R, 2) ? (int)fuzz_below(R, 64) : (int)fuzz_u32(R);
		CALL("PRIME_FD_TO_HANDLE", f->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph);
		break;
	default:	/* global names: refused on accel files */
		if (!CALL("GEM_FLINK", f->fd, DRM_IOCTL_GEM_FLINK, &fl))
			violation(t, "GEM_FLINK");
		if (!CALL("GEM_OPEN", f->fd, DRM_IOCTL_GEM_OPEN, &go))
			violation(t, "GEM_OPEN");
	}
}

static void op_syncobj(struct fuzz_thread *t, struct fuzz_file *f)
{
	/* Arrays as long as any count below (QUERY writes points back). */
	static __thread uint32_t h[1 << 16];
	static __thread uint64_t pts[1 << 16];
	struct drm_syncobj_create cr = { .flags = fuzz_chance(R, 8) ? fuzz_u32(R) :
						  fuzz_below(R, 2) };
	struct drm_syncobj_destroy de;
	struct drm_syncobj_timeline_wait tw;
	struct drm_syncobj_timeline_array ta;
	struct drm_syncobj_transfer tr;
	struct drm_syncobj_handle hf;

	h[0] = pick_handle(t, f->syncobjs);
	h[1] = pick_handle(t, f->syncobjs);
	pts[0] = fuzz_u64(R) % 16;
	pts[1] = fuzz_u64(R);
	de = (struct drm_syncobj_destroy){ .handle = h[0] };
	tw = (struct drm_syncobj_timeline_wait){
		.handles = fuzz_chance(R, 8) ? fuzz_ptr(R, 8) : (uintptr_t)h,
		.points = (uintptr_t)pts, .count_handles = 1 + fuzz_below(R, 2),
		.timeout_nsec = nt_deadline_ms(fuzz_below(R, 5)),
		.flags = fuzz_below(R, 16),
	};
	/*
	 * Counts stay below 2^16, and these structs are never replaced by
	 * random bytes: above ~2^19 the DRM core's array lookup
	 * (drm_syncobj_array_find, 6.12) asks kmalloc for more than it can
	 * give without __GFP_NOWARN and WARNs, for any DRM file; not ours.
	 */
	ta = (struct drm_syncobj_timeline_array){
		.handles = (uintptr_t)h, .points = (uintptr_t)pts,
		.count_handles = fuzz_chance(R, 8) ? fuzz_below(R, 1 << 16) :
						     1 + fuzz_below(R, 2),
		.flags = fuzz_chance(R, 4) ? fuzz_u32(R) : 0,
	};
	tr = (struct drm_syncobj_transfer){
		.src_handle = h[0], .dst_handle = h[1], .src_point = pts[0],
		.dst_point = pts[1], .flags = fuzz_chance(R, 4) ? fuzz_u32(R) : 0,
	};
	hf = (struct drm_syncobj_handle){ .handle = h[0], .flags = fuzz_below(R, 4),
					  .fd = -1 };

	switch (fuzz_below(R, 7)) {
	case 0:
		if (!CALL("SYNCOBJ_CREATE", f->fd, DRM_IOCTL_SYNCOBJ_CREATE, &cr))
			keep(t, f->syncobjs, cr.handle);
		break;
	case 1:
		CALL("SYNCOBJ_DESTROY", f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &de);
		break;
	case 2:
		CALL_ARG("SYNCOBJ_TIMELINE_WAIT", f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &tw);
		break;
	case 3:
		CALL_ARG("SYNCOBJ_TIMELINE_SIGNAL", f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &ta);
		break;
	case 4:
		CALL_ARG("SYNCOBJ_QUERY", f->fd, DRM_IOCTL_SYNCOBJ_QUERY, &ta);
		break;
	case 5:
		CALL("SYNCOBJ_TRANSFER", f->fd, DRM_IOCTL_SYNCOBJ_TRANSFER, &tr);
		break;
	default:
		if (!CALL("SYNCOBJ_HANDLE_TO_FD", f->fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &hf) &&
		    hf.fd >= 0) {
			hf.handle = 0;
			hf.flags = 0;
			if (!CALL("SYNCOBJ_FD_TO_HANDLE", f->fd,
				  DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &hf))
				keep(t, f->syncobjs, hf.handle);
			close(hf.fd);
		}
	}
}

/* Driver ioctl numbers beyond the table, and known ones with other sizes. */
static void op_raw(struct fuzz_thread *t, struct fuzz_file *f)
{
	uint32_t nr = fuzz_below(R, 0x20), size = fuzz_below(R, 128);
	unsigned long req;

	/* Zeros would attach: device 0 keeps its engine (see op_engine). */
	if (nr == DRM_NEURON_ENGINE_ATTACH && f->minor == 0)
		nr = 0x1f;
	req = _IOC(fuzz_below(R, 4), DRM_IOCTL_BASE, DRM_COMMAND_BASE + nr, size);
	fuzz_count(t->w, "RAW", ioctl(f->fd, req, fuzz_scratch(R, 128)));
}

/* A child submits on inherited descriptors and exits at once. */
static void op_fork(struct fuzz_thread *t, struct fuzz_file *f)
{
	pid_t pid = fork();

	if (!pid) {
		for (int i = 0; i < 3; i++)
			op_submit(t, f);
		_exit(0);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

void fuzz_file_open(struct fuzz_worker *w, struct fuzz_file *f, int minor)
{
	memset(f, 0, sizeof(*f));
	f->minor = minor;
	f->fd = nt_open(minor);
	fuzz_trace(w, "open accel%d -> %d", minor, f->fd);
}

void fuzz_one(struct fuzz_thread *t)
{
	static void (*const ops[])(struct fuzz_thread *, struct fuzz_file *) = {
		op_get_param, op_query, op_bo_create, op_bo_create, op_bo_misc,
		op_bo_misc, op_submit, op_submit, op_submit, op_control,
		op_engine, op_engine, op_prime, op_syncobj, op_syncobj, op_raw,
	};
	struct fuzz_file *own = &t->w->files[t->slot];
	struct fuzz_file *f = fuzz_chance(R, 4) ? &t->w->files[FUZZ_CHURN] : own;

	if (fuzz_chance(R, 500)) {	/* start over with a fresh file */
		fuzz_trace(t->w, "reopen slot %d", t->slot);
		if (!t->w->privileged) {	/* the node is root's alone */
			int fd = open("/dev/accel/accel0", O_RDWR | O_CLOEXEC);

			if (fuzz_count(t->w, "OPEN", fd) >= 0) {
				violation(t, "unprivileged open of the node");
				close(fd);
			}
			return;
		}
		close(own->fd);
		fuzz_file_open(t->w, own, own->minor);
		return;
	}
	if (fuzz_chance(R, 400)) {
		op_fork(t, f);
		return;
	}
	ops[fuzz_below(R, sizeof(ops) / sizeof(ops[0]))](t, f);
}
