# demo: Capacity sharing: inference load drops, cores are lent to training, then reclaimed
# Runs from tools/demo.sh; the sharing demo starts its own neurond with the automatic policy.
set -euo pipefail
bash tests/sharing/demo_sharing.sh build
