// SPDX-License-Identifier: GPL-2.0-only
/*
 * The permission model: a file starts with no core and no DMA queue, only the
 * controller (CAP_SYS_ADMIN) grants them, a ban follows the tenant to its
 * other and later files, the node is root's alone, and no file shares BOs
 * through global GEM names.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "nt.h"

NT_TEST(access_new_file_has_no_queues)
{
	int ctl = nt_open(0), fd = nt_open_bare(0);
	uint32_t d = nt_bo(fd, 8192, DRM_NEURON_BO_DEVICE);
	/* A caller built against API 1.0: 16 bytes, cores only. */
	struct { int32_t fd; uint32_t flags; uint64_t core_mask; } old = {
		.fd = fd, .core_mask = 0x10 };

	CHECK(nt_param(fd, DRM_NEURON_PARAM_CORE_MASK) == 0, "new file has cores %#llx",
	      (unsigned long long)nt_param(fd, DRM_NEURON_PARAM_CORE_MASK));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_DMA_MASK) == 0);
	CHECK(nt_compute(fd, 0, NT_OP_ADD, 1, d, NULL, NULL) == -EACCES);
	CHECK(nt_dma(fd, 0, d, 0, d, 4096, 16, NULL, NULL) == -EACCES);
	/* The controller grants core 2 and DMA queue 1. */
	OK(nt_grant(ctl, fd, 0x4, 0x2, 0, 0));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_CORE_MASK) == 0x4);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_DMA_MASK) == 0x2);
	CHECK(nt_compute(fd, 0, NT_OP_ADD, 1, d, NULL, NULL) == -EACCES);
	OK(nt_compute(fd, 2, NT_OP_ADD, 1, d, NULL, NULL));
	CHECK(nt_dma(fd, 0, d, 0, d, 4096, 16, NULL, NULL) == -EACCES);
	OK(nt_dma(fd, 1, d, 0, d, 4096, 16, NULL, NULL));
	OK(ioctl(ctl, DRM_IOW(DRM_COMMAND_BASE + DRM_NEURON_SET_CORE_MASK, old), &old));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_CORE_MASK) == 0x10);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_DMA_MASK) == 0x2, "API 1.0 call kept DMA");
	OK(nt_bo_wait(fd, d, 5000));
}

NT_TEST(access_set_mask_errors)
{
	int ctl = nt_open(0), fd = nt_open_bare(0);
	struct drm_neuron_set_core_mask m;

#define SET(...) (m = (struct drm_neuron_set_core_mask){ .fd = fd, __VA_ARGS__ }, \
		  ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m))
	OK(SET(.core_mask = 1));
	EXPECT_ERR(EINVAL, SET(.flags = 1 << 3));
	EXPECT_ERR(EINVAL, SET(.dma_mask = 1));
	EXPECT_ERR(EINVAL, SET(.flags = DRM_NEURON_MASK_DMA, .dma_mask = 4));
	EXPECT_ERR(EINVAL, SET(.flags = DRM_NEURON_MASK_TENANT));
	EXPECT_ERR(EINVAL, SET(.tenant_id = 5));
	OK(SET(.flags = DRM_NEURON_MASK_TENANT, .tenant_id = 5));
	OK(SET(.flags = DRM_NEURON_MASK_TENANT, .tenant_id = 5));
	EXPECT_ERR(EINVAL, SET(.flags = DRM_NEURON_MASK_TENANT, .tenant_id = 6));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_TENANT_ID) == 5);
	CHECK(nt_param(ctl, DRM_NEURON_PARAM_TENANT_ID) == 0);
#undef SET
}

/* Reopening the node skips neither the mask nor a ban of the tenant. */
NT_TEST(access_reopen_keeps_mask_and_ban)
{
	pid_t e = nt_engine_start(0);
	int ctl = nt_open_bare(0), t1 = nt_open_bare(0), t2, t3, t4;
	uint32_t d1, d2, d4, h3;
	struct nt_sync s1, s4;
	struct drm_neuron_reset_status r = { 0 };
	const uint64_t tenant = 1007, other = 1008;

	OK(nt_grant(ctl, t1, 0x1, 0x1, 0, tenant));
	CHECK(nt_param(t1, DRM_NEURON_PARAM_TENANT_ID) == tenant);
	/* A new file of the same node has nothing, whoever opened it. */
	t2 = nt_open_bare(0);
	d2 = nt_bo(t2, 4096, DRM_NEURON_BO_DEVICE);
	CHECK(nt_param(t2, DRM_NEURON_PARAM_CORE_MASK) == 0);
	CHECK(nt_compute(t2, 0, NT_OP_ADD, 1, d2, NULL, NULL) == -EACCES);
	/* t1's job overruns: t1 and its tenant are banned. */
	d1 = nt_bo(t1, 4096, DRM_NEURON_BO_DEVICE);
	s1 = (struct nt_sync){ nt_syncobj(t1), 0 };
	OK(nt_compute(t1, 0, NT_OP_HANG, 0, d1, NULL, &s1));
	OK(nt_syncobj_wait(t1, s1.handle, 0, 10 * nt_job_timeout_ms));
	CHECK(nt_fence_status(t1, s1.handle) == -ETIMEDOUT);
	/* The controller gives t2 to the same tenant: banned from the start. */
	OK(nt_grant(ctl, t2, 0x1, 0x1, 0, tenant));
	CHECK(nt_compute(t2, 0, NT_OP_ADD, 1, d2, NULL, NULL) == -ECANCELED);
	CHECK(nt_dma(t2, 0, d2, 0, d2, 2048, 16, NULL, NULL) == -ECANCELED);
	OK(ioctl(t2, DRM_IOCTL_NEURON_GET_RESET_STATUS, &r));
	CHECK(r.status == DRM_NEURON_CONTEXT_BANNED && r.guilty_jobs == 0);
	/* Also once every file of the tenant is closed. */
	close(t1);
	close(t2);
	t3 = nt_open_bare(0);
	OK(nt_grant(ctl, t3, 0x1, 0x1, 0, tenant));
	h3 = nt_bo(t3, 4096, 0);
	CHECK(nt_dma(t3, 0, h3, 0, h3, 2048, 16, NULL, NULL) == -ECANCELED);
	CHECK(nt_compute(t3, 0, NT_OP_ADD, 1, 0, NULL, NULL) == -ECANCELED);
	/* Another tenant is not affected. */
	t4 = nt_open_bare(0);
	OK(nt_grant(ctl, t4, 0x1, 0x1, 0, other));
	d4 = nt_bo(t4, 4096, DRM_NEURON_BO_DEVICE);
	s4 = (struct nt_sync){ nt_syncobj(t4), 0 };
	OK(nt_compute(t4, 0, NT_OP_ADD, 1, d4, NULL, &s4));
	OK(nt_syncobj_wait(t4, s4.handle, 0, 5000));
	CHECK(nt_fence_status(t4, s4.handle) == 1);
	/* Only the controller lifts a ban. */
	OK(nt_grant(ctl, t3, 0x1, 0x1, DRM_NEURON_MASK_LIFT_BAN, tenant));
	OK(nt_compute(t3, 0, NT_OP_ADD, 1, 0, NULL, NULL));
	nt_engine_stop(e);
}

static void unprivileged_child(void *arg)
{
	int inherited = *(int *)arg, fd;
	struct drm_neuron_set_core_mask m = { .fd = inherited, .core_mask = 1 };
	struct drm_neuron_engine_attach a = { 0 };
	struct drm_neuron_engine_fetch f = { .bo_stride = 24 };
	struct drm_neuron_engine_complete c = { .job_id = 1 };
	uint32_t h;

	nt_drop_privileges();
	/* The node is root's alone, as the udev rule leaves it. */
	CHECK(open("/dev/accel/accel0", O_RDWR) < 0 && errno == EACCES,
	      "unprivileged open: %s", strerror(errno));
	/* A file root opened and handed over lends no privilege ... */
	EXPECT_ERR(EACCES, ioctl(inherited, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	EXPECT_ERR(EACCES, ioctl(inherited, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	EXPECT_ERR(EPERM, ioctl(inherited, DRM_IOCTL_NEURON_ENGINE_FETCH, &f));
	EXPECT_ERR(EPERM, ioctl(inherited, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c));
	/* ... and no queue: the controller grants those. */
	h = nt_bo(inherited, 4096, 0);
	CHECK(nt_dma(inherited, 0, h, 0, h, 2048, 4, NULL, NULL) == -EACCES);
	CHECK(nt_compute(inherited, 0, NT_OP_ADD, 1, 0, NULL, NULL) == -EACCES);
	/* A node left world-writable by mistake gives a file with nothing. */
	fd = open("/dev/accel/accel1", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "open of the 0666 node: %s", strerror(errno));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_CORE_MASK) == 0);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_DMA_MASK) == 0);
	CHECK(nt_grant(fd, fd, 1, 1, 0, 0) == -EACCES);
	h = nt_bo(fd, 4096, 0);
	CHECK(nt_dma(fd, 0, h, 0, h, 2048, 4, NULL, NULL) == -EACCES);
}

NT_TEST(access_unprivileged)
{
	int fd = nt_open_bare(0), status;
	struct stat st;

	CHECK(stat("/dev/accel/accel0", &st) == 0);
	CHECK((st.st_mode & 0777) == 0600 && st.st_uid == 0 && st.st_gid == 0,
	      "node mode %o owner %u:%u", st.st_mode & 0777, st.st_uid, st.st_gid);
	CHECK(chmod("/dev/accel/accel1", 0666) == 0);
	status = nt_in_child(unprivileged_child, &fd);
	CHECK(chmod("/dev/accel/accel1", 0600) == 0);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child failed");
}

/* GEM_FLINK/GEM_OPEN would share BOs by global name past per-file handles. */
NT_TEST(access_no_global_gem_names)
{
	int fd = nt_open(0);
	struct drm_gem_flink f = { .handle = nt_bo(fd, 4096, 0) };
	struct drm_gem_flink fd2 = { .handle = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE) };
	struct drm_gem_open o = { .name = 1 };

	EXPECT_ERR(EACCES, ioctl(fd, DRM_IOCTL_GEM_FLINK, &f));
	EXPECT_ERR(EACCES, ioctl(fd, DRM_IOCTL_GEM_FLINK, &fd2));
	EXPECT_ERR(EACCES, ioctl(fd, DRM_IOCTL_GEM_OPEN, &o));
}
