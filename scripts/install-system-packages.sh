#!/usr/bin/env bash
# The Debian packages SpeedRunner and its test suite use; installs only what is missing.
# Runs as root (containers) or through sudo, whichever this shell has.
#   openjdk-17-jre-headless  ScienceWorld runs on the JVM
#   bubblewrap               the strongest sandbox tier for LLM-written code (docs/sandbox.md)
#   chromium, chromium-driver  the report's browser test (headless, nothing downloaded)
#   slurm-wlm, munge         the sweep tests on a real one-node SLURM cluster
set -euo pipefail

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "not root and no sudo: run this as root" >&2; exit 2; }
  as_root=(sudo)
fi

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || missing+=(munge)

if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
echo "system packages: installing ${missing[*]}"
log=$(mktemp)
if ! { "${as_root[@]}" apt-get update -qq &&
       "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "apt-get failed (whole log: $log)" >&2
  exit 1
fi
rm -f "$log"
