#!/usr/bin/env bash
# Generate the kubeadm files that the dra_feature_gates Molecule scenario puts on its hosts,
# with the real kubeadm of the scenario's release, offline and without a cluster.
#
# Usage: molecule/dra_feature_gates/files/kubeadm/generate.sh [KUBEADM]
#
#   KUBEADM  the kubeadm binary of v1.33.13 (default: the gpufleet binaries cache,
#            ${GPUFLEET_CACHE:-~/.cache/gpufleet}/bin/kubernetes/v1.33.13/kubeadm, built by
#            `lab/build-binaries` from the Go module proxy)
#
# For every input/<variant>.yaml it runs, as root, in an empty root file system (--rootfs,
# so that nothing depends on this host and nothing is written outside it), the same way as
# tests/unit/data/kubeadm/regenerate.sh:
#
#   KUBEADM_INIT_DRYRUN_DIR=/dry kubeadm init --dry-run --config /input.yaml \
#       --ignore-preflight-errors=all --rootfs <tmp>
#
# and keeps, under 1.33.13/<variant>/:
#   kubelet-config.yaml     the KubeletConfiguration kubeadm writes to /var/lib/kubelet/config.yaml
#   manifests/kube-*.yaml   the static pod manifests kubeadm writes to /etc/kubernetes/manifests
#                           (control-plane variant only; the others differ in the kubelet only)
# and 1.33.13/KUBEADM_VERSION, the `kubeadm version -o short` that wrote them.
set -euo pipefail

version=1.33.13
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}"
kubeadm="${1:-$cache/bin/kubernetes/v$version/kubeadm}"
out="$here/$version"

if [[ $(id -u) -ne 0 ]]; then
  echo "generate.sh: kubeadm --rootfs needs root (chroot); run as root" >&2
  exit 2
fi
if [[ ! -x "$kubeadm" ]]; then
  echo "generate.sh: no kubeadm $version at $kubeadm; build it with" \
    "'lab/build-binaries' (release $version) or pass its path" >&2
  exit 2
fi
got="$("$kubeadm" version -o short)"
if [[ "$got" != "v$version" ]]; then
  echo "generate.sh: $kubeadm is $got, not v$version" >&2
  exit 2
fi
echo "== kubeadm $got ($kubeadm)"

root=""
trap '[[ -n "$root" ]] && rm -rf "$root"' EXIT
for input in "$here"/input/*.yaml; do
  variant="$(basename "$input" .yaml)"
  dest="$out/$variant"
  root="$(mktemp -d)"
  mkdir -p "$root/dry"
  cp "$input" "$root/input.yaml"
  if ! KUBEADM_INIT_DRYRUN_DIR=/dry "$kubeadm" init --dry-run --config /input.yaml \
      --ignore-preflight-errors=all --rootfs "$root" > "$root/init.out" 2>&1; then
    tail -20 "$root/init.out" >&2
    echo "generate.sh: kubeadm init --dry-run failed for $input" >&2
    exit 1
  fi
  dry="$(dirname "$(find "$root/dry" -name kube-apiserver.yaml -print -quit)")"
  rm -rf "$dest"
  mkdir -p "$dest"
  if [[ "$variant" == control-plane ]]; then
    mkdir -p "$dest/manifests"
    for component in kube-apiserver kube-controller-manager kube-scheduler; do
      cp "$dry/$component.yaml" "$dest/manifests/$component.yaml"
    done
  fi
  cp "$dry/config.yaml" "$dest/kubelet-config.yaml"
  rm -rf "$root"
  root=""
  echo "   $variant: $(cd "$dest" && find . -type f | sort | tr '\n' ' ')"
done
echo "$got" > "$out/KUBEADM_VERSION"
