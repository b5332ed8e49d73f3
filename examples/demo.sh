#!/usr/bin/env bash
# `make demo`: the main job on a built-in default. Until the trace-driven simulator
# lands, this is the live proxy demo: real pods, real proxies, a real trace.
exec bash "$(dirname "$0")/proxy-demo.sh" "$@"
