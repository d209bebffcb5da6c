// `neurond --supervise`: restart survival on hosts without systemd. The parent
// process binds the socket, keeps the descriptors neurond hands it (its fd store,
// the sd_notify(3) FDSTORE protocol over NOTIFY_SOCKET, as under systemd) and
// restarts neurond when it dies, passing the socket and the kept descriptors back
// as LISTEN_FDS/LISTEN_FDNAMES. So a crash or kill -9 of neurond costs tenants
// nothing (daemon/README.md, "Restart with tenants alive").
//
// Signals: SIGTERM/SIGINT go to neurond, which stops (releasing its tenants), and
// then the supervisor exits with neurond's status. SIGHUP restarts neurond (e.g.
// after a package upgrade: the new binary at the same path) the way a crash would:
// tenants keep everything. neurond exiting 0 (it was stopped) or 2 (bad settings)
// ends the supervisor too; any other end is a crash and is restarted, at most 5
// times in 30 s.
//
// Threads: one (the supervisor does nothing but this loop).
#pragma once

#include "config.h"

namespace neuron::daemon {

// Runs until neurond is stopped; returns the process exit code.
int run_supervisor(char **argv, const Config &config);

} // namespace neuron::daemon
