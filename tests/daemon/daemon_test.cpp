#include "daemon_test.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dt {

neuron::test::NeurondProcess *g_daemon = nullptr;

void daemon_up()
{
	g_daemon = new neuron::test::NeurondProcess();
	std::string error;
	cr_assert(g_daemon->start(&error), "cannot start neurond: %s", error.c_str());
}

void daemon_up_with(const std::vector<std::string> &extra_flags)
{
	auto settings = neuron::test::NeurondProcess::default_settings();
	settings.insert(settings.end(), extra_flags.begin(), extra_flags.end());
	g_daemon = new neuron::test::NeurondProcess({}, settings);
	std::string error;
	cr_assert(g_daemon->start(&error), "cannot start neurond: %s", error.c_str());
}

void (*g_before_stop)() = nullptr;
static std::vector<neuron::test::NeurondProcess *> g_extra;

neuron::test::NeurondProcess *extra_daemon(const std::string &socket_path)
{
	g_extra.push_back(new neuron::test::NeurondProcess(socket_path));
	return g_extra.back();
}

void daemon_down()
{
	// Reached after a failed assertion too: end whatever is left, quietly.
	if (g_before_stop) {
		auto f = g_before_stop;
		g_before_stop = nullptr;
		f();
	}
	delete g_daemon; // kills a daemon still running
	g_daemon = nullptr;
	for (auto *d : g_extra)
		delete d;
	g_extra.clear();
}

void daemon_finish()
{
	if (g_before_stop) {
		auto f = g_before_stop;
		g_before_stop = nullptr;
		f();
	}
	cr_assert(g_daemon, "no daemon");
	if (!g_daemon->running()) {
		cr_assert(g_daemon->ended_by_us(), "neurond died during the test (%s); its log:\n%s",
			  g_daemon->exit_status().describe().c_str(), g_daemon->log_tail().c_str());
		return;
	}
	const auto e = g_daemon->stop(5000);
	cr_assert(e.exited && !e.signaled && e.code == 0,
		  "neurond did not shut down cleanly on SIGTERM within 5 s (%s); its log:\n%s", e.describe().c_str(),
		  g_daemon->log_tail().c_str());
}

uint64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, nullptr);
}

std::string describe(neuron_status s) { return std::string(neuron_status_name(s)) + ": " + neuron_last_error(); }

neuron_client *connect(const char *name, const std::string &socket)
{
	const std::string path = socket.empty() ? g_daemon->socket_path() : socket;
	struct neuron_connect_options o = {};
	o.socket_path = path.c_str();
	o.client_name = name;
	neuron_client *c = nullptr;
	const neuron_status s = neuron_connect(&o, &c);
	cr_assert(s == NEURON_OK && c, "neuron_connect(%s) as %s failed: %s", path.c_str(), name, describe(s).c_str());
	return c;
}

void Tenant::open(const char *name, uint32_t device, uint32_t core_index)
{
	client = connect(name);
	NEURON_OK_OR_FAIL(neuron_queue_create(client, device, NEURON_QUEUE_DMA, 0, 0, &dma));
	NEURON_OK_OR_FAIL(neuron_queue_create(client, device, NEURON_QUEUE_CORE, core_index, 0, &core));
}

void Tenant::close()
{
	if (core)
		neuron_queue_destroy(core);
	if (dma)
		neuron_queue_destroy(dma);
	if (client)
		neuron_disconnect(client);
	*this = Tenant{};
}

uint64_t dev_alloc(neuron_client *c, uint64_t bytes, uint32_t device)
{
	uint64_t addr = 0;
	const neuron_status s = neuron_alloc(c, device, bytes, 0, &addr);
	cr_assert(s == NEURON_OK, "neuron_alloc(%llu bytes on device %u) failed: %s", (unsigned long long)bytes, device,
		  describe(s).c_str());
	cr_assert(addr != 0, "neuron_alloc returned address 0");
	return addr;
}

void h2d(neuron_queue *dma, uint64_t dst, const void *src, uint64_t bytes)
{
	const neuron_status s = neuron_memcpy_h2d(dma, dst, src, bytes);
	cr_assert(s == NEURON_OK, "neuron_memcpy_h2d(%llu bytes) failed: %s", (unsigned long long)bytes,
		  describe(s).c_str());
}

void d2h(neuron_queue *dma, void *dst, uint64_t src, uint64_t bytes)
{
	const neuron_status s = neuron_memcpy_d2h(dma, dst, src, bytes);
	cr_assert(s == NEURON_OK, "neuron_memcpy_d2h(%llu bytes) failed: %s", (unsigned long long)bytes,
		  describe(s).c_str());
}

std::vector<float> download_f32(neuron_queue *dma, uint64_t src, size_t count)
{
	std::vector<float> v(count, std::nanf(""));
	d2h(dma, v.data(), src, count * sizeof(float));
	return v;
}

void upload_f32(neuron_queue *dma, uint64_t dst, const std::vector<float> &v)
{
	h2d(dma, dst, v.data(), v.size() * sizeof(float));
}

neuron_tensor_desc desc(uint64_t addr, int dtype, std::initializer_list<int64_t> sizes)
{
	std::vector<int64_t> s(sizes);
	return neuron_desc_contiguous(addr, dtype, static_cast<int>(s.size()), s.data());
}

neuron_tensor_desc desc_strided(uint64_t addr, int dtype, std::initializer_list<int64_t> sizes,
				std::initializer_list<int64_t> strides)
{
	cr_assert(sizes.size() == strides.size(), "desc_strided: sizes and strides differ in length");
	neuron_tensor_desc d;
	std::memset(&d, 0, sizeof(d));
	d.addr = addr;
	d.mem_space = NEURON_MEM_DEVICE;
	d.dtype = static_cast<uint8_t>(dtype);
	d.ndim = static_cast<uint8_t>(sizes.size());
	int i = 0;
	for (int64_t v : sizes)
		d.sizes[i++] = v;
	i = 0;
	for (int64_t v : strides)
		d.strides[i++] = v;
	return d;
}

neuron_cmd make_cmd(int opcode, std::initializer_list<neuron_tensor_desc> operands)
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, opcode, static_cast<int>(operands.size()));
	int k = 0;
	for (const auto &d : operands)
		cmd.operands[k++] = d;
	return cmd;
}

neuron_cmd make_matmul(const neuron_tensor_desc &out, const neuron_tensor_desc &a, const neuron_tensor_desc &b)
{
	neuron_cmd cmd = make_cmd(NEURON_OP_MATMUL, {out, a, b});
	cmd.fscalars.f[0] = 1.0;
	cmd.fscalars.f[1] = 0.0;
	return cmd;
}

neuron_cmd make_fill_f32(const neuron_tensor_desc &out, double value)
{
	neuron_cmd cmd = make_cmd(NEURON_OP_FILL, {out});
	cmd.fscalars.f[0] = value;
	return cmd;
}

uint64_t submit(neuron_queue *q, const neuron_cmd &cmd)
{
	uint64_t seq = 0;
	const neuron_status s = neuron_submit(q, &cmd, &seq);
	cr_assert(s == NEURON_OK, "neuron_submit(opcode %u) failed: %s", cmd.opcode, describe(s).c_str());
	return seq;
}

void run(neuron_queue *q, const neuron_cmd &cmd)
{
	const uint64_t seq = submit(q, cmd);
	const neuron_status s = neuron_queue_wait(q, seq, kWaitNs);
	cr_assert(s == NEURON_OK, "command (opcode %u) did not complete: %s (fault reason: \"%s\")", cmd.opcode,
		  describe(s).c_str(), fault_of(q).reason);
}

void sync(neuron_queue *q)
{
	const neuron_status s = neuron_queue_sync(q, kWaitNs);
	cr_assert(s == NEURON_OK, "neuron_queue_sync failed: %s (fault reason: \"%s\")", describe(s).c_str(),
		  fault_of(q).reason);
}

neuron_fault fault_of(const neuron_queue *q)
{
	neuron_fault f;
	std::memset(&f, 0, sizeof(f));
	const neuron_status s = neuron_queue_fault(q, &f);
	cr_assert(s == NEURON_OK, "neuron_queue_fault failed: %s", describe(s).c_str());
	return f;
}

uint64_t hbm_used(neuron_client *c, uint32_t device)
{
	struct neuron_device_info info;
	NEURON_OK_OR_FAIL(neuron_device_info(c, device, &info));
	return info.hbm_used_bytes;
}

uint64_t wait_hbm_used(neuron_client *c, uint32_t device, uint64_t expected, int timeout_ms)
{
	const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
	for (;;) {
		const uint64_t used = hbm_used(c, device);
		if (used == expected || now_ns() >= deadline)
			return used;
		sleep_ms(1);
	}
}

static uint32_t lcg(uint32_t &state)
{
	state = state * 1664525u + 1013904223u;
	return state;
}

std::vector<float> random_f32(size_t n, uint32_t seed, float lo, float hi)
{
	std::vector<float> v(n);
	uint32_t st = seed * 2654435761u + 1;
	for (auto &x : v)
		x = lo + (hi - lo) * static_cast<float>(lcg(st) >> 8) / static_cast<float>(1u << 24);
	return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed)
{
	std::vector<uint8_t> v(n);
	uint32_t st = seed * 2654435761u + 7;
	for (auto &x : v)
		x = static_cast<uint8_t>(lcg(st) >> 24);
	return v;
}

void expect_close(const std::vector<float> &got, const std::vector<double> &ref, double rtol, double atol,
		  const char *what)
{
	cr_assert(got.size() == ref.size(), "%s: %zu results, expected %zu", what, got.size(), ref.size());
	for (size_t i = 0; i < got.size(); ++i) {
		const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
		cr_assert(err <= atol + rtol * std::fabs(ref[i]) && !std::isnan(got[i]),
			  "%s: element %zu is %.9g, the CPU reference says %.9g (error %.3g)", what, i,
			  static_cast<double>(got[i]), ref[i], err);
	}
}

Child fork_child()
{
	int fds[2];
	cr_assert(pipe2(fds, O_CLOEXEC) == 0, "pipe2: %s", std::strerror(errno));
	Child c;
	c.read_fd = fds[0];
	c.write_fd = fds[1];
	c.pid = fork();
	cr_assert(c.pid >= 0, "fork: %s", std::strerror(errno));
	if (c.pid == 0) {
		::close(c.read_fd);
		// Die with the test: never outlive it.
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	} else {
		::close(c.write_fd);
		c.write_fd = -1;
	}
	return c;
}

void child_report_and_exit(const Child &child, const void *data, size_t bytes)
{
	const char *p = static_cast<const char *>(data);
	while (bytes) {
		const ssize_t n = write(child.write_fd, p, bytes);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);
		p += n;
		bytes -= static_cast<size_t>(n);
	}
	_exit(0);
}

bool read_report(const Child &child, void *data, size_t bytes, int timeout_ms)
{
	char *p = static_cast<char *>(data);
	const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
	while (bytes) {
		const uint64_t t = now_ns();
		if (t >= deadline)
			return false;
		struct pollfd pf = {child.read_fd, POLLIN, 0};
		const int r = poll(&pf, 1, static_cast<int>((deadline - t) / 1000000ull) + 1);
		if (r <= 0)
			continue;
		const ssize_t n = read(child.read_fd, p, bytes);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		bytes -= static_cast<size_t>(n);
	}
	return true;
}

int reap_child(Child &child, int timeout_ms)
{
	if (child.read_fd >= 0) {
		::close(child.read_fd);
		child.read_fd = -1;
	}
	if (child.pid <= 0)
		return -1;
	const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
	for (;;) {
		int status = 0;
		const pid_t r = waitpid(child.pid, &status, WNOHANG);
		if (r == child.pid) {
			child.pid = -1;
			return status;
		}
		if (r < 0 || now_ns() >= deadline)
			break;
		sleep_ms(2);
	}
	kill(child.pid, SIGKILL);
	waitpid(child.pid, nullptr, 0);
	child.pid = -1;
	return -1;
}

} // namespace dt
