// SPDX-License-Identifier: GPL-2.0-only
/* Isolation between files, core masks, PRIME sharing. */
#include <fcntl.h>
#include <linux/dma-buf.h>
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
}

/*
 * Device BOs: PRIME export works, but the dma-buf only imports into files of
 * the same device (as the very same BO); see prime_device_bo_* below.
 */

/* HBM used (sysfs) reaches want within 2 s: jobs drop BOs as they retire. */
static void wait_hbm_used(int minor, long long want)
{
	long long used = 0;
	int i;

	for (i = 0; i < 200; i++) {
		used = nt_sysfs(minor, "hbm_used_bytes");
		if (used == want)
			return;
		usleep(10000);
	}
	CHECK(used == want, "HBM used %lld, want %lld", used, want);
}

static int export_bo(int fd, uint32_t h)
{
	struct drm_prime_handle ph = { .handle = h, .flags = DRM_CLOEXEC | DRM_RDWR };

	OK(ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
	return ph.fd;
}

static int import_bo(int fd, int buf, uint32_t *h)
{
	struct drm_prime_handle ih = { .fd = buf };
	int ret = ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ih);

	*h = ih.handle;
	return ret;
}

static struct drm_neuron_bo_info bo_info(int fd, uint32_t h)
{
	struct drm_neuron_bo_info i = { .handle = h };

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
	return i;
}

NT_TEST(prime_device_bo_same_device)
{
	long long used0 = nt_sysfs(0, "hbm_used_bytes");
	int a = nt_open(0), b = nt_open(0), other = nt_open(1), buf;
	uint32_t d = nt_bo(a, 65536, DRM_NEURON_BO_DEVICE), hb, h2, *p, *q, i;
	uint32_t hh = nt_bo(b, 16384, 0);
	struct drm_neuron_bo_info ia, ib;
	struct drm_neuron_bo_mmap_offset m = { .handle = d };
	struct dma_buf_sync sync = { .flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ };

	nt_dev_fill(a, d, 16384);
	buf = export_bo(a, d);
	OK(import_bo(b, buf, &hb));
	ia = bo_info(a, d);
	ib = bo_info(b, hb);
	CHECK(ib.device_addr == ia.device_addr);
	CHECK(ib.size == 65536 && ia.size == 65536);
	CHECK(ib.bo_flags == DRM_NEURON_BO_DEVICE);
	CHECK(nt_sysfs(0, "hbm_used_bytes") == used0 + 65536, "one BO, once");
	/* b's DMA jobs read what a's wrote, and write what a reads. */
	p = nt_dev_read(b, hb, 16384);
	for (i = 0; i < 16384; i++)
		CHECK(p[i] == i, "word %u = %u", i, p[i]);
	q = nt_map(b, hh, 16384);
	for (i = 0; i < 4096; i++)
		q[i] = ~i;
	OK(nt_dma(b, 0, hh, 0, hb, 32768, 16384, NULL, NULL));
	OK(nt_bo_wait(b, hb, 5000));
	p = nt_dev_read(a, d, 16384);
	for (i = 0; i < 16384; i++)
		CHECK(p[i] == (i >= 8192 && i < 12288 ? ~(i - 8192) : i),
		      "word %u = %u", i, p[i]);
	/* Re-imports give the handles each file has. */
	OK(import_bo(a, buf, &h2));
	CHECK(h2 == d, "%u %u", h2, d);
	OK(import_bo(b, buf, &h2));
	CHECK(h2 == hb, "%u %u", h2, hb);
	/* No CPU access: not the dma-buf, not the import, not the original. */
	CHECK(mmap(NULL, 65536, PROT_READ, MAP_SHARED, buf, 0) == MAP_FAILED &&
	      errno == EINVAL);
	EXPECT_ERR(EOPNOTSUPP, ioctl(buf, DMA_BUF_IOCTL_SYNC, &sync));
	EXPECT_ERR(EINVAL, ioctl(a, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	m.handle = hb;
	EXPECT_ERR(EINVAL, ioctl(b, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	/* Another neuron device refuses it (attach: EOPNOTSUPP). */
	EXPECT_ERR(EOPNOTSUPP, import_bo(other, buf, &h2));
	CHECK(nt_sysfs(1, "hbm_used_bytes") == 0);
	/* HBM stays the creator's in fdinfo: b has imported it only. */
	CHECK(nt_fdinfo(a, "drm-memory-hbm") == 64);
	CHECK(nt_fdinfo(b, "drm-memory-hbm") == 0);
	/* The creator lets go first: the import keeps the BO and its data. */
	nt_close_bo(a, d);
	close(buf);
	p = nt_dev_read(b, hb, 16384);
	CHECK(p[0] == 0 && p[8192] == ~0u && p[16383] == 16383);
	CHECK(nt_sysfs(0, "hbm_used_bytes") == used0 + 65536);
	nt_close_bo(b, hb);
	wait_hbm_used(0, used0);
	close(other);
}

/* Closing in other orders frees the BO once, when the last reference goes. */
NT_TEST(prime_device_bo_close_orders)
{
	long long used0 = nt_sysfs(0, "hbm_used_bytes");
	int a = nt_open(0), b = nt_open(0), buf, round;
	uint32_t d, hb, *p;

	for (round = 0; round < 4; round++) {
		/*
		 * Round 2 closes the exporting file, round 3 the importing
		 * one: files with nothing mapped, as a mapping of a host BO
		 * keeps its file open.
		 */
		if (round == 2)
			a = nt_open(0);
		d = nt_bo(a, 8192, DRM_NEURON_BO_DEVICE);
		if (round != 2)
			nt_dev_fill(a, d, 2048);
		buf = export_bo(a, d);
		switch (round) {
		case 0:	/* dma-buf, import, original */
			OK(import_bo(b, buf, &hb));
			close(buf);
			nt_close_bo(b, hb);
			CHECK(nt_dev_read(a, d, 2048)[2047] == 2047);
			nt_close_bo(a, d);
			break;
		case 1:	/* original before the import: the dma-buf keeps it */
			nt_close_bo(a, d);
			OK(import_bo(b, buf, &hb));
			close(buf);
			p = nt_dev_read(b, hb, 2048);
			CHECK(p[0] == 0 && p[2047] == 2047);
			nt_close_bo(b, hb);
			break;
		case 2:	/* the exporting file closes with all of it open */
			OK(import_bo(b, buf, &hb));
			close(a);
			a = nt_open(0);
			close(buf);
			nt_dev_fill(b, hb, 2048);
			CHECK(nt_dev_read(b, hb, 2048)[5] == 5);
			nt_close_bo(b, hb);
			break;
		default: /* the importing file (nothing mapped) closes */
			b = nt_open(0);
			OK(import_bo(b, buf, &hb));
			close(b);
			nt_close_bo(a, d);
			close(buf);
			break;
		}
		wait_hbm_used(0, used0);
	}
}

NT_TEST(prime_device_bo_between_processes)
{
	long long used0 = nt_sysfs(0, "hbm_used_bytes");
	int fd = nt_open(0), sv[2], status, buf;
	uint32_t d = nt_bo(fd, 65536, DRM_NEURON_BO_DEVICE), *p, i;
	uint64_t addr = bo_info(fd, d).device_addr;
	pid_t pid;

	nt_dev_fill(fd, d, 16384);
	buf = export_bo(fd, d);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid = fork();
	if (!pid) {
		int fd2 = nt_open(0), b = recv_fd(sv[1]);
		uint32_t h, host, *q;

		OK(import_bo(fd2, b, &h));
		CHECK(bo_info(fd2, h).device_addr == addr);
		q = nt_dev_read(fd2, h, 16384);
		for (i = 0; i < 16384; i++)
			CHECK(q[i] == i, "word %u = %u", i, q[i]);
		/* The importer writes the first 16 KiB back, doubled. */
		for (i = 0; i < 4096; i++)
			q[i] = 2 * i;
		host = nt_bo(fd2, 16384, 0);
		memcpy(nt_map(fd2, host, 16384), q, 16384);
		OK(nt_dma(fd2, 0, host, 0, h, 0, 16384, NULL, NULL));
		OK(nt_bo_wait(fd2, h, 5000));
		exit(0);
	}
	close(sv[1]);
	send_fd(sv[0], buf);
	close(buf);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child failed");
	p = nt_dev_read(fd, d, 16384);
	for (i = 0; i < 16384; i++)
		CHECK(p[i] == (i < 4096 ? 2 * i : i), "word %u = %u", i, p[i]);
	nt_close_bo(fd, d);
	wait_hbm_used(0, used0);
}

/* A compute job of the importing file names the imported BO. */
NT_TEST(prime_device_bo_compute)
{
	pid_t e = nt_engine_start(0);
	int a = nt_open(0), b = nt_open(0), buf;
	uint32_t d = nt_bo(a, 65536, DRM_NEURON_BO_DEVICE), hb, *p, i;
	struct nt_sync s = { nt_syncobj(b), 0 };

	nt_dev_fill(a, d, 16384);
	buf = export_bo(a, d);
	OK(import_bo(b, buf, &hb));
	close(buf);
	OK(nt_compute(b, 3, NT_OP_ADD, 1000, hb, NULL, &s));
	OK(nt_syncobj_wait(b, s.handle, 0, 5000));
	CHECK(nt_fence_status(b, s.handle) == 1);
	p = nt_dev_read(a, d, 16384);
	for (i = 0; i < 16384; i++)
		CHECK(p[i] == i + 1000, "word %u = %u", i, p[i]);
	nt_engine_stop(e);
}
