#!/usr/bin/env bash
# Debian packages the test suite needs; installs only what is missing (needs root for apt).
set -euo pipefail
packages=(chromium)
# Simulated hosts (tests/simhosts): image build, namespaces, sshd, apt proxy, fault injection.
packages+=(debootstrap tinyproxy openssh-server openssh-client iproute2 iptables iperf3 util-linux)
# The MPI preflight program's compile-and-run test; the fake NVIDIA repository (dpkg-deb, gpg).
packages+=(openmpi-bin libopenmpi-dev dpkg-dev gnupg)
# The simulated Slurm cluster's controller (tests/simhosts/slurm.py); its nodes install their own.
packages+=(slurmctld slurm-client munge)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
