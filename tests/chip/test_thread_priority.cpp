// sched::set_thread_nice: an engine thread's nice value follows the class of its work,
// on that thread alone, and goes back to 0 where the process may.
#include <sched/thread_priority.h>

#include <criterion/criterion.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

int own_nice()
{
	errno = 0;
	return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}

} // namespace

Test(thread_priority, training_nice_and_back_on_the_calling_thread_only)
{
	if (!neuron::sched::can_restore_priority())
		cr_skip_test("this process may not lower its nice value again (no CAP_SYS_NICE, RLIMIT_NICE < 20)");
	const int main_nice = own_nice();
	std::thread t([] {
		cr_assert(neuron::sched::set_thread_nice(10), "raising the nice value: %s", strerror(errno));
		cr_assert_eq(own_nice(), 10);
		cr_assert(neuron::sched::set_thread_nice(0), "back to 0: %s", strerror(errno));
		cr_assert_eq(own_nice(), 0);
	});
	t.join();
	cr_assert_eq(own_nice(), main_nice, "another thread's nice value changed this one's");
}
