// torch_neuron._C as a Python module (the same _C.so that torch.ops.load_library
// loads): the c10d backend classes that torch_neuron/_distributed.py registers.
#include "hierarchical.h"
#include "process_group.h"

#include <torch/csrc/utils/pybind.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;

namespace {

c10::intrusive_ptr<torch_neuron::dist::ProcessGroupHierarchical>
make_hierarchical(int rank, int size, std::vector<std::vector<int64_t>> hosts,
		  c10::intrusive_ptr<torch_neuron::dist::ProcessGroupNeuron> intra,
		  std::optional<c10::intrusive_ptr<c10d::Backend>> leaders, c10::intrusive_ptr<c10d::Backend> everyone)
{
	return c10::make_intrusive<torch_neuron::dist::ProcessGroupHierarchical>(
		rank, size, std::move(hosts), std::move(intra), leaders ? *leaders : c10::intrusive_ptr<c10d::Backend>(),
		std::move(everyone));
}

} // namespace

PYBIND11_MODULE(_C, m)
{
	py::module_::import("torch.distributed"); // registers c10d::Backend and Store with pybind
	py::class_<torch_neuron::dist::ProcessGroupNeuron, c10d::Backend,
		   c10::intrusive_ptr<torch_neuron::dist::ProcessGroupNeuron>>(m, "ProcessGroupNeuron")
		.def(py::init(&torch_neuron::dist::create_process_group), py::arg("store"), py::arg("rank"),
		     py::arg("size"), py::arg("timeout"), py::arg("global_ranks") = std::vector<int64_t>{},
		     py::call_guard<py::gil_scoped_release>());
	py::class_<torch_neuron::dist::ProcessGroupHierarchical, c10d::Backend,
		   c10::intrusive_ptr<torch_neuron::dist::ProcessGroupHierarchical>>(m, "ProcessGroupHierarchical")
		.def(py::init(&make_hierarchical), py::arg("rank"), py::arg("size"), py::arg("hosts"), py::arg("intra"),
		     py::arg("leaders"), py::arg("everyone"));
	m.def("daemon_location", &torch_neuron::dist::daemon_location,
	      "Where this process's neurond is: \"<host name>:<socket path>\".");
}
