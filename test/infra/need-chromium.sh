# shellcheck shell=bash
# Sourced by test/infra/env.sh. Installs Chromium from Debian (once) for the simulator
# report's rendering test, and exports QAS_CHROMIUM.
apt_install chromium
export QAS_CHROMIUM=/usr/bin/chromium
