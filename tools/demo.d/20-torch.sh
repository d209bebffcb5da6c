# demo: PyTorch on device 'neuron': train a tiny transformer LM through neurond
# Runs from tools/demo.sh with NEURON_SOCKET pointing at its neurond.
set -euo pipefail
. tools/setup/use-venv.sh --torch
echo "building and installing the torch_neuron plugin (first time: a few minutes)"
bash torch_plugin/build.sh >build/torch-plugin-build.log 2>&1 || { tail -n 30 build/torch-plugin-build.log; exit 1; }
python3 torch_plugin/examples/train_tiny_lm.py --steps 30
