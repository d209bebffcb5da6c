// neuron-top: a terminal UI over neurond: per-core utilisation with owner and lease
// state, memory, tenants (ops/s, p50/p99 latency), the loans ledger.
//
//   neuron-top [--socket PATH] [--interval MS] [--once] [--json]
//
// --once prints one text snapshot and exits; --json prints one JSON snapshot (schema
// neuron-capacity/1 plus devices, tenants and utilisation). Both sample twice,
// --interval apart, so rates are real.
#include "model.h"
#include "view.h"

#include <ctl_client.h>

#include <CLI/CLI.hpp>

#include <curses.h>

#include <iostream>
#include <thread>

using namespace neuron;

int main(int argc, char **argv)
{
	CLI::App app{"neuron-top: live view of NeuronCores, tenants and loans"};
	std::string socket;
	int interval_ms = 1000;
	bool once = false, as_json = false;
	app.add_option("--socket", socket, "neurond socket (default: $NEURON_SOCKET or the system socket)");
	app.add_option("--interval", interval_ms, "refresh period in ms")->check(CLI::Range(50, 60000));
	app.add_flag("--once", once, "print one text snapshot and exit");
	app.add_flag("--json", as_json, "print one JSON snapshot and exit");
	CLI11_PARSE(app, argc, argv);

	tools::CtlClient client;
	std::string error;
	if (!client.connect(socket, "neuron-top", &error)) {
		std::cerr << "neuron-top: " << error << "\n";
		return 3;
	}
	top::Model model;
	top::ViewState view;
	if (once || as_json) {
		if (!model.refresh(client, &error) ||
		    (std::this_thread::sleep_for(std::chrono::milliseconds(std::min(interval_ms, 500))),
		     !model.refresh(client, &error))) {
			std::cerr << "neuron-top: " << error << "\n";
			return 3;
		}
		if (as_json) {
			std::cout << top::snapshot_json(model).dump(2) << "\n";
		} else {
			view.width = 160;
			for (const auto &line : top::render(model, view, client.path()))
				std::cout << line << "\n";
		}
		return 0;
	}

	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	timeout(interval_ms);
	int rc = 0;
	for (;;) {
		if (!model.refresh(client, &error)) {
			rc = 3;
			break;
		}
		int rows, cols;
		getmaxyx(stdscr, rows, cols);
		view.width = cols;
		erase();
		const auto lines = top::render(model, view, client.path());
		for (int i = 0; i < rows && i < int(lines.size()); ++i)
			mvaddnstr(i, 0, lines[size_t(i)].c_str(), cols);
		refresh();
		const int ch = getch();
		if (view.help && ch != ERR) {
			view.help = false;
			continue;
		}
		const int ntabs = model.cur.tenants.tenants_size() + 1;
		if (ch == 'q' || ch == 'Q')
			break;
		else if (ch == 'h' || ch == '?')
			view.help = true;
		else if (ch == 'a' || ch == KEY_LEFT)
			view.tab = (view.tab + ntabs - 1) % ntabs;
		else if (ch == 'd' || ch == KEY_RIGHT || ch == '\t')
			view.tab = (view.tab + 1) % ntabs;
		else if (ch >= '1' && ch <= '9' && ch - '1' < ntabs)
			view.tab = ch - '1';
		else if (ch == 's')
			view.sort = static_cast<top::SortKey>((static_cast<int>(view.sort) + 1) % 4);
	}
	endwin();
	if (rc)
		std::cerr << "neuron-top: " << error << "\n";
	return rc;
}
