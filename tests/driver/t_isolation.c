// SPDX-License-Identifier: GPL-2.0-only
/* Isolation between files, core masks, PRIME sharing. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "nt.h"

NT_TEST(isolation_foreign_handles)
{
	int a = nt_open(0), b = nt_open(0);
	uint32_t ha = nt_bo(a, 4096, 0), sa = nt_syncobj(a), hb;
	struct drm_neuron_bo_info i = { .handle = ha };
	struct drm_neuron_bo_mmap_offset m = { .handle = ha };
	struct nt_sync out = { sa, 0 };

	EXPECT_ERR(ENOENT, ioctl(b, DRM_IOCTL_NEURON_BO_INFO, &i));
	EXPECT_ERR(ENOENT, ioctl(b, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	CHECK(nt_bo_wait(b, ha, 10) == -ENOENT);
	CHECK(nt_dma(b, 0, ha, 0, ha, 2048, 16, NULL, NULL) == -ENOENT);
	/* b's own BO, a's syncobj handle: still ENOENT (b has none). */
	hb = nt_bo(b, 4096, 0);
	CHECK(hb == ha, "handles are per file and start at 1 (%u %u)", ha, hb);
	CHECK(nt_dma(b, 0, hb, 0, hb, 2048, 16, NULL, &out) == -ENOENT);
	/* a's mmap offset is not valid on b. */
	OK(ioctl(a, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, b, m.offset) == MAP_FAILED);
}

NT_TEST(isolation_core_mask)
{
	int ctl = nt_open(0), t = nt_open(0), other_dev = nt_open(1);
	uint32_t d = nt_bo(t, 4096, DRM_NEURON_BO_DEVICE);
	struct drm_neuron_set_core_mask m = { .fd = t, .core_mask = 0x22 };
	struct drm_neuron_core_info ci;
	struct drm_neuron_query q = { .type = DRM_NEURON_QUERY_CORE_INFO,
				      .size = sizeof(ci), .data = (uintptr_t)&ci };
	int p[2];

	OK(ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	CHECK(nt_param(t, DRM_NEURON_PARAM_CORE_MASK) == 0x22);
	CHECK(nt_param(ctl, DRM_NEURON_PARAM_CORE_MASK) == 0xff);
	CHECK(nt_compute(t, 0, NT_OP_ADD, 1, d, NULL, NULL) == -EACCES);
	CHECK(nt_compute(t, 7, NT_OP_ADD, 1, d, NULL, NULL) == -EACCES);
	OK(nt_compute(t, 1, NT_OP_ADD, 1, d, NULL, NULL));
	OK(nt_compute(t, 5, NT_OP_ADD, 1, d, NULL, NULL));
	OK(nt_dma(t, 0, d, 0, d, 2048, 16, NULL, NULL));	/* DMA mask kept */
	OK(ioctl(t, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(ci.index == 0 && !(ci.flags & DRM_NEURON_CORE_IN_MASK));
	q.index = 5;
	OK(ioctl(t, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(ci.flags & DRM_NEURON_CORE_IN_MASK);
	/* Errors. */
	m = (struct drm_neuron_set_core_mask){ .fd = t, .core_mask = 0x100 };
	EXPECT_ERR(EINVAL, ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	m = (struct drm_neuron_set_core_mask){ .fd = t, .flags = 1 << 3 };
	EXPECT_ERR(EINVAL, ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	m = (struct drm_neuron_set_core_mask){ .fd = -1 };
	EXPECT_ERR(EBADF, ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	CHECK(pipe(p) == 0);
	m = (struct drm_neuron_set_core_mask){ .fd = p[0] };
	EXPECT_ERR(EINVAL, ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	m = (struct drm_neuron_set_core_mask){ .fd = other_dev };
	EXPECT_ERR(EINVAL, ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	/* Mask 0: no core at all. */
	m = (struct drm_neuron_set_core_mask){ .fd = t, .core_mask = 0 };
	OK(ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m));
	CHECK(nt_compute(t, 1, NT_OP_ADD, 1, d, NULL, NULL) == -EACCES);
	OK(nt_bo_wait(t, d, 5000));
}

static void send_fd(int sock, int fd)
{
	char c = 0, ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &c, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	CHECK(sendmsg(sock, &msg, 0) == 1);
}

static int recv_fd(int sock)
{
	char c, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	int fd;

	CHECK(recvmsg(sock, &msg, 0) == 1);
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	return fd;
}

NT_TEST(prime_between_processes)
{
	int fd = nt_open(0), sv[2], status;
	uint32_t h = nt_bo(fd, 65536, 0), *p = nt_map(fd, h, 65536), i;
	struct drm_prime_handle ph = { .handle = h, .flags = DRM_CLOEXEC | DRM_RDWR };
	pid_t pid;

	for (i = 0; i < 8192; i++)
		p[i] = i ^ 0x5555;
	OK(ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid = fork();
	if (!pid) {
		int fd2 = nt_open(0), buf = recv_fd(sv[1]);
		struct drm_prime_handle ih = { .fd = buf };
		uint32_t *q, *r;

		OK(ioctl(fd2, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ih));
		q = nt_map(fd2, ih.handle, 65536);
		for (i = 0; i < 8192; i++)
			CHECK(q[i] == (i ^ 0x5555));
		/* The dma-buf itself maps too. */
		r = mmap(NULL, 65536, PROT_READ, MAP_SHARED, buf, 0);
		CHECK(r != MAP_FAILED && r[100] == (100 ^ 0x5555));
		/* The importer uses it in a job of its own. */
		OK(nt_dma(fd2, 0, ih.handle, 0, ih.handle, 32768, 16384, NULL, NULL));
		OK(nt_bo_wait(fd2, ih.handle, 5000));
		exit(0);
	}
	close(sv[1]);
	send_fd(sv[0], ph.fd);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child failed");
	for (i = 0; i < 4096; i++)
		CHECK(p[8192 + i - 0] == p[i] || i >= 4096);
	CHECK(p[8192] == (0 ^ 0x5555) && p[8192 + 4095] == (4095 ^ 0x5555));
	/* Same-device import in the exporter gives the same handle back. */
	{
		struct drm_prime_handle ih = { .fd = ph.fd };

		OK(ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ih));
		CHECK(ih.handle == h);
	}
	/* Device BOs are not exportable. */
	ph = (struct drm_prime_handle){ .handle = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE),
					.flags = DRM_CLOEXEC };
	EXPECT_ERR(EOPNOTSUPP, ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
}
