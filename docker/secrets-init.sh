#!/bin/sh
# The one-shot "secrets" service of docker/docker-compose.yml, also usable outside Docker (the
# security end-to-end tests and bench/scripts/security_cost.sh run it, scripts/cluster.sh
# --secure too): creates, once, everything a secure cluster needs in $SECRETS_DIR and keeps
# whatever is already there (a second run changes nothing and prints how to query).
#
#   ca.pem                      the cluster's CA certificate (clients verify the integrator with it)
#   ca/ca.key                   the CA's private key (0600; signs the integrator's certificate)
#   integrator/tls.crt, .key    the integrator's server certificate (subjectAltName: DNS names
#                               $SECRETS_HOSTS, IP 127.0.0.1 and ::1) and key (0600)
#   integrator/curve.key, .pub  the integrator's CURVE key pair (searchctl keygen)
#   integrator/curve-servers    "ENDPOINT PUBLIC_KEY" of every node given an endpoint
#   integrator/api-keys         salted hashes of the API keys (searchctl apikey create)
#   NODE/curve.key, .pub        each node's CURVE key pair
#   NODE/curve-clients          the public keys a node accepts: the integrator's
#
# usage: secrets-init.sh [apikey]   (apikey: add one more API key to integrator/api-keys and print it)
# env:   SECRETS_DIR    default /secrets
#        SECRETS_NODES  the nodes, as NAME=ENDPOINT (or NAME alone: keys only, no curve-servers
#                       line), default "node-0=tcp://node-0:9210 node-1=tcp://node-1:9210"
#        SECRETS_HOSTS  names (and IP addresses) in the integrator's certificate besides 127.0.0.1
#                       and ::1 (a repeated one counts once), default "integrator localhost"; a
#                       certificate already there is kept:
#                       delete integrator/tls.crt to make one with other names
#        SECRETS_DAYS   validity of the CA and the certificate, default 825
#        SEARCHCTL      the searchctl binary, default searchctl (from PATH); OPENSSL: openssl
#        HTTP_URL       the address printed in the curl example, default https://localhost:9200
#        COMPOSE_FILE_HINT, SEARCH_IMAGE  the compose file and image named in the printed commands
#                       (the compose files set them), defaults docker/docker-compose.yml, gpu-search:gpu
# The API key (id:key) is printed once, when it is created: only its salted hash is stored.
# Exits non-zero on any error.
set -eu
umask 077

dir=${SECRETS_DIR:-/secrets}
nodes=${SECRETS_NODES:-node-0=tcp://node-0:9210 node-1=tcp://node-1:9210}
hosts=${SECRETS_HOSTS:-integrator localhost}
days=${SECRETS_DAYS:-825}
ctl=${SEARCHCTL:-searchctl}
ssl=${OPENSSL:-openssl}
url=${HTTP_URL:-https://localhost:9200}
compose=${COMPOSE_FILE_HINT:-docker/docker-compose.yml}
image=${SEARCH_IMAGE:-gpu-search:gpu}

say() { echo "secrets-init: $*"; }
die() { echo "secrets-init: $*" >&2; exit 1; }

mkdir -p "$dir" || die "cannot create $dir"
[ -w "$dir" ] || die "$dir is not writable"

# Prints how to query with an API key (id:key; empty: a placeholder) and the CA certificate.
usage_lines() {
  if [ -n "${1:-}" ]; then auth=$(printf '%s' "$1" | base64 | tr -d '\n'); else auth="\$(printf %s ID:KEY | base64)"; fi
  say "query the cluster (the CA certificate is $dir/ca.pem; copy it out of the volume with"
  say "  docker compose -f $compose run --rm --no-deps -T secrets cat $dir/ca.pem > search-ca.pem"
  say "  or with podman: podman run --rm -v docker_secrets:$dir:ro $image cat $dir/ca.pem > search-ca.pem):"
  echo "  curl --cacert search-ca.pem -H 'Authorization: ApiKey $auth' '$url/search?q=t12+t38&k=5'"
}

# One more API key, printed once.
new_api_key() {
  idkey=$("$ctl" apikey create --file "$dir/integrator/api-keys" | tail -n 1 | tr -d '\r')
  case $idkey in *:*) ;; *) die "searchctl apikey create printed '$idkey', not id:key" ;; esac
  say "new API key (id:key, shown only now; only its salted hash is stored): $idkey"
  echo "api-key $idkey"
  usage_lines "$idkey"
}

if [ "${1:-}" = apikey ]; then
  [ -d "$dir/integrator" ] || die "$dir/integrator does not exist: run secrets-init.sh without arguments first"
  new_api_key
  say "the integrator reads its key file at start: restart it to accept the new key"
  exit 0
fi
[ $# -eq 0 ] || die "usage: secrets-init.sh [apikey]"

# A CURVE key pair at PREFIX.key / PREFIX.pub, unless there is one.
keypair() {
  if [ -s "$1.key" ] && [ -s "$1.pub" ]; then return 0; fi
  "$ctl" keygen --out "$1" >/dev/null || die "searchctl keygen --out $1 failed"
  say "created the CURVE key pair $1.key / $1.pub"
}

created=0
mkdir -p "$dir/ca" "$dir/integrator"
chmod 0700 "$dir/ca"
chmod 0755 "$dir" "$dir/integrator"

# The CA, then the integrator's certificate (both EC P-256).
if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca/ca.key" ]; then
  "$ssl" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=search cluster CA" -keyout "$dir/ca/ca.key" -out "$dir/ca.pem" 2>/dev/null ||
    die "openssl could not create the CA"
  chmod 0644 "$dir/ca.pem"
  rm -f "$dir/integrator/tls.crt"  # a new CA signs a new certificate
  say "created the CA $dir/ca.pem"
  created=1
fi
if [ ! -s "$dir/integrator/tls.crt" ] || [ ! -s "$dir/integrator/tls.key" ]; then
  san=""
  for h in $hosts 127.0.0.1 ::1; do
    case $h in
      *:* | *[0-9].[0-9]*[0-9]) case $h in *[!0-9a-fA-F.:]*) e="DNS:$h" ;; *) e="IP:$h" ;; esac ;;
      *) e="DNS:$h" ;;
    esac
    case ",$san" in *",$e,"*) ;; *) san="$san$e," ;; esac  # each name once
  done
  san=${san%,}
  ext=$dir/integrator/.ext
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
    "$san" >"$ext"
  "$ssl" req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=${hosts%% *}" \
    -keyout "$dir/integrator/tls.key" -out "$dir/integrator/.csr" 2>/dev/null ||
    die "openssl could not create the integrator's key"
  "$ssl" x509 -req -in "$dir/integrator/.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca/ca.key" -set_serial "0x$("$ssl" rand -hex 8)" \
    -days "$days" -extfile "$ext" -out "$dir/integrator/tls.crt" 2>/dev/null ||
    die "openssl could not sign the integrator's certificate"
  rm -f "$ext" "$dir/integrator/.csr"
  chmod 0644 "$dir/integrator/tls.crt"
  chmod 0600 "$dir/integrator/tls.key"
  say "created the integrator's certificate $dir/integrator/tls.crt ($san)"
  created=1
fi

# CURVE: the integrator's key pair, each node's, who may talk to whom.
keypair "$dir/integrator/curve"
servers=""
for entry in $nodes; do
  name=${entry%%=*}
  case $name in '' | */* | .*) die "bad node name '$name' in SECRETS_NODES" ;; esac
  mkdir -p "$dir/$name"
  chmod 0755 "$dir/$name"
  keypair "$dir/$name/curve"
  cp "$dir/integrator/curve.pub" "$dir/$name/curve-clients.tmp" && mv "$dir/$name/curve-clients.tmp" "$dir/$name/curve-clients"
  chmod 0644 "$dir/$name/curve-clients"
  [ "$entry" = "$name" ] || servers="$servers${entry#*=} $(cat "$dir/$name/curve.pub")
"
done
printf '%s' "$servers" >"$dir/integrator/curve-servers.tmp" && mv "$dir/integrator/curve-servers.tmp" "$dir/integrator/curve-servers"
chmod 0644 "$dir/integrator/curve-servers"

# One API key, the first time.
if [ ! -s "$dir/integrator/api-keys" ]; then
  new_api_key
  created=1
else
  [ $created -eq 1 ] || say "keeping the CA, certificate, CURVE keys and API keys in $dir"
  say "the API key was printed when it was created; another: secrets-init.sh apikey"
  say "  (docker compose -f $compose run --rm --no-deps secrets search-secrets-init apikey)"
  usage_lines ""
fi
