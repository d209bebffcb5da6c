// SPDX-License-Identifier: GPL-2.0-only
/*
 * Races: submits from many threads, a descriptor closed or replaced
 * (dup2) under running submits, GEM_CLOSE racing submits that name the BO,
 * DETACH racing COMPLETE, and an engine killed while it holds fetched jobs.
 * Every job that reports success must have done its work, nothing may leak,
 * and the kernel log must stay clean (the suite checks it).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "nt.h"

#define THREADS	4

struct worker {
	int fd, id, iterations;
	atomic_int *stop;
	int errors;
};

/* host -> HBM -> host with a pattern of its own, checked; compute ADD too. */
static void *submit_worker(void *arg)
{
	struct worker *w = arg;
	uint32_t n = 16384 + w->id * 1024, i, it;
	uint32_t src = nt_bo(w->fd, n * 4, 0), dst = nt_bo(w->fd, n * 4, 0);
	uint32_t dev = nt_bo(w->fd, n * 4, DRM_NEURON_BO_DEVICE);
	uint32_t *ps = nt_map(w->fd, src, n * 4), *pd = nt_map(w->fd, dst, n * 4);
	struct nt_sync s = { nt_syncobj(w->fd), 0 };

	for (it = 0; it < (uint32_t)w->iterations; it++) {
		for (i = 0; i < n; i++)
			ps[i] = i * 31 + it + w->id;
		OK(nt_dma(w->fd, it & 1, src, 0, dev, 0, n * 4, NULL, NULL));
		OK(nt_compute(w->fd, (w->id * 2 + it) % 8, NT_OP_ADD, 5, dev, NULL, NULL));
		OK(nt_dma(w->fd, (it + 1) & 1, dev, 0, dst, 0, n * 4, NULL, &s));
		OK(nt_syncobj_wait(w->fd, s.handle, 0, 20000));
		CHECK(nt_fence_status(w->fd, s.handle) == 1);
		for (i = 0; i < n; i++)
			if (pd[i] != i * 31 + it + w->id + 5)
				w->errors++;
	}
	return NULL;
}

NT_TEST(race_multithreaded_submit)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0), i, errors = 0;
	struct worker w[THREADS];
	pthread_t th[THREADS];

	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .fd = fd, .id = i, .iterations = 8 };
		CHECK(pthread_create(&th[i], NULL, submit_worker, &w[i]) == 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		errors += w[i].errors;
	}
	CHECK(!errors, "%d words wrong", errors);
	nt_engine_stop(e);
}

/* Submits on w->fd until told to stop; the fd may stop being ours. */
static void *blind_submitter(void *arg)
{
	struct worker *w = arg;
	int r;

	while (!atomic_load(w->stop)) {
		r = nt_dma(w->fd, w->id & 1, 1, 0, 2, 0, 4096, NULL, NULL);
		if (r && r != -EBADF && r != -ENOTTY && r != -ENOENT &&
		    r != -EBUSY)
			w->errors++;
	}
	return NULL;
}

/* The descriptor is closed and replaced (dup2) under running submits. */
NT_TEST(race_close_dup2_during_submit)
{
	int fd = nt_open(0), null = open("/dev/null", O_RDWR), i, k, errors = 0;
	atomic_int stop = 0;
	struct worker w[THREADS];
	pthread_t th[THREADS];
	uint64_t t0 = nt_now_ns();

	nt_bo(fd, 4096, 0);	/* handles 1 and 2 */
	nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	for (i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .fd = fd, .id = i, .stop = &stop };
		CHECK(pthread_create(&th[i], NULL, blind_submitter, &w[i]) == 0);
	}
	for (k = 0; nt_now_ns() - t0 < 1500000000ull; k++) {
		int fresh = nt_open(0);

		nt_bo(fresh, 4096, 0);
		nt_bo(fresh, 4096, DRM_NEURON_BO_DEVICE);
		if (k & 1)
			CHECK(dup2(null, fd) == fd);	/* not a device file now */
		else
			close(fd);
		usleep(2000);
		CHECK(dup2(fresh, fd) == fd);	/* a new device file */
		close(fresh);
		usleep(2000);
	}
	atomic_store(&stop, 1);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		errors += w[i].errors;
	}
	printf("# %d descriptor swaps\n", k);
	CHECK(!errors, "%d unexpected errors", errors);
	OK(nt_bo_wait(fd, 2, 10000));
}

/* GEM_CLOSE of a BO while other threads submit jobs naming it. */
static void *closer(void *arg)
{
	struct worker *w = arg;
	struct drm_gem_close c;

	while (!atomic_load(w->stop)) {
		c = (struct drm_gem_close){ .handle = 1 + (nt_now_ns() >> 4) % 64 };
		ioctl(w->fd, DRM_IOCTL_GEM_CLOSE, &c);
		usleep(100);
	}
	return NULL;
}

NT_TEST(race_gem_close_vs_submit)
{
	int fd = nt_open(0), i, errors = 0, made = 0;
	atomic_int stop = 0;
	struct worker w[2];
	pthread_t th[2];
	uint64_t used0 = nt_param(fd, DRM_NEURON_PARAM_HBM_USED), t0 = nt_now_ns();

	for (i = 0; i < 2; i++) {
		w[i] = (struct worker){ .fd = fd, .id = i, .stop = &stop };
		CHECK(pthread_create(&th[i], NULL, i ? closer : blind_submitter,
				     &w[i]) == 0);
	}
	while (nt_now_ns() - t0 < 1500000000ull) {
		struct drm_neuron_bo_create c = {
			.size = 4096 << (made % 4),
			.flags = made % 2 ? DRM_NEURON_BO_DEVICE : 0 };

		if (!ioctl(fd, DRM_IOCTL_NEURON_BO_CREATE, &c))
			made++;
		if (c.handle > 64)	/* keep handles in the closer's range */
			ioctl(fd, DRM_IOCTL_GEM_CLOSE, &(struct drm_gem_close){ .handle = c.handle });
	}
	atomic_store(&stop, 1);
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		errors += w[i].errors;
	}
	printf("# %d BOs made\n", made);
	CHECK(!errors, "%d unexpected submit errors", errors);
	close(fd);
	fd = nt_open(0);
	t0 = nt_now_ns();
	while (nt_param(fd, DRM_NEURON_PARAM_HBM_USED) != used0 &&
	       nt_now_ns() - t0 < 5000000000ull)
		usleep(10000);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_HBM_USED) == used0, "HBM leaked");
}

struct engine_race {
	int fd;
	atomic_int *stop;
	int completed, detaches;
};

static void *race_completer(void *arg)
{
	struct engine_race *r = arg;
	uint32_t cmd[16];
	struct drm_neuron_engine_bo bos[8];

	while (!atomic_load(r->stop)) {
		struct drm_neuron_engine_fetch f = {
			.timeout_ns = nt_deadline_ms(20), .cmd = (uintptr_t)cmd,
			.cmd_size = sizeof(cmd), .bos = (uintptr_t)bos,
			.bo_count = 8, .bo_stride = sizeof(bos[0]),
		};
		struct drm_neuron_engine_complete c = { 0 };

		if (ioctl(r->fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f))
			continue;	/* ETIME, or EPERM while detached */
		c.job_id = f.job_id;
		if (!ioctl(r->fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c))
			r->completed++;
	}
	return NULL;
}

static void *race_detacher(void *arg)
{
	struct engine_race *r = arg;
	struct drm_neuron_engine_attach a;

	while (!atomic_load(r->stop)) {
		a = (struct drm_neuron_engine_attach){ .flags = DRM_NEURON_ENGINE_DETACH };
		if (!ioctl(r->fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a))
			r->detaches++;
		usleep(500);
		a = (struct drm_neuron_engine_attach){ 0 };
		ioctl(r->fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a);
		usleep(1500);
	}
	return NULL;
}

NT_TEST(race_detach_vs_complete)
{
	int eng = nt_open_bare(0), fd = nt_open(0), i, ok = 0, nodev = 0;
	struct drm_neuron_engine_attach a = { 0 };
	atomic_int stop = 0;
	struct engine_race r = { .fd = eng, .stop = &stop };
	pthread_t th[3];
	struct nt_sync s = { nt_syncobj(fd), 0 };
	uint64_t t0 = nt_now_ns();

	OK(ioctl(eng, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	CHECK(pthread_create(&th[0], NULL, race_completer, &r) == 0);
	CHECK(pthread_create(&th[1], NULL, race_completer, &r) == 0);
	CHECK(pthread_create(&th[2], NULL, race_detacher, &r) == 0);
	for (i = 0; nt_now_ns() - t0 < 1500000000ull; i++) {
		OK(nt_compute(fd, i % 8, NT_OP_ADD, 1, 0, NULL, &s));
		OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
		switch (nt_fence_status(fd, s.handle)) {
		case 1: ok++; break;
		case -ENODEV: nodev++; break;
		default: CHECK(0, "job %d: status %d", i, nt_fence_status(fd, s.handle));
		}
	}
	atomic_store(&stop, 1);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	printf("# %d jobs done, %d failed by a detach; %d detaches\n", ok, nodev,
	       r.detaches);
	CHECK(ok > 0 && r.detaches > 0);
}

/* An engine that fetches one job per core and sits on them. */
static void hoarding_engine(int minor, int ready_fd)
{
	int fd, got = 0;
	struct drm_neuron_engine_attach a = { 0 };
	uint32_t cmd[16];
	struct drm_neuron_engine_bo bos[8];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fd = nt_open_bare(minor);
	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	CHECK(mmap(NULL, a.hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   a.hbm_mmap_offset) != MAP_FAILED);
	CHECK(write(ready_fd, "r", 1) == 1);
	while (got < 8) {
		struct drm_neuron_engine_fetch f = {
			.timeout_ns = nt_deadline_ms(5000), .cmd = (uintptr_t)cmd,
			.cmd_size = sizeof(cmd), .bos = (uintptr_t)bos,
			.bo_count = 8, .bo_stride = sizeof(bos[0]),
		};

		OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f));
		got++;
	}
	CHECK(write(ready_fd, "f", 1) == 1);
	pause();
}

NT_TEST(race_engine_killed_with_jobs_fetched)
{
	int fd = nt_open(0), p[2], i;
	uint64_t used0 = nt_param(fd, DRM_NEURON_PARAM_HBM_USED);
	struct nt_sync s[8];
	uint32_t d[8];
	pid_t pid;
	char c;

	CHECK(pipe(p) == 0);
	pid = fork();
	if (!pid)
		hoarding_engine(0, p[1]);
	CHECK(read(p[0], &c, 1) == 1 && c == 'r');
	for (i = 0; i < 8; i++) {
		d[i] = nt_bo(fd, 64 * 1024, DRM_NEURON_BO_DEVICE);
		s[i] = (struct nt_sync){ nt_syncobj(fd), 0 };
		OK(nt_compute(fd, i, NT_OP_ADD, 1, d[i], NULL, &s[i]));
	}
	CHECK(read(p[0], &c, 1) == 1 && c == 'f', "engine did not fetch 8 jobs");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (i = 0; i < 8; i++) {
		OK(nt_syncobj_wait(fd, s[i].handle, 0, 5000));
		CHECK(nt_fence_status(fd, s[i].handle) == -ENODEV);
	}
	CHECK(nt_param(fd, DRM_NEURON_PARAM_ENGINE_ATTACHED) == 0);
	for (i = 0; i < 8; i++)
		nt_close_bo(fd, d[i]);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_HBM_USED) == used0);
	/* A new engine attaches and works. */
	pid = nt_engine_start(0);
	d[0] = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	OK(nt_compute(fd, 0, NT_OP_ADD, 1, d[0], NULL, &s[0]));
	OK(nt_syncobj_wait(fd, s[0].handle, 0, 5000));
	CHECK(nt_fence_status(fd, s[0].handle) == 1);
	nt_engine_stop(pid);
}
