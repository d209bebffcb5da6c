// SPDX-License-Identifier: GPL-2.0-only
/* Device discovery, GET_PARAM and QUERY. */
#include "nt.h"

NT_TEST(version_and_caps)
{
	char name[32] = { 0 };
	struct drm_version v = { .name = name, .name_len = sizeof(name) - 1 };
	struct drm_get_cap cap = { .capability = DRM_CAP_SYNCOBJ_TIMELINE };
	int fd = nt_open(0);

	OK(ioctl(fd, DRM_IOCTL_VERSION, &v));
	CHECK(!strcmp(name, "neuron"), "name %s", name);
	CHECK(v.version_major == DRM_NEURON_API_MAJOR);
	OK(ioctl(fd, DRM_IOCTL_GET_CAP, &cap));
	CHECK(cap.value == 1);
	cap.capability = DRM_CAP_SYNCOBJ;
	OK(ioctl(fd, DRM_IOCTL_GET_CAP, &cap));
	CHECK(cap.value == 1);
	/* Two devices were created (devices=2). */
	close(nt_open(1));
}

NT_TEST(get_param_values)
{
	int fd = nt_open(0);

	CHECK(nt_param(fd, DRM_NEURON_PARAM_API_VERSION) ==
	      ((uint64_t)DRM_NEURON_API_MAJOR << 32 | DRM_NEURON_API_MINOR));
	CHECK(nt_param(fd, DRM_NEURON_PARAM_PLATFORM_TYPE) ==
	      DRM_NEURON_PLATFORM_SIMULATED);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_PROFILE) == DRM_NEURON_PROFILE_TRN2);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_NUM_CORES) == 8);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_NUM_DMA_QUEUES) == 2);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_HBM_SIZE) == 256 * MIB);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_CORE_MASK) == 0xff);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_CAPABILITIES) & DRM_NEURON_CAP_ENGINE);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_MAX_BO_SIZE) == 4096 * MIB);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_MAX_CMD_SIZE) == 65536);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_JOB_TIMEOUT_MS) ==
	      (uint64_t)nt_job_timeout_ms);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_ENGINE_ATTACHED) == 0);
	nt_param(fd, DRM_NEURON_PARAM_HBM_USED);
	nt_param(fd, DRM_NEURON_PARAM_RESET_COUNT);
}

NT_TEST(get_param_errors)
{
	struct drm_neuron_get_param p = { .param = 99 };
	int fd = nt_open(0);

	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p));
	p = (struct drm_neuron_get_param){ .param = DRM_NEURON_PARAM_NUM_CORES,
					   .index = 1 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p));
	p = (struct drm_neuron_get_param){ .param = DRM_NEURON_PARAM_CORE_BUSY_NS,
					   .index = 8 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p));
	p.index = 7;
	OK(ioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p));
}

NT_TEST(query_device_info)
{
	struct drm_neuron_device_info info;
	struct drm_neuron_query q = { .type = DRM_NEURON_QUERY_DEVICE_INFO };
	unsigned char big[sizeof(info) + 64];
	size_t i;
	int fd = nt_open(0);

	/* Size probe. */
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(q.size == sizeof(info), "size %u", q.size);
	/* Exact size. */
	memset(&info, 0xff, sizeof(info));
	q.data = (uintptr_t)&info;
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(info.num_cores == 8 && info.num_dma_queues == 2);
	CHECK(info.platform == DRM_NEURON_PLATFORM_SIMULATED);
	CHECK(!strcmp(info.platform_name, "simulated"));
	CHECK(!strcmp(info.profile_name, "trn2"));
	CHECK(info.hbm_size == 256 * MIB && info.core_mask == 0xff);
	CHECK(info.api_major == DRM_NEURON_API_MAJOR);
	/* Larger (newer caller): the tail comes back zeroed. */
	memset(big, 0xff, sizeof(big));
	q.data = (uintptr_t)big;
	q.size = sizeof(big);
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(q.size == sizeof(info));
	for (i = sizeof(info); i < sizeof(big); i++)
		CHECK(big[i] == 0, "byte %zu", i);
	/* Smaller (older caller): only a prefix is written. */
	memset(big, 0xee, sizeof(big));
	q.size = 8;
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(q.size == sizeof(info) && big[8] == 0xee && big[0] == 1);
}

NT_TEST(query_core_and_hbm)
{
	struct drm_neuron_core_info core;
	struct drm_neuron_hbm_info hbm;
	struct drm_neuron_query q = { .type = DRM_NEURON_QUERY_CORE_INFO,
				      .index = 7, .size = sizeof(core),
				      .data = (uintptr_t)&core };
	int fd = nt_open(0);

	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(core.index == 7 && (core.flags & DRM_NEURON_CORE_IN_MASK));
	q = (struct drm_neuron_query){ .type = DRM_NEURON_QUERY_HBM_INFO,
				       .size = sizeof(hbm),
				       .data = (uintptr_t)&hbm };
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(hbm.size == 256 * MIB && hbm.largest_free <= hbm.size);
	CHECK(hbm.used <= hbm.size && hbm.pad == 0);
}

NT_TEST(query_errors)
{
	struct drm_neuron_device_info info;
	struct drm_neuron_query q;
	int fd = nt_open(0);

#define Q(...) (q = (struct drm_neuron_query){ .size = sizeof(info), \
		.data = (uintptr_t)&info, __VA_ARGS__ }, \
		ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q))
	OK(Q(.type = DRM_NEURON_QUERY_DEVICE_INFO));
	EXPECT_ERR(EINVAL, Q(.type = 99));
	EXPECT_ERR(EINVAL, Q(.type = DRM_NEURON_QUERY_DEVICE_INFO, .flags = 1));
	EXPECT_ERR(EINVAL, Q(.type = DRM_NEURON_QUERY_DEVICE_INFO, .index = 1));
	EXPECT_ERR(EINVAL, Q(.type = DRM_NEURON_QUERY_CORE_INFO, .index = 8));
	EXPECT_ERR(EINVAL, Q(.type = DRM_NEURON_QUERY_HBM_INFO, .index = 1));
	EXPECT_ERR(EFAULT, Q(.type = DRM_NEURON_QUERY_DEVICE_INFO, .data = 16));
#undef Q
}
