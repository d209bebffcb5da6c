// torch_neuron._C as a Python module (the same _C.so that torch.ops.load_library
// loads): the c10d backend class that torch_neuron/_distributed.py registers.
#include "process_group.h"

#include <torch/csrc/utils/pybind.h>
#include <pybind11/chrono.h>

namespace py = pybind11;

PYBIND11_MODULE(_C, m)
{
	py::module_::import("torch.distributed"); // registers c10d::Backend and Store with pybind
	py::class_<torch_neuron::dist::ProcessGroupNeuron, c10d::Backend,
		   c10::intrusive_ptr<torch_neuron::dist::ProcessGroupNeuron>>(m, "ProcessGroupNeuron")
		.def(py::init(&torch_neuron::dist::create_process_group), py::arg("store"), py::arg("rank"),
		     py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
}
