#!/usr/bin/env bash
# Installs the brokers the live-transport tests run (mosquitto with its clients, redis-server
# with redis-cli) from the machine's Debian packages, if they are missing. The tests start
# private instances on free loopback ports; nothing here starts a system service.
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
missing=()
have mosquitto || missing+=(mosquitto)
have mosquitto_pub || missing+=(mosquitto-clients)
have redis-server || missing+=(redis-server)
have redis-cli || missing+=(redis-tools)
# Not a broker: the alert-output test counts a run's write calls with strace.
have strace || missing+=(strace)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# --no-install-recommends keeps it to the programs; policy-rc.d-style service starts are
# harmless (the tests never use a system instance).
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
