#!/bin/sh
# Installs validate.js's npm packages (package-lock.json: kubernetes-models, js-yaml) into
# deploy/k8s/validate/node_modules, which git ignores. Idempotent: does nothing when the installed
# packages are those of package-lock.json. Exits 77 when node or npm is missing (tests skip),
# non-zero when npm fails (e.g. no registry).
set -eu
cd "$(dirname "$0")"
command -v node >/dev/null 2>&1 || { echo "install.sh: node is not installed (scripts/setup.sh)" >&2; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "install.sh: npm is not installed (scripts/setup.sh)" >&2; exit 77; }
stamp=node_modules/.search-installed
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
# One install at a time (two build trees' tests may run together).
exec 9>.install.lock
command -v flock >/dev/null 2>&1 && flock 9
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error >&2
cp package-lock.json "$stamp"
echo "install.sh: installed $(node -p "require('./node_modules/kubernetes-models/package.json').version") kubernetes-models into $(pwd)/node_modules" >&2
