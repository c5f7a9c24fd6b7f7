#!/usr/bin/env bash
# Regenerate the kubeadm fixtures of tests/unit/test_kube_config_edit.py with real kubeadm
# binaries, offline and without a cluster.
#
# Usage: tests/unit/data/kubeadm/regenerate.sh [--build] [VERSION[=KUBEADM] ...]
#
#   VERSION   a directory here with an input/ folder (default: all of them)
#   KUBEADM   the kubeadm binary of that release (default: the gpufleet binaries cache,
#             ${GPUFLEET_CACHE:-~/.cache/gpufleet}/bin/kubernetes/v<VERSION>/kubeadm)
#   --build   build a missing kubeadm from the Go module proxy with gpufleet.build.binaries
#             (one `go build` at a time, under the cache's build lock); a release that
#             gpufleet/build/releases.yaml does not pin is added for this build only.
#
# For every input/<variant>.yaml (InitConfiguration + ClusterConfiguration +
# KubeletConfiguration) it runs, as root, in an empty root file system (--rootfs, so that
# nothing depends on this host and nothing is written outside it):
#
#   KUBEADM_INIT_DRYRUN_DIR=/dry kubeadm init --dry-run --config /input.yaml \
#       --ignore-preflight-errors=all --rootfs <tmp>
#
# and keeps, under <VERSION>/<variant>/:
#   manifests/kube-*.yaml            the static pod manifests (<tmp>/dry/kube-*.yaml)
#   kubelet-config.yaml              /var/lib/kubelet/config.yaml (<tmp>/dry/config.yaml)
#   kubeadm-flags.env                /var/lib/kubelet/kubeadm-flags.env
#   configmap-kubeadm-config.yaml    the kube-system/kubeadm-config ConfigMap kubeadm would create
#   configmap-kubelet-config.yaml    the kube-system/kubelet-config ConfigMap kubeadm would create
#   migrated.yaml                    `kubeadm config migrate --old-config` output (inputs in an
#                                    older kubeadm API only)
# and <VERSION>/init-defaults.yaml from
#   kubeadm config print init-defaults --component-configs KubeletConfiguration
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
cache="${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}"
build=0

if [[ $(id -u) -ne 0 ]]; then
  echo "regenerate.sh: kubeadm --rootfs needs root (chroot); run as root" >&2
  exit 2
fi

specs=()
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) specs+=("$arg") ;;
  esac
done
if [[ ${#specs[@]} -eq 0 ]]; then
  for dir in "$here"/*/input; do
    specs+=("$(basename "$(dirname "$dir")")")
  done
fi

build_kubeadm() {  # VERSION -> builds $cache/bin/kubernetes/v$1/kubeadm
  "$python" - "$1" <<'PY'
import sys, tempfile, yaml
from gpufleet.lab import binaries

version = sys.argv[1]
releases = binaries.load_releases()
if not any(r.version == version for r in releases.releases):
    data = yaml.safe_load(binaries.RELEASES_FILE.read_text())
    etcd = data["kubernetes"]["releases"][-1]["etcd"]
    data["kubernetes"]["releases"].append(
        {"version": version, "etcd": etcd, "optional": True, "note": "kubeadm fixtures"}
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    releases = binaries.load_releases(fh.name)
target = binaries.resolve_target("kubeadm", version, releases)
results = binaries.build([target], releases)
sys.exit(0 if all(r.status in ("built", "cached") for r in results) else 1)
PY
}

extract_configmap() {  # DRY_RUN_OUTPUT NAME -> the ConfigMap object printed by kubeadm
  "$python" - "$1" "$2" <<'PY'
import re, sys

# kubeadm prints "[dryrun] Attached object:" then the object: up to 1.30 every line is
# prefixed with a tab, later releases end it with an empty line.
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
blocks, i = [], 0
while i < len(lines):
    if lines[i] != "[dryrun] Attached object:":
        i += 1
        continue
    i += 1
    tabbed = i < len(lines) and lines[i].startswith("\t")
    block = []
    while i < len(lines):
        line = lines[i]
        if tabbed and not line.startswith("\t"):
            break
        if not tabbed and (line == "" or line.startswith("[")):
            break
        block.append(line[1:] if tabbed else line)
        i += 1
    blocks.append("\n".join(block) + "\n")
for block in blocks:
    if re.search(r"^kind: ConfigMap$", block, re.M) and re.search(
        rf"^  name: {re.escape(sys.argv[2])}$", block, re.M
    ):
        sys.stdout.write(block)
        sys.exit(0)
sys.exit(f"no ConfigMap {sys.argv[2]} in {sys.argv[1]}")
PY
}

for spec in "${specs[@]}"; do
  version="${spec%%=*}"
  kubeadm="$cache/bin/kubernetes/v$version/kubeadm"
  [[ "$spec" == *=* ]] && kubeadm="${spec#*=}"
  out="$here/$version"
  if [[ ! -d "$out/input" ]]; then
    echo "regenerate.sh: no inputs at $out/input" >&2
    exit 2
  fi
  if [[ ! -x "$kubeadm" ]]; then
    if [[ $build -eq 1 ]]; then
      build_kubeadm "$version"
    else
      echo "regenerate.sh: no kubeadm $version at $kubeadm; pass --build or VERSION=PATH" >&2
      exit 2
    fi
  fi
  got="$("$kubeadm" version -o short)"
  if [[ "$got" != "v$version" ]]; then
    echo "regenerate.sh: $kubeadm is $got, not v$version" >&2
    exit 2
  fi
  echo "== kubeadm $got ($kubeadm)"
  "$kubeadm" config print init-defaults --component-configs KubeletConfiguration \
    > "$out/init-defaults.yaml"

  for input in "$out"/input/*.yaml; do
    variant="$(basename "$input" .yaml)"
    dest="$out/$variant"
    root="$(mktemp -d)"
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$root/dry"
    cp "$input" "$root/input.yaml"
    if ! KUBEADM_INIT_DRYRUN_DIR=/dry "$kubeadm" init --dry-run --config /input.yaml \
        --ignore-preflight-errors=all --rootfs "$root" > "$root/init.out" 2>&1; then
      tail -20 "$root/init.out" >&2
      echo "regenerate.sh: kubeadm init --dry-run failed for $input" >&2
      exit 1
    fi
    # the dry-run directory is $KUBEADM_INIT_DRYRUN_DIR (1.31+) or a temporary directory
    # under $KUBEADM_INIT_DRYRUN_DIR/tmp (up to 1.30)
    dry="$(dirname "$(find "$root/dry" -name kube-apiserver.yaml -print -quit)")"
    rm -rf "$dest"
    mkdir -p "$dest/manifests"
    for component in kube-apiserver kube-controller-manager kube-scheduler; do
      cp "$dry/$component.yaml" "$dest/manifests/$component.yaml"
    done
    cp "$dry/config.yaml" "$dest/kubelet-config.yaml"
    cp "$dry/kubeadm-flags.env" "$dest/kubeadm-flags.env"
    extract_configmap "$root/init.out" kubeadm-config > "$dest/configmap-kubeadm-config.yaml"
    extract_configmap "$root/init.out" kubelet-config > "$dest/configmap-kubelet-config.yaml"
    preferred="$(sed -n 's/^apiVersion: \(kubeadm.k8s.io\/.*\)$/\1/p' "$out/init-defaults.yaml" | head -1)"
    if ! grep -q "^apiVersion: $preferred\$" "$input"; then
      "$kubeadm" config migrate --old-config "$input" > "$dest/migrated.yaml"
    fi
    rm -rf "$root"
    trap - EXIT
    echo "   $variant: $(cd "$dest" && find . -type f | sort | tr '\n' ' ')"
  done
  "$kubeadm" version -o short > "$out/KUBEADM_VERSION"
done
