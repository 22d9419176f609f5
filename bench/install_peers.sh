#!/bin/sh
# install_peers.sh: installs the comparison peers that `ninja bench` measures zcoll against.
#
# Debian 12 (bookworm) packages, checked with `apt-cache policy`:
#   openmpi-bin, libopenmpi-dev   Open MPI 4.1.4   -> mpicc.openmpi, mpirun.openmpi
#   mpich, libmpich-dev           MPICH 4.0.2      -> mpicc.mpich,   mpirun.mpich
#   python3-torch                 PyTorch 1.13.1   -> /usr/bin/python3 -c 'import torch' (gloo)
#   python3-matplotlib            Matplotlib 3.6.3 -> the report's charts (bench/charts.py)
# With both MPIs installed, the plain `mpicc`/`mpirun` names are an update-alternatives choice;
# bench/run_bench.py uses only the versioned names, so the choice does not matter.
#
# Run as root (or through sudo). The build and the test suite never need these packages;
# only `ninja bench` does, and it reports any peer that is missing instead of skipping it.
set -eu

if [ "$(id -u)" -ne 0 ]; then
    exec sudo "$0" "$@"
fi

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y \
    openmpi-bin libopenmpi-dev mpich libmpich-dev python3-torch python3-matplotlib strace \
    valgrind

# Show what ended up on the machine.
for tool in mpicc.openmpi mpirun.openmpi mpicc.mpich mpirun.mpich; do
    printf '%-16s %s\n' "$tool" "$(command -v "$tool" || echo MISSING)"
done
/usr/bin/python3 -c 'import torch; print("torch", torch.__version__)'
/usr/bin/python3 -c 'import matplotlib; print("matplotlib", matplotlib.__version__)'
