#!/bin/sh
# Makes the Secrets of the Kubernetes cluster in deploy/k8s: the integrator's TLS certificate
# (signed by a CA of its own), CURVE keys for the integrator and for every shard pod, and an API
# key, with docker/secrets-init.sh (searchctl keygen, searchctl apikey create, openssl). The pods
# are read from the integrator's --shards in integrator.yaml (tcp://POD.SHARD:PORT), so after
# adding a shard or a replica there, run it again: it keeps every key it made and adds the new ones.
#
#   deploy/k8s/make-secrets.sh [OUT]    then   kubectl apply -f OUT/secrets.yaml
#
#   OUT/files/        the key material (keep it private; the CA key ca/ca.key never goes to the cluster)
#   OUT/secrets.yaml  Secret search-integrator (tls.crt, tls.key, curve.key, curve-servers,
#                     api-keys) and one Secret search-<shard> a shard (<pod>.key for each of its
#                     pods, curve-clients: the integrator's public key)
#   OUT/ca.pem        the CA certificate clients verify the integrator with (curl --cacert)
# The API key (id:key) is printed once, when it is created; `make-secrets.sh OUT apikey` adds one.
#
# env: NAMESPACE (default search), CERT_HOSTS (more names or addresses in the integrator's
#      certificate, e.g. an ingress host; a certificate already in OUT is kept: delete
#      OUT/files/integrator/tls.crt to remake it), SEARCHCTL (default: searchctl on PATH, else the
#      build tree's), OPENSSL, MANIFEST (default integrator.yaml beside this script).
# Never commit OUT. Exits non-zero on any error.
set -eu
umask 077

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-search-k8s-secrets}
ns=${NAMESPACE:-search}
manifest=${MANIFEST:-$here/integrator.yaml}

say() { echo "make-secrets: $*"; }
die() { echo "make-secrets: $*" >&2; exit 1; }

case $ns in '' | *[!a-z0-9-]*) die "NAMESPACE must be a DNS label (got '$ns')" ;; esac
if [ -z "${SEARCHCTL:-}" ]; then
  if command -v searchctl >/dev/null 2>&1; then SEARCHCTL=searchctl
  elif [ -x "$here/../../build/tools/searchctl/searchctl" ]; then SEARCHCTL=$here/../../build/tools/searchctl/searchctl
  else die "no searchctl: put it on PATH or set SEARCHCTL (it is built in build/tools/searchctl)"; fi
fi
export SEARCHCTL

# The shard pods, from --shards=tcp://POD.SHARD:PORT|...,... in the integrator's manifest.
shards_arg=$(sed -n 's/^ *- *--shards=//p' "$manifest")
[ -n "$shards_arg" ] || die "$manifest has no '- --shards=' line"
nodes=""
shard_names=""
for endpoint in $(echo "$shards_arg" | tr ',|' '  '); do
  host=${endpoint#tcp://}
  host=${host%:*}
  pod=${host%%.*}
  shard=${host#*.}
  case $endpoint:$pod:$shard in
    tcp://*:shard-*-*:shard-*) ;;
    *) die "endpoint $endpoint in $manifest is not tcp://shard-<i>-<r>.shard-<i>:PORT" ;;
  esac
  [ "${pod%-*}" = "$shard" ] || die "endpoint $endpoint: pod $pod is not in StatefulSet $shard"
  nodes="$nodes $pod=$endpoint"
  case " $shard_names " in *" $shard "*) ;; *) shard_names="$shard_names $shard" ;; esac
done

mkdir -p "$out/files"
log=$out/.secrets-init.log
# secrets-init.sh's own hints are about docker-compose: its other lines are printed.
if ! SECRETS_DIR=$out/files SECRETS_NODES=${nodes# } HTTP_URL=https://localhost:9200 \
  SECRETS_HOSTS="search-integrator search-integrator.$ns search-integrator.$ns.svc search-integrator.$ns.svc.cluster.local localhost ${CERT_HOSTS:-}" \
  sh "$here/../../docker/secrets-init.sh" ${2:+"$2"} >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  die "docker/secrets-init.sh failed"
fi
sed -e '/docker-compose/d' -e '/or with podman:/d' -e '/restart it to accept/d' -e "s/another: secrets-init.sh apikey/another: make-secrets.sh OUT apikey/" -e 's/; copy it out of the volume with$/):/' "$log"
rm -f "$log"
cp "$out/files/ca.pem" "$out/ca.pem"
chmod 0644 "$out/ca.pem"

# One data entry: KEY: base64 of FILE.
entry() { printf '  %s: %s\n' "$1" "$(base64 <"$2" | tr -d '\n')"; }
header() {
  printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n' "$1" "$ns"
  printf '  labels: {app.kubernetes.io/part-of: search}\ntype: Opaque\ndata:\n'
}
f=$out/files
{
  echo "# Made by deploy/k8s/make-secrets.sh: kubectl apply -f this file. Private: never commit it."
  header search-integrator
  entry tls.crt "$f/integrator/tls.crt"
  entry tls.key "$f/integrator/tls.key"
  entry curve.key "$f/integrator/curve.key"
  entry curve-servers "$f/integrator/curve-servers"
  entry api-keys "$f/integrator/api-keys"
  for shard in $shard_names; do
    header "search-$shard"
    entry curve-clients "$f/integrator/curve.pub"
    for n in $nodes; do
      pod=${n%%=*}
      [ "${pod%-*}" = "$shard" ] && entry "$pod.key" "$f/$pod/curve.key"
    done
  done
} >"$out/secrets.yaml.tmp"
mv "$out/secrets.yaml.tmp" "$out/secrets.yaml"
say "wrote $out/secrets.yaml (Secrets search-integrator and$(for s in $shard_names; do printf ' search-%s' "$s"; done)) and $out/ca.pem"
say "apply: kubectl apply -f deploy/k8s/namespace.yaml -f $out/secrets.yaml (a running integrator reads"
say "  its keys at start: kubectl -n $ns rollout restart deployment/search-integrator); the curl line's"
say "  search-ca.pem is $out/ca.pem, localhost:9200 is kubectl -n $ns port-forward svc/search-integrator 9200"
