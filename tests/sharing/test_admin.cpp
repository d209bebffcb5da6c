// Admin calls need root or the neuron-admin group (SO_PEERCRED): a process running
// as nobody gets a clear permission error, and read-only calls still work.
#include "sharing_test.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

// Child: drops to nobody, makes each call; exit code = bit mask of failed checks.
static int as_nobody(const std::string &sock)
{
	const struct passwd *pw = getpwnam("nobody");
	if (!pw || setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
		return 100;
	test::RawClient c;
	if (!c.connect(sock) || !c.hello())
		return 101;
	int bad = 0;
	auto denied = [&](api::Request &req, int bit) {
		api::Response r;
		if (!c.call(req, &r) || !r.has_error() || r.error().code() != api::ERROR_PERMISSION_DENIED ||
		    r.error().message().find("neuron-admin") == std::string::npos)
			bad |= bit;
	};
	api::Request lend;
	lend.mutable_lend()->set_from(api::POOL_INFERENCE);
	denied(lend, 1);
	api::Request rec;
	rec.mutable_reclaim()->set_pool(api::POOL_INFERENCE);
	denied(rec, 2);
	api::Request pol;
	pol.mutable_set_policy()->mutable_policy()->set_mode("manual");
	denied(pol, 4);
	api::Request pool;
	pool.mutable_set_pool()->set_pool(api::POOL_TRAINING);
	denied(pool, 8);
	api::Request get;
	get.mutable_get_capacity();
	api::Response r;
	if (!c.call(get, &r) || !r.has_capacity())
		bad |= 16;
	return bad;
}

Test(admin, non_admin_calls_are_refused, .fini = down)
{
	start_daemon({});
	// Let nobody reach the socket (the test dir is private to root).
	const std::string dir = socket().substr(0, socket().rfind('/'));
	chmod(dir.c_str(), 0755);
	chmod(socket().c_str(), 0666);
	const pid_t pid = fork();
	if (pid == 0)
		_exit(as_nobody(socket()));
	int status = 0;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status), "child crashed");
	const int code = WEXITSTATUS(status);
	cr_assert(code != 100, "could not drop privileges to nobody");
	cr_assert(code != 101, "nobody could not connect and say hello");
	cr_assert_eq(code, 0, "checks failed (bits: 1 lend, 2 reclaim, 4 policy, 8 pool, 16 read-only call): %d", code);
	// Nothing changed.
	cr_assert_eq(pool_info(capacity(), api::POOL_INFERENCE).lent_cores(), 0u);
	cr_assert(daemon_log().find("admin.refused") != std::string::npos, "refusals are logged");
}
