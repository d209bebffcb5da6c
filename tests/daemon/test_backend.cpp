// neurond's --backend flag (emu, kmd, auto) on a host without the neuron driver:
// emu is the default, kmd refuses to start with a reason and a non-zero exit, auto
// falls back to emu and says why. The kmd backend itself is tested inside QEMU
// against the driver (tests/driver/daemon-suite.sh runs the other daemon suites on
// it). On a host where a /dev/accel node exists the driver-less tests are skipped.
#include "daemon_test.h"

#include <dirent.h>
#include <fstream>
#include <string>

using namespace dt;
using neuron::test::NeurondProcess;

TestSuite(backend, .timeout = 60);

namespace {

bool accel_nodes_present()
{
	DIR *d = opendir("/dev/accel");
	if (!d)
		return false;
	bool any = false;
	while (struct dirent *e = readdir(d))
		any |= std::string(e->d_name).rfind("accel", 0) == 0;
	closedir(d);
	return any;
}

std::vector<std::string> settings_with(std::initializer_list<std::string> extra)
{
	auto s = NeurondProcess::default_settings();
	s.insert(s.end(), extra);
	return s;
}

// Starts a daemon expected to fail; returns its exit and log.
NeurondProcess::Exit expect_refusal(NeurondProcess &d)
{
	std::string error;
	cr_assert(d.spawn(&error), "%s", error.c_str());
	const auto e = d.wait_exit(10000);
	cr_assert(e.exited, "neurond is still running after 10 s; its log:\n%s", d.log_tail().c_str());
	return e;
}

std::string backend_of(neuron_client *c, uint32_t device)
{
	struct neuron_device_info info = {};
	NEURON_OK_OR_FAIL(neuron_device_info(c, device, &info));
	return info.backend;
}

} // namespace

Test(backend, emu_is_the_default)
{
	NeurondProcess d;
	std::string error;
	cr_assert(d.start(&error), "cannot start neurond: %s", error.c_str());
	neuron_client *c = connect("backend-default", d.socket_path());
	// Named strings: cr_assert_str_eq keeps the pointer past the full expression.
	const std::string backend0 = backend_of(c, 0), backend1 = backend_of(c, 1);
	cr_assert_str_eq(backend0.c_str(), "emu");
	cr_assert_str_eq(backend1.c_str(), "emu");
	neuron_disconnect(c);
	const auto e = d.stop(5000);
	cr_assert(e.exited && e.code == 0, "neurond did not exit 0: %s", e.describe().c_str());
	cr_assert(d.log().find("backend=emu reason=\"--backend emu\"") != std::string::npos,
		  "the log does not say which backend and why:\n%s", d.log_tail().c_str());
}

Test(backend, kmd_without_the_driver_fails_with_a_reason)
{
	if (accel_nodes_present())
		cr_skip("/dev/accel has nodes: this host has an accel driver");
	NeurondProcess d({}, settings_with({"--backend", "kmd"}));
	const auto e = expect_refusal(d);
	cr_assert(!e.signaled && e.code == 1, "neurond --backend kmd ended with %s, expected exit 1",
		  e.describe().c_str());
	const std::string log = d.log();
	cr_assert(log.find("--backend kmd: no /dev/accel/accel* node of driver neuron") != std::string::npos &&
			  log.find("--backend emu") != std::string::npos,
		  "the error does not say what is missing and what to do:\n%s", log.c_str());
	cr_assert(log.find("daemon.ready") == std::string::npos, "neurond said it was ready:\n%s", log.c_str());
}

Test(backend, kmd_from_the_config_file_fails_the_same_way)
{
	if (accel_nodes_present())
		cr_skip("/dev/accel has nodes: this host has an accel driver");
	NeurondProcess probe;
	const std::string conf = probe.dir() + "/neurond.conf";
	std::ofstream(conf) << "backend = kmd\n";
	NeurondProcess d({}, settings_with({"--config", conf}));
	const auto e = expect_refusal(d);
	cr_assert(!e.signaled && e.code == 1, "neurond with backend = kmd ended with %s, expected exit 1",
		  e.describe().c_str());
	cr_assert(d.log().find("--backend kmd: no /dev/accel/accel*") != std::string::npos,
		  "the config file's backend key was not applied:\n%s", d.log().c_str());
}

Test(backend, auto_falls_back_to_emu_and_says_why)
{
	if (accel_nodes_present())
		cr_skip("/dev/accel has nodes: this host has an accel driver");
	NeurondProcess d({}, settings_with({"--backend", "auto"}));
	std::string error;
	cr_assert(d.start(&error), "neurond --backend auto did not start: %s", error.c_str());
	neuron_client *c = connect("backend-auto", d.socket_path());
	const std::string backend = backend_of(c, 0); // outlives cr_assert_str_eq's use
	cr_assert_str_eq(backend.c_str(), "emu");
	// The emu chip works as usual behind auto.
	neuron_queue *dma = nullptr;
	NEURON_OK_OR_FAIL(neuron_queue_create(c, 0, NEURON_QUEUE_DMA, 0, 0, &dma));
	const uint64_t buf = dev_alloc(c, 4096);
	std::vector<float> v(1024);
	for (size_t i = 0; i < v.size(); ++i)
		v[i] = static_cast<float>(i) * 0.5f;
	upload_f32(dma, buf, v);
	const auto back = download_f32(dma, buf, v.size());
	cr_assert(back == v, "data did not round-trip through the emu device behind --backend auto");
	neuron_queue_destroy(dma);
	neuron_disconnect(c);
	const auto e = d.stop(5000);
	cr_assert(e.exited && e.code == 0, "neurond did not exit 0: %s", e.describe().c_str());
	cr_assert(d.log().find("backend=emu reason=\"auto: no /dev/accel/accel* node of driver neuron") !=
			  std::string::npos,
		  "the log does not say auto chose emu and why:\n%s", d.log_tail().c_str());
}

Test(backend, unknown_backend_is_refused)
{
	NeurondProcess d({}, settings_with({"--backend", "gpu"}));
	const auto e = expect_refusal(d);
	cr_assert(!e.signaled && e.code == 2, "neurond --backend gpu ended with %s, expected exit 2 (bad flag)",
		  e.describe().c_str());
	cr_assert(d.log().find("--backend") != std::string::npos, "the error does not name the flag:\n%s",
		  d.log().c_str());
}
