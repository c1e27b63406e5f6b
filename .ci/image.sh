#!/usr/bin/env bash
# The team gateway's image builds and runs: deploy/Containerfile built by buildah from a base CI makes
# offline (no registry to pull from: a Debian bookworm root made by debootstrap from Debian's packages,
# the machine's own apt mirror, and imported), then, in the image: `coffer --version`, and the team
# gateway started and its protected-resource metadata (RFC 9728) fetched. Called by .ci/run.
#
# Where buildah or debootstrap cannot be installed or run (no user namespaces, no mirror), it says so in a
# banner and exits 0: the image is then unchecked, loudly. Where they run, a failed build or smoke fails.
# The debootstrap root is cached as a tarball in $COFFER_CI_CACHE (default ~/.cache/coffer-ci: CI runs
# in a fresh clone, so a cache inside the checkout would never be found again); images live in a
# throwaway storage, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$SECONDS
cache=${COFFER_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coffer-ci}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

skip() {
  echo "################################################################################" >&2
  echo "# IMAGE NOT CHECKED: $*" >&2
  echo "# deploy/Containerfile was neither built nor run here (.ci/image.sh)." >&2
  echo "################################################################################" >&2
  exit 0
}

for tool in buildah debootstrap; do
  if ! command -v "$tool" >/dev/null; then
    $SUDO apt-get install -y -qq "$tool" >/dev/null 2>&1 \
      || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "$tool" >/dev/null 2>&1; } \
      || skip "$tool cannot be installed (apt-get install $tool failed)"
  fi
done

# Images in a storage of their own (vfs: no overlay mounts needed), chroot isolation (no user namespace
# or runtime needed: `podman run` / crun fail here on setrlimit, `buildah run --isolation chroot` works).
store=$(mktemp -d /var/tmp/coffer-image.XXXXXX)
ctr=""
cleanup() {
  if [ -n "$ctr" ]; then bh rm "$ctr" >/dev/null 2>&1 || true; fi
  rm -rf "$store"
}
trap cleanup EXIT
bh() { buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs "$@"; }
bh images >/dev/null 2>&1 || skip "buildah cannot run here: $(bh images 2>&1 | tail -1)"

# The base: debootstrap's minimal bookworm from the mirror apt uses here, cached.
mirror=${COFFER_DEBIAN_MIRROR:-}
[ -n "$mirror" ] || mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
  | grep -oE 'https?://[^ ]+' | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
base_tar="$cache/debian-bookworm-minbase.tar"
if [ ! -s "$base_tar" ]; then
  mkdir -p "$cache"
  t0=$SECONDS
  rootfs=$(mktemp -d /var/tmp/coffer-debootstrap.XXXXXX)
  if ! $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$store/debootstrap.log" 2>&1; then
    tail -5 "$store/debootstrap.log" >&2
    $SUDO rm -rf "$rootfs"
    skip "debootstrap could not make a Debian root from $mirror"
  fi
  $SUDO tar -C "$rootfs" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
  $SUDO rm -rf "$rootfs"
  echo "image.sh: debootstrap made the base root in $((SECONDS - t0)) s ($(du -m "$base_tar" | cut -f1) MB, cached in $base_tar)"
fi

# The imported base carries this machine's extra certificate authorities, so that pip and npm reach
# their registries inside the build as they do here (CI's own base: never published).
t0=$SECONDS
ctr=$(bh from scratch)
bh add "$ctr" "$base_tar" / >/dev/null
extra=(/usr/local/share/ca-certificates/*.crt)
if [ -e "${extra[0]}" ]; then
  for crt in "${extra[@]}"; do bh copy "$ctr" "$crt" /usr/local/share/ca-certificates/ >/dev/null; done
fi
bh config --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "$ctr"
bh commit --quiet "$ctr" coffer-ci-base:bookworm >/dev/null
bh rm "$ctr" >/dev/null
ctr=""
echo "image.sh: base imported in $((SECONDS - t0)) s"

t0=$SECONDS
if ! bh bud --isolation chroot --build-arg BASE=localhost/coffer-ci-base:bookworm -f deploy/Containerfile \
    -t coffer:ci . > "$store/build.log" 2>&1; then
  tail -40 "$store/build.log" >&2
  echo "image.sh: the image did not build (deploy/Containerfile)" >&2
  exit 1
fi
echo "image.sh: built in $((SECONDS - t0)) s ($(bh images --format '{{.Size}}' coffer:ci))"

# The smoke run, in the image as it ships (its user, its environment): the version, then the team gateway.
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ctr=$(bh from coffer:ci)
said=$(bh run --isolation chroot "$ctr" -- coffer --version)
[ "$said" = "coffer $version" ] || { echo "image.sh: the image says '$said', not 'coffer $version'" >&2; exit 1; }
cat > "$store/coffer.toml" <<TOML
[team]
issuer = "https://login.example.com"
resource = "http://127.0.0.1:$port/mcp"
scopes = ["mcp:tools"]
members = ["group:eng"]
TOML
bh copy --chown 10001:10001 "$ctr" "$store/coffer.toml" /var/lib/coffer/coffer.toml >/dev/null
# The gateway and the fetch in one run (the image's python; the provider is never asked for anything).
bh run --isolation chroot "$ctr" -- sh -c "
  coffer serve --http $port --team > /tmp/gateway.log 2>&1 &
  gateway=\$!
  python3 - <<'PY' || { cat /tmp/gateway.log; kill \$gateway; exit 1; }
import json, time, urllib.request
url = 'http://127.0.0.1:$port/.well-known/oauth-protected-resource/mcp'
for _ in range(120):
    try:
        meta = json.load(urllib.request.urlopen(url, timeout=2))
        break
    except OSError:
        time.sleep(0.5)
else:
    raise SystemExit('the gateway never answered ' + url)
assert meta['resource'] == 'http://127.0.0.1:$port/mcp', meta
assert meta['authorization_servers'] == ['https://login.example.com'], meta
print('image.sh: the gateway in the image serves its metadata:', json.dumps(meta))
PY
  kill \$gateway
"
echo "image.sh: the image builds and runs the team gateway ($((SECONDS - started)) s in all)"
