# Sourced by the scripts that run Python, pip, meson or ninja:
#   . tools/setup/use-venv.sh [--torch]
# Creates or updates the stack's virtual environment (tools/setup/python-env.sh;
# NEURON_VENV overrides its place, default <repo>/.venv) and puts its bin/ first on
# PATH, so that python3, pip, meson, ninja and pytest are the environment's.
_neuron_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$_neuron_root/tools/setup/python-env.sh" "$@" || return 1
export VIRTUAL_ENV=${NEURON_VENV:-$_neuron_root/.venv}
case ":$PATH:" in
*":$VIRTUAL_ENV/bin:"*) ;;
*) export PATH="$VIRTUAL_ENV/bin:$PATH" ;;
esac
unset _neuron_root
